/**
 * Pooled GGUF (llama.cpp RPC) on real nodes: a tiny model that fits no single node (each node lends at
 * most SKULK_MEMORY_LIMIT) runs as a driver plus donors, answers chat through a node outside the pool,
 * heals after a donor's engine or the driver node dies, and a donor with another RPC protocol is refused.
 * The namespace part skips only when this machine cannot create network namespaces.
 */
import { afterEach, describe, expect, it } from "vitest";
import { listensIn } from "../../src/engines/rpc-server.ts";
import { pidAlive, waitForState, type WireState } from "../helpers/cluster.ts";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { makeSegment, netnsAvailable, type Segment } from "../helpers/netns.ts";

const MODEL = "skulk-test/tiny-pooled";
/**
 * The 8-layer tiny model needs ~279 MB on one node (256 MiB overhead floor + weights + KV); each node
 * lends 263 MiB, so one node never fits and two or more pool (each lends ~7 MB beyond its floor).
 */
const MEMORY_LIMIT = "263MiB";

const available = netnsAvailable();
const running: Daemon[] = [];
const cleanups: (() => void)[] = [];
let segment: Segment | null = null;

afterEach(async () => {
  const done = running.splice(0);
  await Promise.all(done.map((d) => d.stop()));
  for (const dir of new Set(done.map((d) => d.dataDir))) Deno.removeSync(dir, { recursive: true });
  for (const c of cleanups.splice(0)) c();
  segment?.remove();
  segment = null;
});

interface RunnerInfo {
  runnerId: string;
  instanceId: string;
  role: "single" | "driver" | "donor";
  phase: string;
  engine:
    | { kind: string; pid: number | null; command: string[]; logHead: string[]; logTail: string[] }
    | null;
}
const runnersOf = (d: Daemon) =>
  json<{ runners: RunnerInfo[] }>(`${d.url}/node/runners`).then((r) => r.runners);

type Pool = {
  instanceId: string;
  driverNode: string;
  donorEndpoints: Record<string, string>;
  nodes: string[];
};

/** The model's instance in /state once every runner is ready. */
function readyInstance(s: WireState): Pool | null {
  for (const [id, inst] of Object.entries(s.instances ?? {})) {
    // deno-lint-ignore no-explicit-any
    const [kind, body] = Object.entries(inst as Record<string, any>)[0];
    if (body.shardAssignments.modelId !== MODEL) continue;
    const runners = Object.keys(body.shardAssignments.runnerToShard);
    if (!runners.every((r) => s.runners?.[r] && "RunnerReady" in s.runners[r])) return null;
    return {
      instanceId: id,
      driverNode: kind === "LlamaRpcInstance"
        ? body.driverNode
        : Object.keys(body.shardAssignments.nodeToRunner)[0],
      donorEndpoints: body.donorEndpoints ?? {},
      nodes: Object.keys(body.shardAssignments.nodeToRunner),
    };
  }
  return null;
}

