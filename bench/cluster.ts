/**
 * bench/cluster: master death to new master (3 real nodes on loopback), gossip convergence for 50
 * simulated nodes (in-process transport, real messages), a joiner's bytes against cluster age, and the
 * CPU an idle node spends. Run: `$DENO run -A bench/cluster.ts`.
 */
import { makeEvent } from "../src/cluster/events.ts";
import { GossipMessageSchema, GossipState, type NodeStatus } from "../src/cluster/gossip.ts";
import { EventLog } from "../src/cluster/log.ts";
import { DEFAULT_TIMINGS } from "../src/cluster/plane.ts";
import { answerSync, applySync } from "../src/cluster/replication.ts";
import { TelemetryView } from "../src/cluster/telemetry.ts";
import { openStore } from "../src/store/db.ts";
import { collectReading } from "../src/telemetry/collect.ts";
import { allVoters, oneMaster, view } from "../tests/helpers/multinode.ts";
import { type Daemon, startDaemon, tempDir } from "../tests/helpers/daemon.ts";

const line = (name: string, value: string, target: string) =>
  console.log(`${name.padEnd(44)} ${value.padEnd(22)} target ${target}`);

/** Seconds from the master's kill -9 to a new master backed by a majority, and to the first acknowledged write. */
async function failover(): Promise<{ elected: number; acked: number }[]> {
  const times: { elected: number; acked: number }[] = [];
  for (let run = 0; run < 3; run++) {
    const nodes: Daemon[] = [];
    try {
      nodes.push(await startDaemon({ args: ["--no-mdns"] }));
      for (let i = 0; i < 2; i++) {
        nodes.push(await startDaemon({ args: ["--no-mdns", "--peer", `127.0.0.1:${nodes[0].port}`] }));
      }
      const master = await oneMaster(nodes.map((n) => n.url));
      await allVoters(nodes.map((n) => n.url));
      const old = nodes.find((n) => n.nodeId === master)!;
      const rest = nodes.filter((n) => n !== old);
      await new Promise((r) => setTimeout(r, 1000));
      const t0 = performance.now();
      await old.kill();
      let elected = 0;
      while (!elected) {
        const vs = await Promise.all(rest.map((n) => view(n.url)));
        const m = new Set(vs.map((v) => v.session?.master ?? "none"));
        if (m.size === 1 && !m.has("none") && !m.has(master) && vs.some((v) => v.role === "master")) {
          elected = (performance.now() - t0) / 1000;
        } else await new Promise((r) => setTimeout(r, 20));
      }
      for (;;) {
        const res = await fetch(`${rest[0].url}/cluster/test_events`, { method: "POST" });
        await res.body?.cancel();
        if (res.ok) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      times.push({ elected, acked: (performance.now() - t0) / 1000 });
    } finally {
      await Promise.all(nodes.map((n) => n.kill()));
      nodes.forEach((n) => Deno.removeSync(n.dataDir, { recursive: true }));
    }
  }
  return times;
}

async function gossipConvergence(
  n: number,
): Promise<{ rounds: number; seconds: number; bytesPerMessage: number; change: number }> {
  const base = await collectReading({
    nodeId: "x",
    friendlyName: "sim",
    apiAddress: null,
    worker: true,
    modelsDir: "/tmp",
  });
  const nodes = Array.from({ length: n }, (_, i) => {
    const id = `node-${i}`;
    const g = new GossipState(id, new TelemetryView());
    g.offerReading({ ...base, nodeId: id, apiAddress: `10.0.0.${i}:52415` }, 1, 0);
    return g;
  });
  const status = (g: GossipState, hb: number): NodeStatus => ({
    nodeId: g.selfId,
    hb,
    startedAt: 0,
    forceMaster: false,
    lastIdx: 0,
    lastTerm: 0,
    lastEventId: null,
    apiAddress: null,
    session: { master: "node-0", clock: 0 },
  });
  const digests = new Map<string, ReturnType<GossipState["digest"]>>();
  let bytes = 0;
  let messages = 0;
  const round = (r: number) => {
    for (const g of nodes) g.offerStatus(status(g, r + 1), r);
    for (const g of nodes) {
      for (let k = 0; k < DEFAULT_TIMINGS.fanout; k++) {
        const peer = nodes[Math.floor(Math.random() * n)];
        if (peer === g) continue;
        // Through JSON and the schema, as over HTTP.
        const out = JSON.stringify(g.messageFor(digests.get(`${g.selfId}>${peer.selfId}`) ?? null));
        const back = JSON.stringify(peer.gossipReply(GossipMessageSchema.parse(JSON.parse(out)), r));
        const reply = GossipMessageSchema.parse(JSON.parse(back));
        g.merge(reply, r);
        digests.set(`${g.selfId}>${peer.selfId}`, reply.digest);
        bytes += out.length + back.length;
        messages += 2;
      }
    }
  };
  let rounds = 0;
  while (!nodes.every((g) => g.telemetry.entries().length === n)) round(rounds++);
  // A change at one node: how many rounds until every node holds it.
  nodes[7].offerReading({ ...base, nodeId: "node-7", apiAddress: "changed:1" }, 2, rounds);
  let change = 0;
  while (!nodes.every((g) => g.telemetry.get("node-7")?.version === 2)) round(rounds + ++change);
  return {
    rounds,
    seconds: (rounds * DEFAULT_TIMINGS.roundMs) / 1000,
    bytesPerMessage: Math.round(bytes / messages),
    change,
  };
}

async function joinBytes(ages: number[]): Promise<{ age: number; join: number; history: number }[]> {
  const dir = tempDir("skulk-bench-");
  const store = await openStore(dir);
  const log = new EventLog(store.db, "m/0");
  const out = [];
  try {
    for (const age of ages) {
      while (log.state.lastEventAppliedIdx + 1 < age) await log.append(makeEvent("TestEvent"));
      const jdir = tempDir("skulk-bench-");
      const jstore = await openStore(jdir);
      const joiner = new EventLog(jstore.db, "j/0");
      let join = 0;
      for (;;) {
        const res = await answerSync(log, {
          after: joiner.state.lastEventAppliedIdx,
          eventId: joiner.lastEventId,
        });
        join += JSON.stringify(res).length;
        if (!(await applySync(joiner, res))) break;
      }
      jstore.close();
      Deno.removeSync(jdir, { recursive: true });
      const history = JSON.stringify(await log.since(-1, 1_000_000)).length;
      out.push({ age, join, history });
    }
  } finally {
    store.close();
    Deno.removeSync(dir, { recursive: true });
  }
  return out;
}

function cpuTicks(pid: number): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return Number(f[11]) + Number(f[12]);
}

