/**
 * The chaos suite (issue 22): three real nodes in network namespaces under steady chat load through one
 * node, one fault per scenario, figures per scenario, and the promises: nothing acknowledged is lost, no
 * engine outlives its node, no chat hangs past 10 s, and the model serves again within 40 s of the fault.
 */
import { afterEach, describe, expect, it } from "vitest";
import { runnerTag, waitForState, type WireState } from "../helpers/cluster.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { json, oneMaster, sameLog, view, waitFor } from "../helpers/multinode.ts";
import { makeSegment, netnsAvailable, type Segment } from "../helpers/netns.ts";
import {
  type Ack,
  chatFigures,
  ChatLoad,
  type Figures,
  lostEvents,
  oneChat,
  orphans,
  type Proc,
  readLog,
  recoverySeconds,
  report,
  startWriter,
  sweep,
  type Writer,
} from "./harness.ts";

const MODEL = "skulk-test/chaos-tiny";
const PORT = 52415;
/** Load before the fault, so a scenario starts from a cluster that serves. */
const BASELINE_MS = 5_000;
/** A cut link or a full disk lasts this long, then heals. */
const FAULT_MS = 20_000;
/** Load and writes go on this long after the fault: past the default node timeout (30 s) and the 40 s promise. */
const WINDOW_MS = 45_000;
/** Engines still alive this long after their node's death count as orphans. */
const ORPHAN_GRACE_MS = 15_000;
/** The promise: the model serves again within this many seconds of the fault. */
const RECOVERY_S = 40;
/** Generous for a loaded 2-core machine: setup up to ~3 min, the window, convergence up to 1 min. */
const SCENARIO_TIMEOUT = 600_000;

const available = netnsAvailable();

interface Slot {
  netns: string;
  address: string;
  dataDir: string;
  env: Record<string, string>;
  daemon: Daemon | null;
}

interface Scene {
  segment: Segment;
  slots: Slot[];
  /** Every daemon started, restarted ones included, for teardown. */
  started: Daemon[];
  mounts: string[];
  writers: Writer[];
  load: ChatLoad | null;
}

let scene: Scene | null = null;

afterEach(async (ctx) => {
  const s = scene;
  scene = null;
  if (!s) return;
  if (ctx.task.result?.state === "fail") {
    // The nodes' own account of the failure: their last warnings, errors and runner lines.
    for (const d of s.started) {
      const lines = d.log().split("\n").filter((l) =>
        /"level":"(warning|error|fatal)"|runner|engine/.test(l)
      );
      console.error(`--- ${d.nodeId} (pid ${d.pid})\n${lines.slice(-12).join("\n")}`);
    }
  }
  await s.load?.stop();
  await Promise.all(s.writers.map((w) => w.stop()));
  await Promise.all(s.started.map((d) => d.kill({ orphanEngines: true })));
  // Whatever is still in the namespaces (a dead node's engines) goes before the namespaces do.
  await sweep(s.slots.map((x) => x.netns));
  for (const m of s.mounts) {
    const out = new Deno.Command("umount", { args: [m], stderr: "null" }).outputSync();
    if (!out.success) new Deno.Command("umount", { args: ["-l", m] }).outputSync();
  }
  s.segment.remove();
  for (const x of s.slots) Deno.removeSync(x.dataDir, { recursive: true });
});

const sleepUntil = (t: number) => new Promise((r) => setTimeout(r, Math.max(0, t - Date.now())));

async function start(s: Scene, i: number): Promise<Daemon> {
  const slot = s.slots[i];
  const d = await startDaemon({
    netns: slot.netns,
    urlHost: slot.address,
    dataDir: slot.dataDir,
    args: ["--api-host", "0.0.0.0", "--api-port", String(PORT)],
    env: slot.env,
    timeoutMs: 120_000,
  });
  s.started.push(d);
  slot.daemon = d;
  return d;
}

/** The model's instance once every runner of it is ready: its kind, nodes and (pooled) driver and donors. */
function servingInstance(st: WireState): { kind: string; nodes: string[]; donors: string[] } | null {
  for (const inst of Object.values(st.instances ?? {})) {
    // deno-lint-ignore no-explicit-any
    const [kind, body] = Object.entries(inst as Record<string, any>)[0];
    if (body.shardAssignments.modelId !== MODEL) continue;
    const runners = Object.keys(body.shardAssignments.runnerToShard);
    if (!runners.every((r) => runnerTag(st, r) === "RunnerReady")) continue;
    return {
      kind,
      nodes: Object.keys(body.shardAssignments.nodeToRunner),
      donors: Object.keys(body.donorEndpoints ?? {}),
    };
  }
  return null;
}