async function chat(d: Daemon): Promise<{ status: number; text: string }> {
  const res = await fetch(`${d.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "Hello there" }],
      max_tokens: 8,
    }),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: res.status, text: await res.text() };
}

async function addModel(d: Daemon, path: string): Promise<void> {
  const res = await fetch(`${d.url}/models/add`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model_id: MODEL, gguf_path: path }),
  });
  const text = await res.text();
  // A follower hands the card to the master; it may answer before the card is replicated back.
  expect([200, 503], text).toContain(res.status);
  await waitFor("the card in the catalogue", async () => {
    const r = await fetch(`${d.url}/models`);
    return (await r.text()).includes(MODEL);
  });
}

async function placePool(d: Daemon, minNodes: number): Promise<string> {
  // Telemetry from enough nodes must have arrived: wait until a preview offers a pool that wide.
  await waitFor(`a ${minNodes}-node pool in the previews`, async () => {
    const { previews } = await json<
      { previews: { instance_meta: string; node_count: number; error: string | null }[] }
    >(
      `${d.url}/instance/previews?model_id=${encodeURIComponent(MODEL)}`,
    );
    return previews.some((p) =>
      p.instance_meta === "LlamaRpc" && p.error === null && p.node_count >= minNodes
    );
  }, 60_000);
  const res = await fetch(`${d.url}/place_instance`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model_id: MODEL, instance_meta: "LlamaRpc", min_nodes: minNodes }),
  });
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.instance_id;
}

async function historyRows(
  d: Daemon,
): Promise<{ id: string; outcome: string; reason: string | null; shape: string }[]> {
  const r = await skulk([
    "sql",
    "--data-dir",
    d.dataDir,
    "--json",
    "SELECT id, outcome, reason, shape FROM instances ORDER BY created_at",
  ]);
  return JSON.parse(r.stdout);
}

/** A bin dir whose build.json claims another ggml RPC protocol: a node running an older engine build. */
async function otherProtocolBuild(): Promise<string> {
  const dir = tempDir("skulk-oldbuild-");
  cleanups.push(() => Deno.removeSync(dir, { recursive: true }));
  Deno.mkdirSync(`${dir}/bin`);
  Deno.symlinkSync(await engineBinary("llama-server"), `${dir}/bin/llama-server`);
  Deno.symlinkSync(await engineBinary("ggml-rpc-server"), `${dir}/bin/ggml-rpc-server`);
  Deno.writeTextFileSync(
    `${dir}/build.json`,
    JSON.stringify({ llamaCppCommit: "old", backend: "cpu", rpcProtocol: "5.0.0" }),
  );
  return `${dir}/bin/llama-server`;
}

/** llama.cpp's load log line for the share of the weights an RPC device holds. */
const modelBufferOn = (endpoint: string) =>
  new RegExp(`RPC\\d+\\[${endpoint.replaceAll(".", "\\.")}\\] model buffer size`);

function dumpLogs(): void {
  for (const d of running) {
    const lines = d.log().split("\n").filter((l) => /healing|worker|runner|engine/.test(l));
    console.error(`--- ${d.nodeId}\n${lines.slice(-40).join("\n")}`);
  }
}

describe("pooled GGUF over loopback", () => {
  it("runs a driver plus two donors on one machine and serves chat", async ({ onTestFailed }) => {
    onTestFailed(dumpLogs);
    const env = {
      SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
      SKULK_MEMORY_LIMIT: MEMORY_LIMIT,
    };
    const path = await tinyModel({ layers: 8 });
    const a = await startDaemon({ args: ["--no-mdns"], env, timeoutMs: 40_000 });
    running.push(a);
    for (let i = 0; i < 2; i++) {
      running.push(
        await startDaemon({ args: ["--no-mdns", "--peer", `127.0.0.1:${a.port}`], env, timeoutMs: 40_000 }),
      );
    }
    await oneMaster(running.map((d) => d.url), 45_000);
    await addModel(a, path);
    const id = await placePool(a, 3);
    const s = await waitForState(a.url, (s) => readyInstance(s) !== null, "the pool to serve", 120_000);
    const pool = readyInstance(s)!;
    expect(pool.instanceId).toBe(id);
    expect(Object.keys(pool.donorEndpoints).length).toBe(2);
    for (const d of running) {
      const r = await chat(d);
      expect(r.status, r.text).toBe(200);
      expect(JSON.parse(r.text).choices[0].message.content.length).toBeGreaterThan(0);
    }
    const driver = running.find((d) => d.nodeId === pool.driverNode)!;
    const [mine] = await runnersOf(driver);
    expect(mine.role).toBe("driver");
    const log = [...mine.engine!.logHead, ...mine.engine!.logTail].join("\n");
    for (const ep of Object.values(pool.donorEndpoints)) expect(log).toMatch(modelBufferOn(ep));
    const pids = (await Promise.all(running.map(runnersOf))).flat().map((r) => r.engine!.pid!);
    expect(pids.length).toBe(3);
    // A donor node killed with kill -9 takes its ggml-rpc-server along (engines die with their node).
    const donor = running.find((d) => d.nodeId !== pool.driverNode && d !== a)!;
    const [lent] = await runnersOf(donor);
    expect(lent.role).toBe("donor");
    expect(lent.engine!.kind).toBe("ggml-rpc-server");
    await donor.kill({ orphanEngines: true });
    await waitFor(
      "the donor's ggml-rpc-server to die with its node",
      () => !pidAlive(lent.engine!.pid!),
      10_000,
      20,
    );
    // Deleting the instance stops every engine of the pool on every node.
    await (await fetch(`${a.url}/instance/${id}`, { method: "DELETE" })).body?.cancel();
    await waitFor("every engine of the pool gone", () => pids.every((p) => !pidAlive(p)), 20_000);
  }, 240_000);
});

describe("healing a pool over loopback", () => {
  it(
    "places a pool whose node is killed on the survivor, saying min_nodes 2 could not be kept",
    async ({ onTestFailed }) => {
      onTestFailed(dumpLogs);
      // No memory limit here: the survivor can hold the model alone once the pool cannot be kept.
      const env = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), SKULK_NODE_TIMEOUT: "10" };
      const a = await startDaemon({
        args: ["--no-mdns", "--force-master", "--no-worker"],
        env,
        timeoutMs: 40_000,
      });
      running.push(a);
      const workers: Daemon[] = [];
      for (let i = 0; i < 2; i++) {
        workers.push(
          await startDaemon({ args: ["--no-mdns", "--peer", `127.0.0.1:${a.port}`], env, timeoutMs: 40_000 }),
        );
      }
      running.push(...workers);
      await oneMaster(running.map((d) => d.url), 45_000);
      await addModel(a, await tinyModel({ layers: 8 }));
      const id = await placePool(a, 2);
      let s = await waitForState(a.url, (s) => readyInstance(s) !== null, "the pool to serve", 120_000);
      expect(readyInstance(s)!.instanceId).toBe(id);
      expect(readyInstance(s)!.nodes.length).toBe(2);
      const victim = workers.find((d) => d.nodeId === readyInstance(s)!.driverNode)!;
      const survivor = workers.find((d) => d !== victim)!;

      const killedAt = Date.now();
      await victim.kill();
      running.splice(running.indexOf(victim), 1);
      cleanups.push(() => Deno.removeSync(victim.dataDir, { recursive: true }));
      s = await waitForState(
        a.url,
        (s) => readyInstance(s) !== null && readyInstance(s)!.instanceId !== id,
        "the model placed again after the driver node's death",
        40_000,
      );
      const healed = readyInstance(s)!;
      expect(healed.nodes).toEqual([survivor.nodeId]);
      await waitFor(
        "the chat answering",
        async () => (await chat(a)).status === 200,
        killedAt + 40_000 - Date.now(),
      );
      console.log(
        `kill -9 of a pool's driver to the model answering on one node: ${
          ((Date.now() - killedAt) / 1000).toFixed(1)
        } s`,
      );
      const row = (await historyRows(a)).find((r) => r.id === healed.instanceId)!;
      expect(row.shape).toBe("MlxRing/Pipeline");
      expect(row.reason).toContain(`heals ${id} after node ${victim.nodeId} timed out: placed on one node`);
      expect(row.reason).toMatch(
        /; min_nodes 2 not honoured \(as placed \(LlamaRpc, min_nodes 2\): .*no pool is possible: 1 node\(s\) can join an RPC pool/,
      );
    },
    240_000,
  );
});

describe.skipIf(!available)("pooled GGUF in network namespaces", () => {
  it(
    "serves through a fourth node, refuses another RPC protocol, and heals after a donor's engine or the driver node dies",
    async ({ onTestFailed }) => {
      onTestFailed(dumpLogs);
      segment = makeSegment(4);
      const path = await tinyModel({ layers: 8 });
      const good = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") };
      const old = { SKULK_LLAMA_SERVER_BIN: await otherProtocolBuild() };
      const nodes: Daemon[] = [];
      for (let i = 0; i < 4; i++) {
        const { netns, address } = segment.node(i);
        const d = await startDaemon({
          netns,
          urlHost: address,
          args: ["--api-host", "0.0.0.0", "--api-port", "52415"],
          env: { ...(i === 3 ? old : good), SKULK_MEMORY_LIMIT: MEMORY_LIMIT, SKULK_NODE_TIMEOUT: "4" },
          timeoutMs: 40_000,
        });
        running.push(d);
        nodes.push(d);
      }
      const [a, , , outsider] = nodes;
      const addressOf = (nodeId: string) =>
        segment!.node(nodes.findIndex((d) => d.nodeId === nodeId)).address;
      await oneMaster(nodes.map((d) => d.url), 45_000);
      await addModel(outsider, path);

      // The outsider speaks another RPC protocol: asking for it in a pool is a preview error, not a crash at load.
      const { previews } = await waitFor("previews naming the protocol mismatch", async () => {
        const r = await json<{ previews: { instance_meta: string; error: string | null }[] }>(
          `${outsider.url}/instance/previews?model_id=${
            encodeURIComponent(MODEL)
          }&node_ids=${outsider.nodeId},${a.nodeId}`,
        );
        return r.previews.some((p) => p.instance_meta === "LlamaRpc" && /RPC protocol/.test(p.error ?? ""))
          ? r
          : null;
      });
      const refusal = previews.find((p) => p.instance_meta === "LlamaRpc")!.error!;
      expect(refusal).toContain("5.0.0");
      expect(refusal).toContain("6.0.0");

      await placePool(outsider, 3);
      let s = await waitForState(
        outsider.url,
        (s) => readyInstance(s) !== null,
        "the pool to serve",
        120_000,
      );
      const first = readyInstance(s)!;
      expect(first.nodes.sort()).toEqual(nodes.slice(0, 3).map((d) => d.nodeId).sort());
      expect(first.nodes).not.toContain(outsider.nodeId);
      for (const [node, ep] of Object.entries(first.donorEndpoints)) {
        expect(ep.split(":")[0]).toBe(addressOf(node));
      }
      let r = await chat(outsider);
      expect(r.status, r.text).toBe(200);

      const driver = nodes.find((d) => d.nodeId === first.driverNode)!;
      const [drv] = await runnersOf(driver);
      const log = [...drv.engine!.logHead, ...drv.engine!.logTail].join("\n");
      for (const ep of Object.values(first.donorEndpoints)) expect(log).toMatch(modelBufferOn(ep));
      const donorNode = nodes.find((d) => d.nodeId === Object.keys(first.donorEndpoints)[0])!;
      const [donor] = await runnersOf(donorNode);
      expect(donor.role).toBe("donor");
      expect(donor.engine!.command).toEqual(
        expect.arrayContaining(["-H", addressOf(donorNode.nodeId), "-c"]),
      );
      expect(donor.engine!.logHead.join("\n")).toContain("Starting RPC server v6.0.0");
      expect(donor.engine!.logTail.join("\n")).toContain("Accepted client connection");
      // Bound to the driver's link only: its namespace's socket table has the donor on that address,
      // not on the wildcard or loopback.
      const port = Number(first.donorEndpoints[donorNode.nodeId].split(":")[1]);
      const table = new TextDecoder().decode(
        new Deno.Command("ip", {
          args: ["netns", "exec", segment.node(nodes.indexOf(donorNode)).netns, "cat", "/proc/net/tcp"],
          stdout: "piped",
        }).outputSync().stdout,
      );
      expect(listensIn(table, addressOf(donorNode.nodeId), port)).toBe(true);
      expect(listensIn(table, "0.0.0.0", port)).toBe(false);
      expect(listensIn(table, "127.0.0.1", port)).toBe(false);
      const firstPids = (await Promise.all(nodes.map(runnersOf))).flat().map((x) => x.engine!.pid!);

      // kill -9 of a donor's engine: the whole instance is torn down and placed again without that node,
      // and a request streaming at that moment ends with an error instead of hanging.
      const inflight = await fetch(`${outsider.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: "Tell me a long story" }],
          max_tokens: 3500,
          ignore_eos: true,
          stream: true,
        }),
      });
      const reader = inflight.body!.getReader();
      let streamed = "";
      while (!/"content":"[^"]/.test(streamed)) {
        streamed += new TextDecoder().decode((await reader.read()).value);
      }
      Deno.kill(donor.engine!.pid!, "SIGKILL");
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        streamed += new TextDecoder().decode(value);
      }
      expect(streamed.slice(-600)).toMatch(
        /"error":\{"message":"the engine serving this model failed during the request: [^"]*(stopped while serving|killed|exited)/,
      );
      expect(streamed).not.toMatch(/"finish_reason":"length"/);
      s = await waitForState(
        outsider.url,
        (s) => readyInstance(s) !== null && readyInstance(s)!.instanceId !== first.instanceId,
        "the pool re-placed after the donor's death",
        120_000,
      );
      const second = readyInstance(s)!;
      expect(second.nodes).not.toContain(donorNode.nodeId);
      await waitFor("no engine of the first pool left", () => firstPids.every((p) => !pidAlive(p)), 20_000);
      r = await chat(outsider);
      expect(r.status, r.text).toBe(200);
      const rows = await historyRows(outsider);
      const firstRow = rows.find((x) => x.id === first.instanceId)!;
      expect(firstRow.outcome).toBe("replaced");
      expect(firstRow.reason).toMatch(
        new RegExp(`donor on node ${donorNode.nodeId} failed: ggml-rpc-server was killed by SIGKILL`),
      );
      expect(rows.find((x) => x.id === second.instanceId)!.reason).toContain(`heals ${first.instanceId}`);

      // The driver node dies (its daemon and its engines): timed out, torn down everywhere, placed again.
      const dead = nodes.find((d) => d.nodeId === second.driverNode)!;
      const deadEngines = (await runnersOf(dead)).map((x) => x.engine!.pid!);
      const secondPids = (await Promise.all(nodes.filter((d) => d !== dead).map(runnersOf))).flat().map((x) =>
        x.engine!.pid!
      );
      await dead.kill();
      for (const p of deadEngines) Deno.kill(p, "SIGKILL");
      running.splice(running.indexOf(dead), 1);
      cleanups.push(() => Deno.removeSync(dead.dataDir, { recursive: true }));
      const alive = nodes.filter((d) => d !== dead);
      await oneMaster(alive.map((d) => d.url), 45_000);
      s = await waitForState(
        outsider.url,
        (s) => readyInstance(s) !== null && readyInstance(s)!.instanceId !== second.instanceId,
        "the pool re-placed after the driver node's death",
        120_000,
      );
      const third = readyInstance(s)!;
      expect(third.nodes).not.toContain(dead.nodeId);
      await waitFor(
        "no engine of the second pool left on live nodes",
        () => secondPids.every((p) => !pidAlive(p)),
        20_000,
      );
      r = await chat(outsider);
      expect(r.status, r.text).toBe(200);
      const again = await historyRows(outsider);
      expect(again.find((x) => x.id === third.instanceId)!.reason).toContain(
        `after node ${dead.nodeId} timed out`,
      );

      // A donor's link fails: it is timed out, and with one node of the right protocol left no pool is
      // possible, so healing retries with backoff and the history says why. The cut-off node cannot change
      // the replicated state (no majority), so its engine stops once the link returns and it follows the
      // majority's log, where the pool is gone.
      const cutNode = nodes.find((d) => d.nodeId === Object.keys(third.donorEndpoints)[0])!;
      const [cutDonor] = await runnersOf(cutNode);
      const rest = alive.filter((d) => d !== cutNode);
      segment.linkDown(nodes.indexOf(cutNode));
      await waitFor("the pool gone after the link loss", async () => {
        const st = await json<WireState>(`${outsider.url}/state`);
        return !Object.keys(st.instances).includes(third.instanceId);
      }, 30_000);
      const master = await oneMaster(rest.map((d) => d.url), 45_000);
      const masterNode = rest.find((d) => d.nodeId === master)!;
      const verdict = await waitFor("the give-up in the master's history", async () => {
        const row = (await historyRows(masterNode)).find((x) => x.id === third.instanceId);
        return row?.reason?.includes("healing found no place") ? row.reason : null;
      }, 30_000);
      expect(verdict).toContain(`node ${cutNode.nodeId} timed out`);
      expect(verdict).toMatch(/as placed \(LlamaRpc, min_nodes 3\): .*; anywhere: .*no pool is possible/);
      r = await chat(outsider);
      expect(r.status).toBe(404);
      expect(r.text).toContain(MODEL);
      segment.linkUp(nodes.indexOf(cutNode));
      await waitFor(
        "the cut donor's engine stopped after the link returned",
        () => !pidAlive(cutDonor.engine!.pid!),
        30_000,
      );
    },
    420_000,
  );
});
