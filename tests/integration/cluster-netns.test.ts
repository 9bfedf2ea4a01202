/**
 * The cluster on a private network made of namespaces (each node with its own address): discovery by
 * mDNS alone, and a partitioned node that is timed out and rejoins with one master and no lost events.
 * Skips only when this machine cannot create network namespaces (not root, or no kernel support).
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { eventIds, json, oneMaster, sameLog, view, waitFor } from "../helpers/multinode.ts";
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
});