async function chatOnce(url: string): Promise<boolean> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
    signal: AbortSignal.timeout(30_000),
  });
  await res.body?.cancel();
  return res.ok;
}

/**
 * Three nodes in one segment, node 0 started first (so it leads), the tiny model in every catalogue and
 * placed by the planner: on node 1 (it reports the most memory) for a single-node model, across all three
 * for a pool (each lends too little to hold it alone).
 */
async function cluster(o: { pooled?: boolean; tmpfsNode?: number } = {}): Promise<Scene> {
  const segment = makeSegment(3);
  const s: Scene = { segment, slots: [], started: [], mounts: [], writers: [], load: null };
  scene = s;
  const bins = {
    SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
    SKULK_RPC_SERVER_BIN: await engineBinary("ggml-rpc-server"),
    SKULK_TEST_MODE: "1",
  };
  for (let i = 0; i < 3; i++) {
    const dataDir = tempDir("skulk-chaos-");
    if (o.tmpfsNode === i) {
      // A small disk of its own that the scenario can fill; the filler is what makes it full.
      const out = new Deno.Command("mount", { args: ["-t", "tmpfs", "-o", "size=8m", "tmpfs", dataDir] })
        .outputSync();
      if (!out.success) throw new Error(`mount tmpfs: ${new TextDecoder().decode(out.stderr)}`);
      s.mounts.push(dataDir);
    }
    const memory = o.pooled ? "263MiB" : i === 1 ? "3GiB" : "2GiB";
    s.slots.push({ ...segment.node(i), dataDir, env: { ...bins, SKULK_MEMORY_LIMIT: memory }, daemon: null });
  }
  const first = await start(s, 0);
  await waitFor("node 0 leading alone", async () => (await view(first.url)).role === "master", 60_000);
  await Promise.all([start(s, 1), start(s, 2)]);
  const urls = s.slots.map((x) => x.daemon!.url);
  await oneMaster(urls, 90_000);

  const path = await tinyModel(o.pooled ? { layers: 8 } : {});
  await waitFor("the card taken by the cluster", async () => {
    const res = await fetch(`${first.url}/models/add`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_id: MODEL, gguf_path: path }),
    });
    await res.body?.cancel();
    return res.ok;
  }, 60_000);
  for (const u of urls) {
    await waitFor(
      `the card in ${u}'s catalogue`,
      async () => (await (await fetch(`${u}/models`)).text()).includes(MODEL),
      60_000,
    );
  }
  const q = `model_id=${encodeURIComponent(MODEL)}`;
  if (o.pooled) {
    await waitFor("a 3-node pool in the previews", async () => {
      const { previews } = await json<
        { previews: { instance_meta: string; node_count: number; error: string | null }[] }
      >(
        `${first.url}/instance/previews?${q}`,
      );
      return previews.some((p) => p.instance_meta === "LlamaRpc" && p.error === null && p.node_count >= 3);
    }, 90_000);
  } else {
    // Every node's memory must have arrived, or the planner would pick among fewer nodes.
    const node1 = s.slots[1].daemon!.nodeId;
    await waitFor("the planner choosing node 1", async () => {
      const inst = await json<Record<string, { shardAssignments: { nodeToRunner: Record<string, string> } }>>(
        `${first.url}/instance/placement?${q}`,
      );
      return Object.keys(Object.values(inst)[0].shardAssignments.nodeToRunner).includes(node1);
    }, 90_000);
  }
  const placed = await fetch(`${first.url}/place_instance`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(
      o.pooled ? { model_id: MODEL, instance_meta: "LlamaRpc", min_nodes: 3 } : { model_id: MODEL },
    ),
  });
  expect(placed.status, await placed.text()).toBe(200);
  for (const u of urls) {
    await waitForState(
      u,
      (st) => servingInstance(st) !== null,
      `the model ready at ${u}`,
      180_000,
    );
  }
  return s;
}

const countBy = (xs: string[]) => {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
};
const liveDaemons = (s: Scene) => s.slots.map((x) => x.daemon).filter((d): d is Daemon => d !== null);
const slotOf = (s: Scene, nodeId: string) => s.slots.findIndex((x) => x.daemon?.nodeId === nodeId);

