/** Table tests of the pure cluster rules: election order, liveness, gossip deltas, target choice. */
import { describe, expect, it } from "vitest";
import { pickTargets } from "../../src/cluster/addresses.ts";
import { decide } from "../../src/cluster/election.ts";
import { deltas, GossipState, type NodeStatus } from "../../src/cluster/gossip.ts";
import { timedOut } from "../../src/cluster/liveness.ts";
import { emptyState } from "../../src/cluster/state.ts";
import { TelemetryView } from "../../src/cluster/telemetry.ts";
import { reading } from "../helpers/synthetic-cluster.ts";

const st = (nodeId: string, o: Partial<NodeStatus> = {}): NodeStatus => ({
  nodeId,
  hb: 1,
  startedAt: 1000,
  forceMaster: false,
  lastIdx: 0,
  lastTerm: 0,
  lastEventId: null,
  apiAddress: `${nodeId}:1`,
  session: null,
  ...o,
});
const lead = (id: string, clock = 0, o: Partial<NodeStatus> = {}) =>
  st(id, { session: { master: id, clock }, ...o });
const follow = (id: string, master: string, clock = 0, o: Partial<NodeStatus> = {}) =>
  st(id, { session: { master, clock }, ...o });

describe("election", () => {
  const cases: {
    name: string;
    self: NodeStatus;
    others: NodeStatus[];
    masterlessMs?: number;
    maxClock?: number;
    /** The voting set in the node's state; every node of the case when absent. */
    voters?: string[];
    want: string;
  }[] = [
    { name: "a lone node leads", self: lead("a"), others: [], want: "lead a/0" },
    {
      name: "the senior of two fresh masters wins",
      self: lead("b", 0, { startedAt: 2000 }),
      others: [lead("a")],
      want: "follow a/0",
    },
    {
      name: "after a whole-cluster restart the longest log wins over seniority",
      self: lead("a", 2, { lastIdx: 40 }),
      others: [lead("b", 2, { lastIdx: 41, startedAt: 3000 })],
      want: "follow b/2",
    },
    { name: "seniority tie goes to the smaller id", self: lead("a"), others: [lead("b")], want: "lead a/0" },
    {
      name: "force-master beats seniority",
      self: lead("a"),
      others: [lead("z", 0, { forceMaster: true, startedAt: 9999 })],
      want: "follow z/0",
    },
    {
      name: "a healed minority master joins the majority even when more senior",
      self: lead("a", 3, { startedAt: 1 }),
      others: [lead("m", 4, { startedAt: 500 }), follow("q", "m", 4)],
      want: "follow m/4",
    },
    {
      name: "a restarted old master follows the current one",
      self: lead("a", 0, { startedAt: 5000, lastIdx: 9 }),
      others: [lead("b", 1, { lastTerm: 1 }), follow("c", "b", 1)],
      want: "follow b/1",
    },
    {
      name: "with no claim the longest replica claims the next session",
      self: follow("b", "dead", 2, { lastIdx: 7 }),
      others: [follow("c", "dead", 2, { lastIdx: 5 })],
      maxClock: 2,
      want: "lead b/3",
    },
    {
      name: "a shorter replica waits for the better candidate",
      self: follow("c", "dead", 2, { lastIdx: 5 }),
      others: [follow("b", "dead", 2, { lastIdx: 7 })],
      maxClock: 2,
      want: "wait",
    },
    {
      name: "but claims after its patience runs out",
      self: follow("c", "dead", 2, { lastIdx: 5 }),
      others: [follow("b", "dead", 2, { lastIdx: 7 })],
      maxClock: 2,
      masterlessMs: 5000,
      want: "lead c/3",
    },
    {
      name: "a cut-off old master with a longer tail from an older session follows the majority's new master",
      self: lead("m", 2, { lastTerm: 2, lastIdx: 50 }),
      others: [lead("b", 3, { lastTerm: 3, lastIdx: 20 }), follow("c", "b", 3, { lastTerm: 3, lastIdx: 20 })],
      want: "follow b/3",
    },
    {
      name: "a voter never follows a claim whose log is behind its own, however many follow it",
      self: follow("c", "m", 2, { lastTerm: 2, lastIdx: 10 }),
      others: [lead("b", 3, { lastTerm: 2, lastIdx: 9 }), follow("d", "b", 3), follow("e", "b", 3)],
      maxClock: 3,
      want: "lead c/4",
    },
    {
      name: "nor does the majority's master follow a stale claim that outranks it on the old rules",
      self: lead("b", 3, { lastTerm: 3, lastIdx: 20, startedAt: 5000 }),
      others: [
        lead("m", 9, { lastTerm: 2, lastIdx: 50, startedAt: 1 }),
        follow("c", "b", 3, { lastTerm: 3, lastIdx: 20 }),
      ],
      want: "lead b/3",
    },
    {
      name: "a follower keeps its master although the master's gossiped log lags the pushes it applied",
      self: follow("c", "b", 3, { lastTerm: 3, lastIdx: 12 }),
      others: [lead("b", 3, { lastTerm: 3, lastIdx: 10 }), follow("d", "b", 3)],
      maxClock: 3,
      want: "follow b/3",
    },
    {
      name: "a forced master is followed even when its log is behind (force-master trades that safety)",
      self: follow("c", "b", 3, { lastTerm: 3, lastIdx: 20 }),
      others: [
        lead("b", 3, { lastTerm: 3, lastIdx: 20 }),
        lead("f", 1, { forceMaster: true, lastTerm: 1, lastIdx: 4 }),
      ],
      want: "follow f/1",
    },
    {
      name: "a claim from outside the voting set (two clusters forming one) is judged by the claim order",
      self: lead("b", 0, { lastIdx: 1, startedAt: 2000 }),
      others: [lead("a", 0, { lastIdx: 5 })],
      voters: ["b"],
      want: "follow a/0",
    },
    {
      name: "only voters are candidates for a new session",
      self: follow("b", "dead", 2, { lastIdx: 5 }),
      others: [st("x", { lastIdx: 99, lastTerm: 9 })],
      voters: ["b", "dead", "c"],
      maxClock: 2,
      want: "lead b/3",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const d = decide({
        self: c.self,
        fresh: [c.self, ...c.others],
        voters: c.voters ?? [c.self, ...c.others].map((s) => s.nodeId),
        maxClock: c.maxClock ?? 0,
        masterlessMs: c.masterlessMs ?? 0,
        patienceMs: 3000,
      });
      expect(d.kind === "wait" ? "wait" : `${d.kind} ${d.session.master}/${d.session.clock}`).toBe(c.want);
    });
  }
});

