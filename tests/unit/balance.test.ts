import { describe, expect, it } from "vitest";
import { Admission } from "../../src/serving/admission.ts";
import {
  AFFINITY_ENTRIES,
  chooseInstance,
  type Loaded,
  MIN_AFFINITY_CHARS,
  PREFIX_BLOCK_CHARS,
  PrefixAffinity,
  prefixHashes,
  promptText,
} from "../../src/serving/balance.ts";
import { ServingError } from "../../src/serving/errors.ts";

const t = (instanceId: string, driverNode = "self"): Loaded["target"] => ({
  instanceId,
  driverNode,
  runnerId: `r-${instanceId}`,
  contextTokenLimit: null,
});
const loaded = (loads: Record<string, number>, remote: string[] = []): Loaded[] =>
  Object.entries(loads).map(([id, load]) => ({
    target: t(id, remote.includes(id) ? "other" : "self"),
    load,
  }));
const pick = (
  loads: Record<string, number>,
  opts: { affine?: string; turn?: number; remote?: string[] } = {},
) =>
  chooseInstance({
    candidates: loaded(loads, opts.remote),
    slots: 4,
    slack: 2,
    affine: opts.affine,
    turn: opts.turn ?? 0,
  })?.target.instanceId;

describe("chooseInstance", () => {
  it("takes the least loaded instance", () => {
    expect(pick({ a: 3, b: 1, c: 2 })).toBe("b");
  });

  it("rotates among equally loaded instances, so successive requests spread", () => {
    expect([0, 1, 2, 3].map((turn) => pick({ a: 0, b: 0 }, { turn }))).toEqual(["a", "b", "a", "b"]);
  });

  it("treats another node's instance as this node's: equals rotate, the less loaded wins", () => {
    expect([0, 1].map((turn) => pick({ a: 0, b: 0 }, { turn, remote: ["a"] }))).toEqual(["a", "b"]);
    expect(pick({ a: 0, b: 1 }, { remote: ["a"] })).toBe("a");
  });

  it("keeps a conversation on its instance while that one is as idle as any", () => {
    expect(pick({ a: 0, b: 0 }, { affine: "b", turn: 0 })).toBe("b");
    expect(pick({ a: 1, b: 1 }, { affine: "a", turn: 1 })).toBe("a");
  });

  it("never sends a request to a busy instance while another is idle", () => {
    expect(pick({ a: 1, b: 0 }, { affine: "a" })).toBe("b");
  });

  it("when all are busy, stays within the slack of the least loaded and off a full instance", () => {
    expect(pick({ a: 3, b: 1 }, { affine: "a" })).toBe("a"); // 2 past the least: within slack
    expect(pick({ a: 4, b: 2 }, { affine: "a" })).toBe("b"); // a's slots are all taken, b has room
    expect(pick({ a: 5, b: 2 }, { affine: "a" })).toBe("b"); // past the slack
    expect(pick({ a: 5, b: 4 }, { affine: "a" })).toBe("a"); // every instance is full: the cache wins
  });

  it("an affine instance that is no longer a candidate is ignored", () => {
    expect(pick({ a: 2, b: 1 }, { affine: "gone" })).toBe("b");
  });

  it("answers null with no candidate, and the only one whatever its load", () => {
    expect(chooseInstance({ candidates: [], slots: 4, slack: 2, turn: 0 })).toBeNull();
    expect(pick({ a: 40 })).toBe("a");
  });
});