interface Plan {
  name: string;
  /** The node the load goes through; never the one the fault hits. */
  entry: number;
  fault: () => Promise<void> | void;
  /** For faults that last FAULT_MS (a cut link, a full disk). */
  heal?: () => Promise<void> | void;
  /** Extra observations made while the fault lasts, reported as notes. */
  during?: () => Promise<string | null>;
}

/** Load, writers, the fault (and heal), then the figures, reported before the assertions so they always print. */
async function run(s: Scene, p: Plan): Promise<Figures> {
  const entry = s.slots[p.entry].daemon!;
  await waitFor("a chat through the entry node", () => chatOnce(entry.url), 60_000);
  s.load = new ChatLoad(entry.url, MODEL);
  const writeFor = Math.ceil((BASELINE_MS + WINDOW_MS) / 1000) + 5;
  s.writers = s.slots.map((x, i) => startWriter(x.netns, i, PORT, writeFor));
  await new Promise((r) => setTimeout(r, BASELINE_MS));
  const faultAt = Date.now();
  await p.fault();
  const notes: string[] = [];
  // Engines must die with their node within seconds: look once ORPHAN_GRACE_MS after the fault and at the end.
  const nsNames = s.slots.map((x) => x.netns);
  const early = new Promise<Proc[]>((res) => setTimeout(() => res(orphans(nsNames)), ORPHAN_GRACE_MS));
  const during = p.during?.().then((n) => n && notes.push(n));
  if (p.heal) {
    await sleepUntil(faultAt + FAULT_MS);
    await p.heal();
  }
  await sleepUntil(faultAt + WINDOW_MS);
  await during;
  const results = await s.load.stop();
  s.load = null;
  const acks: Ack[] = (await Promise.all(s.writers.map((w) => w.stop()))).flat();
  s.writers = [];

  const live = liveDaemons(s);
  const urls = live.map((d) => d.url);
  let converged = true;
  try {
    await oneMaster(urls, 60_000);
    await sameLog(urls, 60_000);
  } catch (e) {
    converged = false;
    notes.push(`no convergence: ${(e as Error).message.slice(0, 120)}`);
  }
  const logs = await Promise.all(live.map((d) => readLog(d.dataDir)));
  const { lost, missing } = lostEvents(acks, logs);
  const left = [...new Map([...await early, ...orphans(nsNames)].map((x) => [x.pid, x])).values()];
  const f: Figures = {
    scenario: p.name,
    recovery_s: recoverySeconds(results, faultAt),
    ...chatFigures(results, faultAt),
    acked: new Set(acks.map((a) => a.id)).size,
    lost: lost.length,
    lost_by_node: Object.fromEntries(
      missing.map((n, i) => [String(slotOf(s, live[i].nodeId)), n]).filter(([, n]) => n !== 0),
    ),
    lost_acked_via: countBy(acks.filter((a) => lost.includes(a.id)).map((a) => String(a.node))),
    orphans: left.length,
    orphan_binaries: left.map((x) => x.exe.split("/").pop()!),
    converged,
    notes,
  };
  report(f);
  return f;
}

function assertPromises(f: Figures): void {
  expect.soft(f.lost, "acknowledged events lost").toBe(0);
  expect.soft(f.orphans, `orphan processes (${f.orphan_binaries.join(", ")})`).toBe(0);
  expect.soft(f.hangs, "chats that hung past 10 s").toBe(0);
  expect.soft(f.recovery_s, "the model serving again at the end").not.toBeNull();
  expect.soft(f.recovery_s ?? Infinity, "seconds from the fault to serving again").toBeLessThanOrEqual(
    RECOVERY_S,
  );
}

/** Roles in a single-node scene: the master, the serving node, and the third node the load goes through. */
async function roles(s: Scene) {
  const urls = liveDaemons(s).map((d) => d.url);
  const master = slotOf(s, await oneMaster(urls));
  const st = await json<WireState>(`${urls[0]}/state`);
  const serving = slotOf(s, servingInstance(st)!.nodes[0]);
  const entry = [0, 1, 2].find((i) => i !== master && i !== serving);
  // Node 0 leads and node 1 serves by construction; anything else would blur which role a fault hits.
  if (entry === undefined) throw new Error(`setup: the model was placed on the master (node ${master})`);
  return { master, serving, entry };
}