/** CPU (% of a core) of each node of an idle cluster of `size` nodes; size 1 is the baseline without peers. */
async function idleCpu(seconds: number, size = 3): Promise<number[]> {
  const nodes: Daemon[] = [];
  try {
    nodes.push(await startDaemon({ args: ["--no-mdns"], env: { SKULK_LOG_LEVEL: "info" } }));
    for (let i = 0; i < size - 1; i++) {
      nodes.push(
        await startDaemon({
          args: ["--no-mdns", "--peer", `127.0.0.1:${nodes[0].port}`],
          env: { SKULK_LOG_LEVEL: "info" },
        }),
      );
    }
    await oneMaster(nodes.map((n) => n.url));
    await new Promise((r) => setTimeout(r, 3000));
    const before = nodes.map((n) => cpuTicks(n.pid));
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const wall = (performance.now() - t0) / 1000;
    const hz = 100; // USER_HZ on Linux
    return nodes.map((n, i) => (100 * (cpuTicks(n.pid) - before[i])) / hz / wall);
  } finally {
    await Promise.all(nodes.map((n) => n.kill()));
    nodes.forEach((n) => Deno.removeSync(n.dataDir, { recursive: true }));
  }
}

console.log(
  `bench/cluster (gossip every ${DEFAULT_TIMINGS.roundMs} ms, fan-out ${DEFAULT_TIMINGS.fanout}, election timeout ${DEFAULT_TIMINGS.electionTimeoutMs} ms)`,
);
const f = await failover();
line("master death -> new master (3 nodes), s", f.map((t) => t.elected.toFixed(2)).join(" / "), "<= 3 s");
line("master death -> first acked write, s", f.map((t) => t.acked.toFixed(2)).join(" / "), "");
const g = await gossipConvergence(50);
line("gossip: 50 nodes to full view", `${g.rounds} rounds = ${g.seconds.toFixed(1)} s`, "<= 2 s");
line(
  "gossip: one change reaches all 50",
  `${g.change} rounds = ${((g.change * DEFAULT_TIMINGS.roundMs) / 1000).toFixed(1)} s`,
  "",
);
line("gossip: mean message", `${g.bytesPerMessage} B`, "bounded");
const j = await joinBytes([100, 1000, 5000]);
for (const r of j) {
  line(`join bytes at ${r.age} events (full history)`, `${r.join} B (${r.history} B)`, "flat");
}
line("join bytes ratio 5000 vs 100 events", (j[2].join / j[0].join).toFixed(2), "~1");
const alone = (await idleCpu(20, 1))[0];
const cpu = await idleCpu(20);
const mean = cpu.reduce((a, b) => a + b, 0) / cpu.length;
line("idle node CPU, whole process (3 nodes), %", cpu.map((c) => c.toFixed(2)).join(" / "), "");
line("idle node CPU, lone node (no peers), %", alone.toFixed(2), "");
line("idle control plane CPU per node, %", `${(mean - alone).toFixed(2)} (3-node mean - lone)`, "< 1 %");
