/** Table tests of the majority rules: who backs a master, what is committed, the voting set, commit waits. */
import { describe, expect, it } from "vitest";
import { CommitTracker, NoQuorum } from "../../src/cluster/commit.ts";
import { commitIndex, holdsMajority, majority } from "../../src/cluster/election.ts";
import { makeEvent } from "../../src/cluster/events.ts";
import type { NodeStatus } from "../../src/cluster/gossip.ts";
import { timedOut } from "../../src/cluster/liveness.ts";
import { apply, type ClusterState, emptyState, votersOf } from "../../src/cluster/state.ts";

const st = (nodeId: string, session: [string, number] | null, o: Partial<NodeStatus> = {}): NodeStatus => ({
  nodeId,
  hb: 1,
  startedAt: 1000,
  forceMaster: false,
  lastIdx: 0,
  lastTerm: 0,
  lastEventId: null,
  apiAddress: `${nodeId}:1`,
  session: session ? { master: session[0], clock: session[1] } : null,
  ...o,
});

describe("majority", () => {
  it("is more than half", () => {
    expect([1, 2, 3, 4, 5].map(majority)).toEqual([1, 2, 2, 3, 3]);
  });
});

describe("holdsMajority", () => {
  const m = st("m", ["m", 4]);
  const cases: { name: string; self: NodeStatus; others: NodeStatus[]; voters: string[]; want: boolean }[] = [
    { name: "a one-node cluster backs itself", self: m, others: [], voters: ["m"], want: true },
    {
      name: "a master followed by one of two others holds 2 of 3",
      self: m,
      others: [st("a", ["m", 4])],
      voters: ["a", "b", "m"],
      want: true,
    },
    {
      name: "a master cut off from both others does not",
      self: m,
      others: [],
      voters: ["a", "b", "m"],
      want: false,
    },
    {
      name: "a follower that is not a voter does not count",
      self: m,
      others: [st("x", ["m", 4])],
      voters: ["a", "b", "m"],
      want: false,
    },
    {
      name: "a voter following an older session of this node does not count",
      self: m,
      others: [st("a", ["m", 3])],
      voters: ["a", "b", "m"],
      want: false,
    },
    {
      name: "a node that is not a voter needs a majority of the voters behind it",
      self: m,
      others: [st("a", ["m", 4]), st("b", ["m", 4])],
      voters: ["a", "b"],
      want: true,
    },
    {
      name: "a node that follows another does not hold anything",
      self: st("m", ["a", 4]),
      others: [st("a", ["a", 4])],
      voters: ["a", "m"],
      want: false,
    },
    {
      name: "a forced master always acts (it trades safety for availability)",
      self: st("m", ["m", 4], { forceMaster: true }),
      others: [],
      voters: ["a", "b", "m"],
      want: true,
    },
  ];
  for (const c of cases) {
    it(c.name, () => expect(holdsMajority(c.self, [c.self, ...c.others], c.voters)).toBe(c.want));
  }
});

describe("commitIndex", () => {
  const cases: {
    name: string;
    self: number;
    held: Record<string, number>;
    voters: string[];
    forced?: boolean;
    want: number;
  }[] = [
    { name: "a one-node cluster commits what it indexes", self: 7, held: {}, voters: ["m"], want: 7 },
    {
      name: "2 of 3: the better follower counts",
      self: 10,
      held: { a: 8, b: 3 },
      voters: ["a", "b", "m"],
      want: 8,
    },
    {
      name: "no follower holds anything: nothing new is committed",
      self: 10,
      held: {},
      voters: ["a", "b", "m"],
      want: -1,
    },
    {
      name: "3 of 5: the third highest",
      self: 10,
      held: { a: 9, b: 4, c: 6, d: 1 },
      voters: ["a", "b", "c", "d", "m"],
      want: 6,
    },
    { name: "2 of 2: the slower of the pair", self: 10, held: { a: 4 }, voters: ["a", "m"], want: 4 },
    {
      name: "acks from non-voters do not count",
      self: 10,
      held: { x: 10, y: 10 },
      voters: ["a", "b", "m"],
      want: -1,
    },
    {
      name: "a forced master commits on its own",
      self: 10,
      held: {},
      voters: ["a", "b", "m"],
      forced: true,
      want: 10,
    },
  ];
  for (const c of cases) {
    it(c.name, () => expect(commitIndex("m", c.self, c.held, c.voters, c.forced ?? false)).toBe(c.want));
  }
});

describe("the voting set in the replicated state", () => {
  const fold = (events: ReturnType<typeof makeEvent>[], s: ClusterState = emptyState()) =>
    events.reduce((acc, event) => apply(acc, { idx: acc.lastEventAppliedIdx + 1, session: "m/0", event }), s);

  it("a node that joined nothing is a cluster of one; joins add, timeouts remove", () => {
    expect(votersOf(emptyState(), "m")).toEqual(["m"]);
    const s = fold([
      makeEvent("NodeJoined", { nodeId: "m" }),
      makeEvent("NodeJoined", { nodeId: "b" }),
      makeEvent("NodeJoined", { nodeId: "a" }),
      makeEvent("NodeJoined", { nodeId: "a" }),
    ]);
    expect(votersOf(s, "m")).toEqual(["a", "b", "m"]);
    // Every node folds the same events, so a node cut off cannot count a smaller majority than the others.
    expect(votersOf(s, "b")).toEqual(["a", "b", "m"]);
    expect(votersOf(fold([makeEvent("NodeTimedOut", { nodeId: "b" })], s), "m")).toEqual(["a", "m"]);
    // The last voter is never removed: an empty list would make every node a cluster of one.
    const lone = fold([makeEvent("NodeJoined", { nodeId: "x" })]);
    expect(votersOf(fold([makeEvent("NodeTimedOut", { nodeId: "x" })], lone), "y")).toEqual(["x"]);
  });

  it("a voter the master never heard from is timed out like any silent node", () => {
    const s = fold([makeEvent("NodeJoined", { nodeId: "m" }), makeEvent("NodeJoined", { nodeId: "gone" })]);
    expect(timedOut({ selfId: "m", heard: {}, state: s, masterSince: 0, now: 60_000, timeoutMs: 30_000 }))
      .toEqual(["gone"]);
  });
});

describe("CommitTracker", () => {
  const voters = ["a", "b", "m"];
  const tracker = (selfIdx: () => number) =>
    new CommitTracker((held) => commitIndex("m", selfIdx(), held, voters, false));

  it("answers a waiter once a majority holds its index", async () => {
    const t = tracker(() => 5);
    let done = false;
    const w = t.wait(5, 5000, () => "no").then(() => (done = true));
    t.ack("a", 4);
    await Promise.resolve();
    expect(done).toBe(false);
    t.ack("b", 5);
    await w;
    expect(t.index).toBe(5);
  });

  it("rejects with NoQuorum naming why after the bound", async () => {
    const t = tracker(() => 5);
    const err = await t.wait(5, 20, () => "no majority reachable").catch((e) => e);
    expect(err).toBeInstanceOf(NoQuorum);
    expect(err.message).toBe("no majority reachable");
  });

  it("rejects everyone waiting when the master steps down, and a new session starts from nothing", async () => {
    const t = tracker(() => 9);
    t.ack("a", 9);
    expect(t.index).toBe(9);
    t.reset();
    expect(t.index).toBe(-1);
    const w = t.wait(9, 5000, () => "no").catch((e) => e);
    t.failAll("stepped down");
    expect((await w).message).toBe("stepped down");
  });
});