describe("prefix affinity", () => {
  const long = "You are a helpful assistant. ".repeat(100);
  const turn1 = JSON.stringify({
    model: "m",
    max_tokens: 10,
    messages: [{ role: "system", content: long }, { role: "user", content: "first question" }],
  });
  const turn2 = JSON.stringify({
    stream: true,
    messages: [
      { role: "system", content: long },
      { role: "user", content: "first question" },
      { role: "assistant", content: "an answer" },
      { role: "user", content: "second question" },
    ],
    model: "m",
  });

  it("a conversation's next turn shares every full block of the previous one, whatever else changed", () => {
    const a = prefixHashes(promptText(turn1));
    const b = prefixHashes(promptText(turn2));
    expect(a.length).toBeGreaterThan(MIN_AFFINITY_CHARS / PREFIX_BLOCK_CHARS);
    expect(b.slice(0, a.length)).toEqual(a);
  });

  it("routes the next turn to the instance that served the last one; an unrelated prompt finds nothing", () => {
    const lru = new PrefixAffinity();
    lru.record(prefixHashes(promptText(turn1)), "inst-1");
    expect(lru.lookup(prefixHashes(promptText(turn2)))).toBe("inst-1");
    const other = JSON.stringify({
      messages: [{ role: "user", content: "Something else entirely. ".repeat(80) }],
    });
    expect(lru.lookup(prefixHashes(promptText(other)))).toBeUndefined();
  });

  it("a shared prefix shorter than the minimum does not pin", () => {
    const lru = new PrefixAffinity();
    const short = (q: string) =>
      JSON.stringify({ messages: [{ role: "system", content: "x".repeat(300) + q }] });
    lru.record(prefixHashes(promptText(short("a".repeat(2000)))), "i");
    expect(lru.lookup(prefixHashes(promptText(short("b".repeat(2000)))))).toBeUndefined();
  });

  it("the longest recorded prefix wins, and the memory stays bounded (oldest forgotten)", () => {
    const lru = new PrefixAffinity(40);
    const base = prefixHashes(promptText(turn1));
    const grown = prefixHashes(promptText(turn2));
    lru.record(base, "old");
    lru.record(grown, "new");
    expect(lru.lookup(grown)).toBe("new");
    for (let i = 0; i < 10; i++) lru.record([`h${i}`], "x");
    expect(lru.size).toBeLessThanOrEqual(40);
    expect(new PrefixAffinity().max).toBe(AFFINITY_ENTRIES);
  });

  it("a body that is not JSON or has no prompt gives no prefix", () => {
    expect(prefixHashes(promptText("not json"))).toEqual([]);
    expect(promptText(JSON.stringify({ model: "m" }))).toBe("");
    expect(promptText("[1,2]")).toBe("");
  });
});

describe("Admission", () => {
  it("runs as many as the slots, queues up to the depth in order, refuses one more", async () => {
    const a = new Admission(2, 2);
    const r1 = await a.enter("i");
    const r2 = await a.enter("i");
    const order: number[] = [];
    const w3 = a.enter("i").then((x) => (order.push(3), x));
    const w4 = a.enter("i").then((x) => (order.push(4), x));
    expect(a.load("i")).toBe(4);
    expect(a.depths()).toEqual([{ instance: "i", waiting: 2 }]);
    const refused = await a.enter("i").catch((e) => e);
    expect(refused).toBeInstanceOf(ServingError);
    expect((refused as ServingError).kind).toBe("Overloaded");
    // Another instance has its own slots.
    expect((await a.enter("j")).waitedMs).toBeLessThan(50);
    r1.release();
    r1.release(); // idempotent: frees one slot only
    const a3 = await w3;
    expect(order).toEqual([3]);
    r2.release();
    const a4 = await w4;
    expect(order).toEqual([3, 4]);
    expect(a3.waitedMs).toBeGreaterThanOrEqual(0);
    a3.release();
    a4.release();
    expect(a.load("i")).toBe(0);
  });

  it("a waiter whose client goes leaves the line and frees its place", async () => {
    const a = new Admission(1, 1);
    const r1 = await a.enter("i");
    const gone = new AbortController();
    const w = a.enter("i", gone.signal);
    gone.abort(new Error("client left"));
    await expect(w).rejects.toThrow("client left");
    expect(a.load("i")).toBe(1);
    const w2 = a.enter("i");
    r1.release();
    (await w2).release();
    expect(a.depths()).toEqual([]);
  });
});
