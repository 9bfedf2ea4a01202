/**
 * The cluster on a private network made of namespaces (each node with its own address): discovery by
 * mDNS alone, a partitioned node that is timed out and rejoins with one master and no lost events, and a
 * partitioned master whose writes are refused while the majority's are kept: no acknowledged write is lost.
 * Skips only when this machine cannot create network namespaces (not root, or no kernel support).
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  localCardWire,
  registerCard,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { allVoters, eventIds, json, oneMaster, sameLog, view, waitFor } from "../helpers/multinode.ts";
import { makeSegment, netnsAvailable, type Segment } from "../helpers/netns.ts";

const available = netnsAvailable();
const running: Daemon[] = [];
let segment: Segment | null = null;
afterEach(async () => {
  const done = running.splice(0);
  await Promise.all(done.map((d) => d.kill()));
  for (const dir of new Set(done.map((d) => d.dataDir))) Deno.removeSync(dir, { recursive: true });
  segment?.remove();
  segment = null;
});

async function nodeIn(
  seg: Segment,
  i: number,
  args: string[] = [],
  env: Record<string, string> = {},
): Promise<Daemon> {
  const { netns, address } = seg.node(i);
  const d = await startDaemon({
    netns,
    urlHost: address,
    args: ["--api-host", "0.0.0.0", "--api-port", "52415", ...args],
    env,
    timeoutMs: 40_000,
  });
  running.push(d);
  return d;
}

const submit = (d: Daemon, count = 1) =>
  json<{ submitted: string[] }>(`${d.url}/cluster/test_events?count=${count}`, { method: "POST" });

describe.skipIf(!available)("cluster in network namespaces", () => {
  it("three nodes find one another by mDNS and agree on one master; another namespace stays apart", async () => {
    segment = makeSegment(4);
    const nodes: Daemon[] = [];
    for (let i = 0; i < 3; i++) nodes.push(await nodeIn(segment, i));
    const stranger = await nodeIn(segment, 3, ["--namespace", "elsewhere"]);
    const urls = nodes.map((d) => d.url);
    await oneMaster(urls, 45_000);
    for (const d of nodes) {
      const v = await view(d.url);
      expect(v.peers.map((p) => p.nodeId).sort()).toEqual(
        nodes.filter((n) => n !== d).map((n) => n.nodeId).sort(),
      );
      expect(
        v.peers.every((p) =>
          p.apiAddress?.startsWith(segment!.node(0).address.split(".").slice(0, 3).join("."))
        ),
      ).toBe(true);
    }
    await waitFor(
      "the stranger's namespace named in the mDNS log",
      () => /namespace 'elsewhere'/.test(nodes[0].log()),
    );
    const sv = await view(stranger.url);
    expect(sv.peers).toEqual([]);
    expect(sv.role).toBe("master");
  });

  it("times out a partitioned node and takes it back after the link returns, with one master and no lost events", async ({ onTestFailed }) => {
    const nodes: Daemon[] = [];
    onTestFailed(() => {
      for (const d of nodes) {
        const lines = d.log().split("\n").filter((l) => /skulk\.cluster|refused|silent|master/.test(l));
        console.error(`--- ${d.nodeId}\n${lines.slice(-60).join("\n")}`);
      }
    });
    segment = makeSegment(3);
    const env = { SKULK_NODE_TIMEOUT: "4" };
    for (let i = 0; i < 3; i++) nodes.push(await nodeIn(segment, i, [], env));
    const urls = nodes.map((d) => d.url);
    const master = await oneMaster(urls, 45_000);
    await allVoters(urls);
    await submit(nodes[0], 3);
    await sameLog(urls);
    const p = nodes.findIndex((d) => d.nodeId !== master);
    const cut = nodes[p];
    const rest = nodes.filter((d) => d !== cut);
    segment.linkDown(p);
    await waitFor("the partitioned node timed out by the master", async () => {
      const rows = await json<{ event: Record<string, { nodeId?: string }> }[]>(
        `${rest[0].url}/events?limit=10000`,
      );
      return rows.some((r) => r.event.NodeTimedOut?.nodeId === cut.nodeId);
    }, 30_000);
    const during = await submit(rest[1], 4);
    expect(await oneMaster(rest.map((d) => d.url))).toBe(master);
    segment.linkUp(p);
    expect(await oneMaster(urls, 30_000)).toBe(master);
    await sameLog(urls);
    const logs = await Promise.all(urls.map(eventIds));
    for (const id of during.submitted) for (const l of logs) expect(l).toContain(id);
    await waitFor("the rejoined node back in /state", async () => {
      const s = await json<{ topology: { nodes: string[] } }>(`${rest[0].url}/state`);
      return s.topology.nodes.includes(cut.nodeId);
    });
  });

  it("cuts the master off for 20 s under load: its writes get retryable 503s, no acknowledged write is lost", async ({ onTestFailed }) => {
    const nodes: Daemon[] = [];
    onTestFailed(() => {
      for (const d of nodes) {
        const lines = d.log().split("\n").filter((l) => /skulk\.cluster|majority|master/.test(l));
        console.error(`--- ${d.nodeId}\n${lines.slice(-60).join("\n").slice(-12_000)}`);
      }
    });
    segment = makeSegment(3);
    const env = { SKULK_NODE_TIMEOUT: "8", SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") };
    for (let i = 0; i < 3; i++) nodes.push(await nodeIn(segment, i, [], env));
    const urls = nodes.map((d) => d.url);
    const masterId = await oneMaster(urls, 45_000);
    await allVoters(urls);
    const m = nodes.findIndex((d) => d.nodeId === masterId);
    const cut = nodes[m];
    const [b, c] = nodes.filter((d) => d !== cut);
    const gguf = await tinyModel();

    /** Every answer a client got, by the node it asked, with the ids of what a 2xx acknowledged. */
    type Answer = { via: Daemon; at: number; status: number; retryAfter: string | null; message: string };
    const answers: Answer[] = [];
    const acked: string[] = [];
    const phase = { cutAt: Infinity, healAt: Infinity };
    const post = async (via: Daemon, path: string, body?: unknown) => {
      const at = Date.now();
      try {
        const res = await fetch(`${via.url}${path}`, {
          method: "POST",
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(20_000),
        });
        const json = await res.json();
        answers.push({
          via,
          at,
          status: res.status,
          retryAfter: res.headers.get("retry-after"),
          message: json.error?.message ?? "",
        });
        return res.ok ? json : null;
      } catch (e) {
        answers.push({ via, at, status: 0, retryAfter: null, message: (e as Error).message });
        return null;
      }
    };
    let running = true;
    const client = async (via: Daemon) => {
      while (running) {
        const ok = await post(via, "/cluster/test_events?count=1") as { submitted: string[] } | null;
        if (ok) acked.push(...ok.submitted);
        await new Promise((r) => setTimeout(r, 150));
      }
    };
    // POST /instance serves catalogue models only: both cards are known everywhere before the cut.
    const cardB = localCardWire("skulk-test/quorum-b", gguf);
    const cardCut = localCardWire("skulk-test/quorum-cut", gguf);
    for (const card of [cardB, cardCut]) await registerCard(nodes, card);
    const load = [client(cut), client(c)];
    await waitFor("a few acknowledged writes before the cut", () => acked.length >= 6);

    segment.isolate(m);
    phase.cutAt = Date.now();
    // The majority elects a master of its own and takes writes; the cut-off master takes none.
    await oneMaster([b.url, c.url], 20_000);
    const placedOnB = singleNodeInstance(b.nodeId, cardB);
    const viaMajority = await post(c, "/instance", { instance: placedOnB }) as { command_id: string } | null;
    expect(viaMajority, "a placement through the majority is acknowledged").not.toBeNull();
    acked.push(viaMajority!.command_id);
    const placedOnCut = singleNodeInstance(cut.nodeId, cardCut);
    const viaCut = await post(cut, "/instance", { instance: placedOnCut });
    expect(viaCut, "a placement through the cut-off master is refused").toBeNull();
    const cutRefusal = answers.at(-1)!;
    expect(cutRefusal.status).toBe(503);
    expect(cutRefusal.message).toMatch(/majority/);
    expect((await view(cut.url)).role).not.toBe("master");
    await new Promise((r) => setTimeout(r, Math.max(0, phase.cutAt + 20_000 - Date.now())));

    segment.rejoin(m);
    phase.healAt = Date.now();
    const finalMaster = await oneMaster(urls, 30_000);
    expect(finalMaster).not.toBe(cut.nodeId);
    await waitFor("a write acknowledged through the old master after the heal", async () => {
      const before = acked.length;
      const ok = await post(cut, "/cluster/test_events?count=1") as { submitted: string[] } | null;
      if (ok) acked.push(...ok.submitted);
      return acked.length > before;
    }, 30_000);
    running = false;
    await Promise.all(load);
    await sameLog(urls);

    // Every node holds the same history; the master (never reset) holds all of it from index 0, a node
    // that resynchronised holds the master's snapshot in place of the older part and the same tail.
    const rowsOf = async (u: string) =>
      new Map(
        (await json<{ idx: number; event: Record<string, { eventId: string }> }[]>(`${u}/events?limit=10000`))
          .map((r) => [r.idx, Object.values(r.event)[0].eventId] as const),
      );
    const masterUrl = nodes.find((d) => d.nodeId === finalMaster)!.url;
    // Every node's rows first, the master's last: events may still be appended after the logs agreed, and a
    // follower only ever holds what the master had, so the master read last covers every row read before.
    const rowsByNode = new Map<string, Map<number, string>>();
    for (const d of nodes) rowsByNode.set(d.nodeId, await rowsOf(d.url));
    const full = await rowsOf(masterUrl);
    expect(Math.min(...full.keys())).toBe(0);
    const idxOf = new Map([...full].map(([idx, id]) => [id, idx]));
    let lost = 0;
    let inSnapshot = 0;
    for (const d of nodes) {
      const rows = rowsByNode.get(d.nodeId)!;
      for (const [idx, id] of rows) expect(full.get(idx), `${d.nodeId} at ${idx}`).toBe(id);
      const floor = Math.min(...rows.keys());
      for (const id of acked) {
        const idx = idxOf.get(id);
        if (idx === undefined) lost++;
        else if (!rows.has(idx)) idx < floor ? inSnapshot++ : lost++;
      }
    }
    const during = answers.filter((a) => a.via === cut && a.at > phase.cutAt + 5_000 && a.at < phase.healAt);
    const cutOk = during.filter((a) => a.status >= 200 && a.status < 300).length;
    const cutRetryable = during.filter((a) => a.status === 503 && a.retryAfter && /majority/.test(a.message));
    const majorityOk = answers.filter((a) =>
      a.via === c && a.at > phase.cutAt && a.at < phase.healAt && a.status === 200
    ).length;
    console.log(
      `partitioned master: acknowledged ${acked.length} writes; lost ${lost} of ${
        acked.length * nodes.length
      } ` +
        `node copies (${inSnapshot} held in a snapshot a node resynchronised from); through the cut-off master during the cut: ${during.length} ` +
        `answers, ${cutOk} 2xx, ${cutRetryable.length} retryable 503; through the majority: ${majorityOk} 2xx`,
    );
    expect(lost).toBe(0);
    expect(cutOk).toBe(0);
    expect(during.length).toBeGreaterThan(0);
    expect(cutRetryable.length).toBe(during.length);
    expect(majorityOk).toBeGreaterThan(0);
    // The placement made through the majority runs after the heal; the refused one never appeared.
    for (const u of urls) {
      await waitForState(u, (s) => {
        const ids = Object.keys((s as { instances?: Record<string, unknown> }).instances ?? {});
        return ids.includes(placedOnB.MlxRingInstance.instanceId) &&
          !ids.includes(placedOnCut.MlxRingInstance.instanceId);
      }, `the majority's placement (and not the refused one) in ${u}'s state`);
    }
    const runnerId = Object.keys(placedOnB.MlxRingInstance.shardAssignments.runnerToShard)[0];
    await waitForState(b.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the placed runner ready");
  });
});
