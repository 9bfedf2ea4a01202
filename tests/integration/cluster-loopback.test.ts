/**
 * The cluster over loopback with real node processes and static peers: formation, replication through
 * any node, master failover and rejoin, refusals of a wrong key / namespace / version, flat bootstrap.
 */
import { afterEach, describe, expect, it } from "vitest";
import { liveOwner } from "../../src/node/lock.ts";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import {
  allVoters,
  eventIds,
  json,
  oneMaster,
  sameLog,
  signedPost,
  view,
  waitFor,
} from "../helpers/multinode.ts";

const running: Daemon[] = [];
afterEach(async () => {
  const done = running.splice(0);
  await Promise.all(done.map((d) => d.kill()));
  for (const dir of new Set(done.map((d) => d.dataDir))) Deno.removeSync(dir, { recursive: true });
});

async function node(
  args: string[] = [],
  env: Record<string, string> = {},
  dataDir?: string,
): Promise<Daemon> {
  const d = await startDaemon({ args: ["--no-mdns", ...args], env, dataDir });
  running.push(d);
  return d;
}

const peerOf = (d: Daemon) => ["--peer", `127.0.0.1:${d.port}`];
const submit = (d: Daemon, count = 1) =>
  json<{ submitted: string[] }>(`${d.url}/cluster/test_events?count=${count}`, { method: "POST" });