describe("liveness", () => {
  it("times out nodes silent longer than the timeout, counting from when this master started", () => {
    const base = { selfId: "m", state: emptyState(), timeoutMs: 30_000 };
    expect(timedOut({ ...base, heard: { m: 0, a: 100_000, b: 60_000 }, masterSince: 0, now: 100_000 }))
      .toEqual(["b"]);
    expect(timedOut({ ...base, heard: { a: 1 }, masterSince: 90_000, now: 100_000 })).toEqual([]);
    expect(timedOut({ ...base, heard: { a: 1 }, masterSince: 60_000, now: 100_000 })).toEqual(["a"]);
  });
});

describe("gossip", () => {
  it("sends only what the peer lacks, most lagging first, bounded", () => {
    const local = [{ id: "a", version: 5, value: "a5" }, { id: "b", version: 3, value: "b3" }, {
      id: "c",
      version: 9,
      value: "c9",
    }];
    expect(deltas(local, { a: 5, b: 1 }, 10)).toEqual(["c9", "b3"]);
    expect(deltas(local, {}, 2)).toHaveLength(2);
    expect(deltas(local, { a: 5, b: 3, c: 9 }, 10)).toEqual([]);
  });

  it("converges two views by exchanging messages, and a forgotten node stays forgotten until it speaks again", () => {
    const x = new GossipState("x", new TelemetryView());
    const y = new GossipState("y", new TelemetryView());
    x.offerStatus(st("x", { hb: 10 }), 0);
    y.offerStatus(st("y", { hb: 20 }), 0);
    y.offerStatus(st("z", { hb: 7 }), 0);
    const reply = y.gossipReply(x.messageFor(null), 1);
    x.merge(reply, 1);
    expect(x.statuses().map((e) => e.status.nodeId).sort()).toEqual(["x", "y", "z"]);
    expect(y.statuses().map((e) => e.status.nodeId).sort()).toEqual(["x", "y", "z"]);
    x.forget("z");
    expect(x.offerStatus(st("z", { hb: 7 }), 2)).toBe(false);
    expect(x.offerStatus(st("z", { hb: 8 }), 2)).toBe(true);
  });
});