/** kill -9 of a node's daemon alone: its engines are left to show whether they die with it. */
async function killNode(s: Scene, i: number): Promise<void> {
  await s.slots[i].daemon!.kill({ orphanEngines: true });
  s.slots[i].daemon = null;
}

describe.skipIf(!available)("chaos: three nodes in network namespaces under steady chat load", () => {
  it("kill -9 of the serving node", async () => {
    const s = await cluster();
    const r = await roles(s);
    assertPromises(
      await run(s, { name: "kill-serving", entry: r.entry, fault: () => killNode(s, r.serving) }),
    );
  }, SCENARIO_TIMEOUT);

  it("kill -9 of the master", async () => {
    const s = await cluster();
    const r = await roles(s);
    assertPromises(await run(s, { name: "kill-master", entry: r.entry, fault: () => killNode(s, r.master) }));
  }, SCENARIO_TIMEOUT);

  it("kill -9 of a donor of a pooled instance", async () => {
    const s = await cluster({ pooled: true });
    const urls = liveDaemons(s).map((d) => d.url);
    const master = slotOf(s, await oneMaster(urls));
    const pool = servingInstance(await json<WireState>(`${urls[0]}/state`))!;
    const donors = pool.donors.map((n) => slotOf(s, n));
    const victim = donors.find((i) => i !== master) ?? donors[0];
    const entry = [0, 1, 2].filter((i) =>
      i !== victim
    ).sort((a, b) => Number(a === master) - Number(b === master))[0];
    assertPromises(await run(s, { name: "kill-donor", entry, fault: () => killNode(s, victim) }));
  }, SCENARIO_TIMEOUT);

  for (const [role, name] of [["serving", "partition-follower"], ["master", "partition-master"]] as const) {
    it(`a 20 s partition of the ${role === "master" ? "master" : "serving node (a follower)"}`, async () => {
      const s = await cluster();
      const r = await roles(s);
      const cut = r[role];
      assertPromises(
        await run(s, {
          name,
          entry: r.entry,
          fault: () => s.segment.linkDown(cut),
          heal: () => s.segment.linkUp(cut),
        }),
      );
    }, SCENARIO_TIMEOUT);
  }

  it("a full disk on the serving node for 20 s", async () => {
    const s = await cluster({ tmpfsNode: 1 });
    const r = await roles(s);
    const filler = `${s.slots[r.serving].dataDir}/chaos-filler`;
    const full = s.slots[r.serving].daemon!;
    assertPromises(
      await run(s, {
        name: "disk-full",
        entry: r.entry,
        fault: () => {
          const f = Deno.openSync(filler, { write: true, create: true });
          const chunk = new Uint8Array(64 * 1024);
          try {
            for (;;) f.writeSync(chunk);
          } catch { /* ENOSPC: the disk is full */ }
          f.close();
        },
        heal: () => Deno.removeSync(filler),
        // What the full node says and how far behind it is halfway through (issue 22 item 5).
        during: async () => {
          await new Promise((res) => setTimeout(res, FAULT_MS / 2));
          const res = await fetch(`${full.url}/healthz`, { signal: AbortSignal.timeout(5000) });
          const health = (await res.text()).match(/"status":"[^"]*"/)?.[0] ?? "";
          const behind = (await view(s.slots[r.master].daemon!.url)).lastIdx - (await view(full.url)).lastIdx;
          const filled = (Deno.statSync(filler).size / 2 ** 20).toFixed(1);
          return `while full (${filled} MiB filler): healthz ${res.status} ${health}, ${behind} events behind the master`;
        },
      }),
    );
  }, SCENARIO_TIMEOUT);

  it("a restart of the serving node", async () => {
    const s = await cluster();
    const r = await roles(s);
    assertPromises(
      await run(s, {
        name: "restart-serving",
        entry: r.entry,
        fault: async () => {
          await s.slots[r.serving].daemon!.stop();
          s.slots[r.serving].daemon = null;
          await start(s, r.serving);
        },
        // Where a failure lies, halfway through: the restarted node itself, or the forward to it.
        during: async () => {
          await new Promise((res) => setTimeout(res, WINDOW_MS / 2));
          const back = s.slots[r.serving].daemon;
          const direct = back ? await oneChat(back.url, MODEL, false) : "not started";
          return `at +${WINDOW_MS / 2000} s a chat through the restarted node itself: ${direct ?? "ok"}`;
        },
      }),
    );
  }, SCENARIO_TIMEOUT);
});