describe("cluster over loopback", () => {
  it("forms one cluster, replicates events submitted through any node, and shows the same /state everywhere", async () => {
    const a = await node();
    const b = await node(peerOf(a));
    const c = await node(peerOf(b));
    const urls = [a, b, c].map((d) => d.url);
    const master = await oneMaster(urls);
    expect([a, b, c].map((d) => d.nodeId)).toContain(master);
    const follower = [a, b, c].find((d) => d.nodeId !== master)!;
    const { submitted } = await submit(follower, 5);
    await submit(a, 2);
    await sameLog(urls);
    const logs = await Promise.all(urls.map(eventIds));
    for (const l of logs) expect(l).toEqual(logs[0]);
    for (const id of submitted) expect(logs[0]).toContain(id);
    const nodesSeen = await waitFor("every /state listing all three nodes", async () => {
      const states = await Promise.all(
        urls.map((u) => json<{ topology: { nodes: string[] } }>(`${u}/state`)),
      );
      return states.every((s) => s.topology.nodes.length === 3) ? states : null;
    });
    for (const s of nodesSeen) {
      expect([...s.topology.nodes].sort()).toEqual([a, b, c].map((d) => d.nodeId).sort());
    }
  });

  it("elects a new master when the master is killed, keeps the log, and takes the old master back as a follower", async ({ onTestFailed }) => {
    const a = await node();
    const b = await node(peerOf(a));
    const c = await node(peerOf(a));
    const all = [a, b, c];
    // Requests caught in the failover fail fast with a retryable 503, then succeed once a master is elected.
    const statuses: string[] = [];
    onTestFailed(() => {
      for (const d of all) {
        const lines = d.log().split("\n").filter((l) => /skulk\.cluster|master|majority/.test(l));
        console.error(`--- ${d.nodeId}\n${lines.slice(-40).join("\n")}`);
      }
      console.error(statuses.slice(0, 5).join("\n"), statuses.slice(-5).join("\n"));
    });
    const first = await oneMaster(all.map((d) => d.url));
    await allVoters(all.map((d) => d.url));
    await submit(all.find((d) => d.nodeId !== first)!, 3);
    const before = await sameLog(all.map((d) => d.url));
    const old = all.find((d) => d.nodeId === first)!;
    await old.kill();
    const survivors = all.filter((d) => d !== old);
    await waitFor(
      "a submission accepted after the failover",
      async () => {
        const res = await fetch(`${survivors[0].url}/cluster/test_events`, { method: "POST" });
        const body = await res.json();
        statuses.push(
          res.status === 200
            ? "200"
            : `${res.status} retry-after=${res.headers.get("retry-after")} ${body.error?.message}`,
        );
        return res.status === 200;
      },
      30_000,
      100,
    );
    for (const s of statuses.slice(0, -1)) expect(s).toMatch(/^503 retry-after=1 .*retry/);
    const second = await oneMaster(survivors.map((d) => d.url));
    expect(second).not.toBe(first);
    const { submitted } = await submit(survivors[1], 2);
    const after = await sameLog(survivors.map((d) => d.url));
    // One probe, two submissions, and the new master's MasterElected (indexed first in its session).
    expect(after).toBe(before + 4);
    // Acknowledged with 2 of the 3 voters holding it: the dead master is still a voter.
    const mv = await view(survivors.find((d) => d.nodeId === second)!.url);
    expect(mv.voters).toHaveLength(3);
    expect(mv.voters).toContain(old.nodeId);
    expect(mv.commitIdx).toBeGreaterThanOrEqual(after);

    const back = await node(["--api-port", String(old.port), ...peerOf(survivors[0])], {}, old.dataDir);
    expect(back.nodeId).toBe(old.nodeId);
    const urls = [...survivors, back].map((d) => d.url);
    expect(await oneMaster(urls)).toBe(second);
    expect((await view(back.url)).role).toBe("follower");
    await sameLog(urls);
    const ids = await eventIds(back.url);
    for (const id of submitted) expect(ids).toContain(id);
  });

  it("with two voters, the survivor of a kill -9 acknowledges nothing, unless it is a forced master", async () => {
    const probe = async (d: Daemon) => {
      const res = await fetch(`${d.url}/cluster/test_events`, { method: "POST" });
      const body = await res.json();
      return { status: res.status, retryAfter: res.headers.get("retry-after"), body };
    };
    // Plain pair: no majority is left, so the survivor answers retryable 503s naming the missing majority.
    const a = await node();
    const b = await node(peerOf(a));
    await oneMaster([a.url, b.url]);
    await allVoters([a.url, b.url]);
    expect((await probe(b)).status).toBe(200);
    await b.kill();
    const refused = await waitFor("the survivor refusing writes", async () => {
      const r = await probe(a);
      return r.status === 503 && r.body.error.code === "no_quorum" ? r : null;
    }, 20_000);
    expect(refused.retryAfter).toBe("1");
    expect(refused.body.error.message).toMatch(
      /no majority of the voting nodes .*\(1 of 2 heard, 2 needed\)/,
    );
    // Within twice the election timeout it stops acting as master; then it refuses at once.
    await waitFor(
      "the survivor no longer acting as master",
      async () => (await view(a.url)).role === "candidate",
      10_000,
    );
    const t0 = Date.now();
    expect((await probe(a)).body.error.code).toBe("no_quorum");
    expect(Date.now() - t0).toBeLessThan(2500); // refused at once, not after the 3 s commit timeout

    // A forced master keeps acknowledging on its own: the trade --force-master makes explicitly.
    const f = await node(["--force-master"]);
    const g = await node(peerOf(f));
    expect(await oneMaster([f.url, g.url])).toBe(f.nodeId);
    await allVoters([f.url, g.url]);
    await g.kill();
    await new Promise((r) => setTimeout(r, 4000)); // past the time a plain master steps down
    const alone = await probe(f);
    expect(alone.status).toBe(200);
    expect((await view(f.url)).role).toBe("master");
  });

  it("refuses a peer with the wrong key, namespace or version, and both sides say why", async () => {
    const a = await node([], { SKULK_CLUSTER_SECRET: "the-right-secret" });
    const wrongKey = await node(peerOf(a), { SKULK_CLUSTER_SECRET: "another-secret" });
    const otherNs = await node([...peerOf(a), "--namespace", "elsewhere"], {
      SKULK_CLUSTER_SECRET: "the-right-secret",
    });
    await waitFor(
      "refusal lines on both sides",
      () =>
        /refused a peer: .*not signed with our cluster key/.test(a.log()) &&
        /refused a peer: .*namespace 'elsewhere'/.test(a.log()) &&
        /refused us: .*not signed with our cluster key/.test(wrongKey.log()) &&
        /refused us: .*namespace 'elsewhere'/.test(otherNs.log()),
    );
    const res = await signedPost(a.url, "gossip", {
      statuses: [],
      readings: [],
      digest: { statuses: {}, readings: {} },
    }, {
      secret: "the-right-secret",
      version: "9.9.9",
    });
    expect(res.status).toBe(403);
    expect(res.headers.get("x-skulk-refusal")).toBe("version");
    expect((await res.json()).error.message).toMatch(/version 9\.9\.9/);
    await waitFor(
      "the version refusal logged",
      () => /refused a peer: .*Skulk version 9\.9\.9/.test(a.log()),
    );
    const good = await signedPost(a.url, "gossip", {
      statuses: [],
      readings: [],
      digest: { statuses: {}, readings: {} },
    }, { secret: "the-right-secret" });
    expect(good.status).toBe(200);
    for (const d of [a, wrongKey, otherNs]) {
      const v = await view(d.url);
      expect(v.peers).toEqual([]);
      expect(v.role).toBe("master");
    }
  });

  it("restarts another node through POST /admin/restart?node_id=, which comes back with the same id", async () => {
    const a = await node();
    const b = await node(["--api-port", "0", ...peerOf(a)]);
    await oneMaster([a.url, b.url]);
    const res = await json<{ status: string; node_id: string }>(
      `${a.url}/admin/restart?node_id=${b.nodeId}`,
      { method: "POST" },
    );
    expect(res).toEqual({ status: "restart_sent", node_id: b.nodeId });
    expect((await b.exited).code).toBe(0);
    // The daemon re-executed itself detached; find it through its data dir's lock.
    const owner = await waitFor("the restarted daemon holding its data dir", () => {
      const info = liveOwner(b.dataDir);
      // apiPort is 0 until the restarted daemon has bound its listener (it was started with --api-port 0).
      return info && info.pid !== b.pid && info.apiPort > 0 ? info : null;
    });
    try {
      const url = `http://127.0.0.1:${owner.apiPort}`;
      expect(await json<string>(`${url}/node_id`)).toBe(b.nodeId);
      await oneMaster([a.url, url]);
      const missing = await json<{ error: { message: string } }>(`${a.url}/admin/restart?node_id=nope`, {
        method: "POST",
      }).catch((e) => e.message);
      expect(missing).toMatch(/404.*not in this cluster/);
    } finally {
      Deno.kill(owner.pid, "SIGKILL");
    }
  });

  it("bootstraps a joining node from a snapshot plus tail, so its bytes stay flat as history grows", async () => {
    const a = await node();
    const joinBytes = async () => {
      const res = await signedPost(a.url, "sync", { after: -1, eventId: null });
      expect(res.status).toBe(200);
      return (await res.arrayBuffer()).byteLength;
    };
    const fullBytes = async () =>
      (await fetch(`${a.url}/events?limit=10000`).then((r) => r.arrayBuffer())).byteLength;
    await submit(a, 100);
    const young = await joinBytes();
    const youngFull = await fullBytes();
    for (let i = 0; i < 5; i++) await submit(a, 200);
    const old = await joinBytes();
    const oldFull = await fullBytes();
    expect(oldFull).toBeGreaterThan(youngFull * 5);
    expect(old).toBeLessThan(young * 1.5);
    const b = await node(peerOf(a));
    await oneMaster([a.url, b.url]);
    await sameLog([a.url, b.url]);
    const held = await eventIds(b.url);
    expect(held.length).toBeLessThan(64);
  });
});
