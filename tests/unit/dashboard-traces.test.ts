/**
 * The observability view's pure readings: a trace laid out as lanes of bars, and the cluster timeline read
 * defensively (the diagnostics route is another part's, so any shape it sends must draw or be skipped).
 */
import { describe, expect, it } from "vitest";
import { micros, timelineEvents, type TraceWire, waterfall } from "../../src/dashboard/app/traces.ts";

const span = (nodeId: string, rank: number, category: string, startUs: number, durationUs: number) => ({
  name: category,
  startUs,
  durationUs,
  rank,
  category,
  nodeId,
  attrs: {},
});

describe("waterfall", () => {
  it("one lane per node in rank order, bars placed within the trace's wall time", () => {
    const t: TraceWire = {
      taskId: "t",
      traces: [
        span("b", 1, "decode", 1500, 500),
        span("a", 0, "request", 1000, 1000),
        span("a", 0, "forward", 1100, 900),
      ],
      sourceNodes: [{ nodeId: "a", friendlyName: "alpha" }, { nodeId: "b" }],
    };
    const w = waterfall(t);
    expect(w.totalUs).toBe(1000);
    expect(w.lanes.map((l) => [l.nodeId, l.label, l.bars.map((b) => b.category)])).toEqual([
      ["a", "alpha", ["request", "forward"]],
      ["b", "b", ["decode"]],
    ]);
    expect(w.lanes[1].bars[0]).toMatchObject({ left: 50, width: 50, offsetUs: 500 });
    expect(w.lanes[0].bars[1]).toMatchObject({ left: 10, width: 90 });
  });

  it("draws an empty or zero-length trace without dividing by zero", () => {
    expect(waterfall({ taskId: "t", traces: [], sourceNodes: [] })).toEqual({ lanes: [], totalUs: 0 });
    const w = waterfall({ taskId: "t", traces: [span("a", 0, "route", 5, 0)], sourceNodes: [] });
    expect(w.lanes[0].bars[0].left).toBe(0);
    expect(w.lanes[0].bars[0].width).toBeGreaterThan(0);
  });

  it("formats microseconds", () => {
    expect([micros(12), micros(2_500), micros(25_000), micros(3_200_000), micros(undefined)]).toEqual([
      "12 µs",
      "2.50 ms",
      "25.0 ms",
      "3.20 s",
      "—",
    ]);
  });
});

describe("timelineEvents", () => {
  it("reads the documented shape, sorted by time, with partial nodes", () => {
    const t = timelineEvents({
      events: [
        { at: 2000, node_id: "b", kind: "runner", summary: "ready" },
        { at: 1000, node_id: "a", kind: "placement", summary: "placed m", extra: 1 },
      ],
      partial: [{ node_id: "c", error: "timeout" }],
    });
    expect(t.events).toEqual([
      { at: 1000, nodeId: "a", kind: "placement", summary: "placed m" },
      { at: 2000, nodeId: "b", kind: "runner", summary: "ready" },
    ]);
    expect(t.partial).toEqual(["c"]);
  });

  it("skips entries without a time, fills missing fields, takes ISO times and upstream's names", () => {
    const t = timelineEvents({
      timeline: [null, 7, { kind: "x" }, { at: "1970-01-01T00:00:01.000Z", nodeId: 5 }, {
        at: 3,
        event: "e",
        detail: "d",
      }],
      unreachableNodes: [{ nodeId: "z" }, "y"],
    });
    expect(t.events).toEqual([
      { at: 3, nodeId: "—", kind: "e", summary: "d" },
      { at: 1000, nodeId: "5", kind: "—", summary: "—" },
    ]);
    expect(t.partial).toEqual(["z", "y"]);
    expect(timelineEvents("nonsense")).toEqual({ events: [], partial: [] });
    expect(timelineEvents({ events: "no" })).toEqual({ events: [], partial: [] });
  });
});
