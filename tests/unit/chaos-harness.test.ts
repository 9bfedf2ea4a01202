/**
 * The chaos suite's judgements on their own: when the model counts as serving again after a fault, and
 * when an acknowledged event counts as held by a node (in its table, or folded into a snapshot it shares).
 */
import { describe, expect, it } from "vitest";
import {
  type Ack,
  chatFigures,
  type ChatResult,
  lostEvents,
  type NodeLog,
  recoverySeconds,
} from "../chaos/harness.ts";

const chat = (start: number, end: number, failure: string | null = null): ChatResult => ({
  start,
  end,
  stream: false,
  failure,
});

describe("recoverySeconds", () => {
  it("is 0 when no chat failed after the fault, even if one failed well before it", () => {
    expect(recoverySeconds([chat(0, 100, "http-503"), chat(5000, 5100), chat(11000, 11100)], 10_000)).toBe(0);
  });

  it("ends with the first success started after the last failure", () => {
    const results = [
      chat(9000, 19_000, "hang"), // in flight at the fault
      chat(10_200, 10_300, "http-503"),
      chat(12_000, 12_100), // a success between failures does not end the outage
      chat(14_000, 14_100, "http-503"),
      chat(14_200, 16_500),
      chat(14_400, 14_500),
    ];
    expect(recoverySeconds(results, 10_000)).toBe(6.5);
  });

  it("is null when the last chat failed", () => {
    expect(recoverySeconds([chat(10_100, 10_200), chat(10_300, 10_400, "http-404")], 10_000)).toBeNull();
  });
});

describe("chatFigures", () => {
  it("counts failures by kind, hangs, and when failures started and stopped", () => {
    const f = chatFigures([
      chat(9000, 19_000, "hang"),
      chat(10_000, 10_100),
      chat(12_000, 12_100, "http-503"),
    ], 10_000);
    expect(f).toEqual({
      chats: 3,
      failures: 2,
      failure_kinds: { hang: 1, "http-503": 1 },
      hangs: 1,
      failing_s: [-1, 2],
    });
  });
});

function log(ids: string[], from = 0, snapshot: NodeLog["snapshot"] = null): NodeLog {
  return {
    idxOf: new Map(ids.map((id, i) => [id, from + i])),
    idAt: new Map(ids.map((id, i) => [from + i, id])),
    snapshot,
  };
}
const acks = (...ids: string[]): Ack[] => ids.map((id) => ({ node: 0, at: 0, id }));

describe("lostEvents", () => {
  it("finds nothing lost when every node holds every acknowledged event", () => {
    const l = log(["a", "b", "c"]);
    expect(lostEvents(acks("a", "c"), [l, log(["a", "b", "c"])])).toEqual({ lost: [], missing: [0, 0] });
  });

  it("counts an event one node lacks, and which node lacks it", () => {
    expect(lostEvents(acks("a", "x"), [log(["a", "x"]), log(["a"])])).toEqual({
      lost: ["x"],
      missing: [0, 1],
    });
  });

  it("accepts an event folded into a snapshot that another node's table shows is the same history", () => {
    const master = log(["a", "b", "c", "d"]);
    const restarted = log(["d"], 3, { idx: 2, eventId: "c" });
    expect(lostEvents(acks("a", "b", "d"), [master, restarted]).lost).toEqual([]);
  });

  it("does not accept it when the snapshot is of another history", () => {
    const master = log(["a", "b", "c", "d"]);
    const diverged = log(["d"], 3, { idx: 2, eventId: "other" });
    expect(lostEvents(acks("a"), [master, diverged])).toEqual({ lost: ["a"], missing: [0, 1] });
  });
});
