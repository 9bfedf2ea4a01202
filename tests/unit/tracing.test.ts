/**
 * Tracing's core and its table: a request's marks become the spans the routes show, the Chrome trace file is
 * well formed, and spans written in batches to a real SQLite file are read back, bounded and pruned by
 * retention (old rows go, recent ones stay; a retention of 0 keeps every age).
 */
import { afterAll, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { openStore } from "../../src/store/db.ts";
import { retentionCutoff, TracePlane } from "../../src/tracing/plane.ts";
import {
  beginTrace,
  endTrace,
  markTrace,
  spanWriterOf,
  traceSpan,
  traceTarget,
} from "../../src/tracing/recorder.ts";
import {
  chromeTrace,
  mergeSummaries,
  type Span,
  spansFromMarks,
  traceStats,
  traceSummary,
} from "../../src/tracing/spans.ts";
import { BUFFER_LIMIT, pruneTraces, recentTraces, spansOf, SpanWriter } from "../../src/tracing/store.ts";
import type { NodeContext } from "../../src/node/context.ts";
import { tempDir } from "../helpers/daemon.ts";

const T = "3f1c2a9e-8d7b-4c6a-9e5f-1a2b3c4d5e6f";
const facts = {
  taskId: T,
  nodeId: "node-b",
  path: "/v1/chat/completions",
  modelId: "m",
  instanceId: "i",
  status: 200,
  streamed: true,
};

describe("spans from a request's marks", () => {
  it("lays prefill and decode back from the end using the engine's timings; queue is the wait before", () => {
    const spans = spansFromMarks(
      {
        arrived: 1_000,
        routeStart: 1_500,
        routed: 1_600,
        engineCall: 2_000,
        engineAnswered: 2_100,
        end: 100_000,
      },
      { ...facts, timings: { promptMs: 10, promptTokens: 5, predictedMs: 50, predictedTokens: 20 } },
    );
    const by = Object.fromEntries(spans.map((s) => [s.category, s]));
    expect(by.receive).toMatchObject({ startUs: 1_000, durationUs: 500 });
    expect(by.route).toMatchObject({ startUs: 1_500, durationUs: 100 });
    expect(by.decode).toMatchObject({ startUs: 50_000, durationUs: 50_000, attrs: { tokens: 20 } });
    expect(by.decode.attrs.tokensPerSecond).toBe(400);
    expect(by.prefill).toMatchObject({ startUs: 40_000, durationUs: 10_000, attrs: { tokens: 5 } });
    expect(by.queue).toMatchObject({ startUs: 2_000, durationUs: 38_000 });
    expect(by.request).toMatchObject({ startUs: 1_000, durationUs: 99_000 });
    expect(by.forward).toBeUndefined();
  });

  it("never starts prefill before the engine was called, and without timings says so", () => {
    const clamped = spansFromMarks(
      { arrived: 0, routeStart: 1, routed: 2, engineCall: 10_000, end: 20_000 },
      { ...facts, timings: { promptMs: 100, predictedMs: 100 } },
    );
    for (const s of clamped) expect(s.startUs).toBeGreaterThanOrEqual(0);
    expect(clamped.find((s) => s.category === "queue")!.durationUs).toBe(0);
    const none = spansFromMarks({
      arrived: 0,
      routeStart: 1,
      routed: 2,
      engineCall: 3,
      engineAnswered: 9,
      end: 20,
    }, {
      ...facts,
      timings: null,
    });
    expect(none.find((s) => s.category === "prefill")).toMatchObject({
      durationUs: 6,
      attrs: { timings: "unreported" },
    });
  });

  it("on the forwarding node: a forward span to the driving node, then the stream back", () => {
    const spans = spansFromMarks(
      { arrived: 0, routeStart: 10, routed: 20, forwardStart: 30, forwardAnswered: 500, end: 9_000 },
      { ...facts, nodeId: "node-a", forwardedTo: "node-b", timings: null },
    );
    expect(spans.map((s) => s.category)).toEqual(["request", "receive", "route", "forward", "stream"]);
    expect(spans.find((s) => s.category === "forward")).toMatchObject({
      name: "forward to node-b",
      startUs: 30,
      durationUs: 8_970,
      attrs: { toNode: "node-b", answeredAfterUs: 470 },
    });
  });
});

describe("the recorder", () => {
  it("keeps a request's marks by its context object; a request that never routed leaves nothing", () => {
    const req = {};
    beginTrace(req, { taskId: T, nodeId: "n", path: "/v1/chat/completions", arrivedUs: 10 });
    markTrace(req, "routeStart");
    traceTarget(req, "m", "inst", "cmd");
    traceSpan(req, "queue", "admission", 20, 70, { position: 2 });
    const spans = endTrace(req, 200, false, 100)!;
    expect(spans.find((s) => s.name === "admission")).toMatchObject({
      category: "queue",
      startUs: 20,
      durationUs: 50,
      modelId: "m",
      instanceId: "inst",
      attrs: { position: 2 },
    });
    expect(spans.find((s) => s.category === "request")!.attrs.commandId).toBe("cmd");
    expect(endTrace(req, 200, false)).toBeNull(); // ended once

    const early = {};
    beginTrace(early, { taskId: T, nodeId: "n", path: "/x", arrivedUs: 0 });
    expect(endTrace(early, 404, false)).toBeNull();
    const untraced = {};
    markTrace(untraced, "routeStart");
    traceSpan(untraced, "queue", "admission", 0);
    expect(endTrace(untraced, 200, false)).toBeNull();
  });
});

const span = (nodeId: string, category: Span["category"], startUs: number, durationUs: number): Span => ({
  taskId: T,
  nodeId,
  category,
  name: category,
  startUs,
  durationUs,
  modelId: "m",
  instanceId: "i",
  attrs: {},
});

describe("trace shapes", () => {
  const spans = [
    span("a", "request", 100, 1000),
    span("a", "forward", 150, 900),
    span("b", "decode", 300, 500),
  ];

  it("a Chrome trace file: complete events on one thread per node, named threads, JSON all the way", () => {
    const file = JSON.parse(JSON.stringify(chromeTrace(spans))) as { traceEvents: Record<string, unknown>[] };
    const x = file.traceEvents.filter((e) => e.ph === "X");
    expect(x.map((e) => [e.name, e.ts, e.dur, e.pid, e.tid])).toEqual([
      ["request", 100, 1000, 0, 0],
      ["forward", 150, 900, 0, 0],
      ["decode", 300, 500, 0, 1],
    ]);
    expect(x[2].args).toMatchObject({ rank: 1, node_id: "b", model_id: "m", attrs: { instance_id: "i" } });
    expect(file.traceEvents.filter((e) => e.ph === "M")).toEqual([
      { name: "thread_name", ph: "M", pid: 0, tid: 0, args: { name: "Rank 0", node_id: "a" } },
      { name: "thread_name", ph: "M", pid: 0, tid: 1, args: { name: "Rank 1", node_id: "b" } },
    ]);
  });

  it("stats by category and by rank, and the wall time across nodes", () => {
    const s = traceStats(T, spans, []);
    expect(s.totalWallTimeUs).toBe(1000);
    expect(s.byCategory.forward).toEqual({ totalUs: 900, count: 1, minUs: 900, maxUs: 900, avgUs: 900 });
    expect(Object.keys(s.byRank)).toEqual(["0", "1"]);
    expect(Object.keys(s.byRank["1"].byCategory)).toEqual(["decode"]);
  });

  it("list entries of one trace from two nodes merge: nodes unioned, sizes added", () => {
    const one = traceSummary(T, spans.slice(0, 2), "2026-01-01T00:00:01Z", 10, [{ nodeId: "a" }]);
    const two = traceSummary(T, spans.slice(2), "2026-01-01T00:00:00Z", 5, [{
      nodeId: "b",
      friendlyName: "bee",
    }]);
    const other = traceSummary("x", spans.slice(2), "2026-01-02T00:00:00Z", 1, [{ nodeId: "b" }]);
    const merged = mergeSummaries([one, other, two]);
    expect(merged.map((m) => m.taskId)).toEqual(["x", T]);
    expect(merged[1]).toMatchObject({
      createdAt: "2026-01-01T00:00:00Z",
      fileSize: 15,
      spanCount: 3,
      sourceNodes: [{ nodeId: "a" }, { nodeId: "b", friendlyName: "bee" }],
      categories: ["decode", "forward", "request"],
    });
  });
});

describe("the trace_spans table", async () => {
  const dir = tempDir("skulk-tracing-");
  const store = await openStore(dir);
  afterAll(() => {
    store.close();
    Deno.removeSync(dir, { recursive: true });
  });

  it("writes spans in batches off the caller's path and reads them back", async () => {
    const w = new SpanWriter(store.db, 20);
    w.add([span("a", "request", 1, 2), span("a", "route", 2, 1)]);
    expect(await spansOf(store.db, T)).toEqual([]); // not yet: add returns before any write
    await new Promise((r) => setTimeout(r, 100));
    const back = await spansOf(store.db, T);
    expect(back.map((s) => s.category)).toEqual(["request", "route"]);
    expect(back[0]).toEqual(span("a", "request", 1, 2));
    expect(w.written).toBe(2);
    const list = await recentTraces(store.db, 10);
    expect(list.map((l) => [l.taskId, l.spans.length])).toEqual([[T, 2]]);
    expect(list[0].fileSize).toBeGreaterThan(0);
  });

  it("bounds its buffer: past the limit the oldest spans are dropped and counted", async () => {
    const w = new SpanWriter(store.db, 60_000);
    const many = Array.from(
      { length: BUFFER_LIMIT + 5 },
      (_, i) => ({ ...span("z", "decode", i, 1), taskId: "bound" }),
    );
    w.add(many);
    expect(w.dropped).toBe(5);
    await w.flush();
    const kept = await spansOf(store.db, "bound");
    expect(kept.length).toBe(BUFFER_LIMIT);
    expect(kept[0].startUs).toBe(5);
    await store.db.run(sql`DELETE FROM trace_spans WHERE task_id = 'bound'`);
  }, 120_000);

  it("prunes by retention: rows older than the cutoff go, recent ones stay; a cap bounds the row count", async () => {
    const old = "11111111-2222-4333-8444-555555555555";
    const w = spanWriterOf(store);
    w.add([{ ...span("a", "request", 5, 5), taskId: old }, { ...span("a", "route", 6, 1), taskId: old }]);
    await w.flush();
    const fourDaysAgo = new Date(Date.now() - 4 * 86_400_000).toISOString();
    await store.db.run(sql`UPDATE trace_spans SET created_at = ${fourDaysAgo} WHERE task_id = ${old}`);

    expect(retentionCutoff(0, Date.now())).toBeNull();
    expect(retentionCutoff(-1, Date.now())).toBeNull();
    expect(await pruneTraces(store.db, retentionCutoff(0, Date.now()))).toBe(0);
    expect((await spansOf(store.db, old)).length).toBe(2);

    // The plane's prune, with the default retention of 3 days.
    const ctx = { store, config: { tracingRetentionDays: 3 } } as unknown as NodeContext;
    expect(await new TracePlane().prune(ctx)).toBe(2);
    expect(await spansOf(store.db, old)).toEqual([]);
    expect((await spansOf(store.db, T)).length).toBe(2);

    // The row cap keeps the newest rows whatever their age.
    expect(await pruneTraces(store.db, null, 1)).toBe(1);
    expect((await spansOf(store.db, T)).map((s) => s.category)).toEqual(["route"]);
  });
});