describe("gossip targets", () => {
  it("always includes the master and at most fanout others", () => {
    const ready = ["m", "a", "b", "c", "d"];
    const t = pickTargets(ready, "m", 2, () => 0.5);
    expect(t[0]).toBe("m");
    expect(t).toHaveLength(3);
    expect(new Set(t).size).toBe(3);
    expect(pickTargets(ready, "gone", 2, Math.random)).toHaveLength(2);
  });
});

describe("connectivity in gossip", () => {
  const withMemory = (ram: number, ip = "10.0.0.1") => {
    const r = reading({ id: "origin", ram, ip });
    return r;
  };

  it("travels only to peers whose copy is older than its last change, and is restored on arrival", () => {
    const origin = new GossipState("origin", new TelemetryView());
    const peer = new GossipState("peer", new TelemetryView());
    origin.telemetry.offer(withMemory(8e9), 1, 0);
    // First contact: the peer holds nothing, so the whole reading goes, connectivity included.
    const first = origin.messageFor(peer.digest());
    expect(first.readings[0].networkOmitted).toBeUndefined();
    peer.merge(first, 1);
    expect(peer.telemetry.get("origin")!.reading.network).toEqual(withMemory(8e9).network);

    // Memory moved, the interfaces did not: the new version travels without them.
    origin.telemetry.offer(withMemory(7e9), 2, 2);
    const second = origin.messageFor(peer.digest());
    expect(second.readings[0]).toMatchObject({
      version: 2,
      networkOmitted: true,
      reading: { network: null },
    });
    expect(JSON.stringify(second).length).toBeLessThan(JSON.stringify(first).length);
    peer.merge(second, 3);
    const held = peer.telemetry.get("origin")!;
    expect(held.version).toBe(2);
    expect(held.reading.memory?.ramAvailable.inBytes).toBe(withMemory(7e9).memory?.ramAvailable.inBytes);
    expect(held.reading.network).toEqual(withMemory(8e9).network);

    // The address changed: connectivity travels again.
    origin.telemetry.offer(withMemory(7e9, "10.0.0.9"), 3, 4);
    const third = origin.messageFor(peer.digest());
    expect(third.readings[0].networkOmitted).toBeUndefined();
    peer.merge(third, 5);
    expect(peer.telemetry.get("origin")!.reading.network?.interfaces[0].ipAddress).toBe("10.0.0.9");
  });

  it("is sent whole to a peer that never held it, even when unchanged", () => {
    const origin = new GossipState("origin", new TelemetryView());
    origin.telemetry.offer(withMemory(8e9), 1, 0);
    origin.telemetry.offer(withMemory(7e9), 2, 1);
    const msg = origin.messageFor(new GossipState("fresh", new TelemetryView()).digest());
    expect(msg.readings[0].networkOmitted).toBeUndefined();
    expect(msg.readings[0].reading.network).not.toBeNull();
  });
});
