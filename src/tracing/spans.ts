/**
 * The pure core of request tracing: a request's moments (marks) become spans, and stored spans become the
 * wire shapes of spec §1.15 (a trace, its stats, its list entry, a Chrome trace event file). No effects here.
 */
import { z } from "zod";

/** A task id: the UUID the node that received the request gave it (validated wherever one comes in). */
export const TaskIdSchema = z.uuid("task_id must be a UUID (as /v1/traces lists them)");

export const CATEGORIES = [
  "request",
  "receive",
  "route",
  "forward",
  "queue",
  "prefill",
  "decode",
  "stream",
] as const;
export type Category = (typeof CATEGORIES)[number];

/** One stored span; times are microseconds since the Unix epoch on the node that recorded it. */
export const SpanSchema = z.object({
  taskId: z.string(),
  nodeId: z.string(),
  category: z.enum(CATEGORIES),
  name: z.string(),
  startUs: z.number().int(),
  durationUs: z.number().int().nonnegative(),
  modelId: z.string().nullable(),
  instanceId: z.string().nullable(),
  attrs: z.record(z.string(), z.unknown()),
});
export type Span = z.infer<typeof SpanSchema>;

export const SourceNodeSchema = z.object({ nodeId: z.string(), friendlyName: z.string().optional() });
export type SourceNode = z.infer<typeof SourceNodeSchema>;

/** `GET /v1/traces/{task_id}`: spans in start order; `rank` is the node's place among the trace's nodes. */
export const TraceViewSchema = z.object({
  taskId: z.string(),
  traces: z.array(z.object({
    name: z.string(),
    startUs: z.number(),
    durationUs: z.number(),
    rank: z.number().int(),
    category: z.string(),
    nodeId: z.string().optional(),
    modelId: z.string().optional(),
    taskKind: z.string().optional(),
    tags: z.array(z.string()),
    attrs: z.record(z.string(), z.unknown()),
  })),
  sourceNodes: z.array(SourceNodeSchema),
});
export type TraceView = z.infer<typeof TraceViewSchema>;

/** One entry of `GET /v1/traces`. `fileSize`: the bytes the trace's rows hold in this node's database. */
export const TraceSummarySchema = z.object({
  taskId: z.string(),
  createdAt: z.string(),
  fileSize: z.number().int(),
  modelId: z.string().optional(),
  taskKind: z.enum(["image", "text", "embedding"]).optional(),
  categories: z.array(z.string()),
  tags: z.array(z.string()),
  hasToolActivity: z.boolean(),
  sourceNodes: z.array(SourceNodeSchema),
  /** Ours: spans in the trace and its wall time (first start to last end), for a list without a second call. */
  spanCount: z.number().int(),
  totalWallTimeUs: z.number().int(),
});
export type TraceSummary = z.infer<typeof TraceSummarySchema>;

/** The moments of one request on one node, in epoch microseconds; absent where the request never got there. */
export interface Marks {
  arrived: number;
  routeStart?: number;
  routed?: number;
  forwardStart?: number;
  forwardAnswered?: number;
  engineCall?: number;
  engineAnswered?: number;
  /** When the answer's last byte left (stream closed or body sent). */
  end: number;
}

/** What the engine reported (llama-server's `timings`), read defensively: any field may be missing. */
export interface EngineTimings {
  promptMs?: number;
  promptTokens?: number;
  predictedMs?: number;
  predictedTokens?: number;
}

export function engineTimingsOf(raw: unknown): EngineTimings | null {
  if (!raw || typeof raw !== "object") return null;
  const t = raw as Record<string, unknown>;
  const num = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined;
  const out: EngineTimings = {
    promptMs: num(t.prompt_ms),
    promptTokens: num(t.prompt_n),
    predictedMs: num(t.predicted_ms),
    predictedTokens: num(t.predicted_n),
  };
  return Object.values(out).some((v) => v !== undefined) ? out : null;
}

export interface RequestFacts {
  taskId: string;
  nodeId: string;
  path: string;
  modelId: string | null;
  instanceId: string | null;
  commandId?: string;
  /** The node this request was forwarded to (on the node that forwarded it). */
  forwardedTo?: string;
  /** The node that forwarded this request here (on the node that served it). */
  forwardedBy?: string;
  status: number;
  streamed: boolean;
  timings: EngineTimings | null;
}

/**
 * A request's spans from its marks. Prefill and decode come from the engine's own timings, laid back from
 * the moment the answer ended (the last token); queue is the wait between calling the engine and its
 * prefill starting (llama-server's slot wait). Without timings, prefill is the call-to-answer time.
 */
export function spansFromMarks(m: Marks, f: RequestFacts): Span[] {
  const out: Span[] = [];
  const span = (category: Category, name: string, start: number, end: number, attrs = {}) => {
    if (!(end >= start)) end = start;
    out.push({
      taskId: f.taskId,
      nodeId: f.nodeId,
      category,
      name,
      startUs: Math.round(start),
      durationUs: Math.round(end - start),
      modelId: f.modelId,
      instanceId: f.instanceId,
      attrs,
    });
  };
  span("request", `${f.forwardedBy ? "serve" : "request"} ${f.path}`, m.arrived, m.end, {
    status: f.status,
    streamed: f.streamed,
    ...f.commandId ? { commandId: f.commandId } : {},
    ...f.forwardedBy ? { forwardedBy: f.forwardedBy } : {},
  });
  span("receive", "receive", m.arrived, m.routeStart ?? m.end);
  if (m.routeStart !== undefined && m.routed !== undefined) {
    span("route", "route", m.routeStart, m.routed, {
      ...f.instanceId ? { instanceId: f.instanceId } : {},
      ...f.forwardedTo ? { driverNode: f.forwardedTo } : { driverNode: f.nodeId },
    });
  }
  if (m.forwardStart !== undefined) {
    span("forward", `forward to ${f.forwardedTo ?? "peer"}`, m.forwardStart, m.end, {
      toNode: f.forwardedTo,
      ...m.forwardAnswered !== undefined
        ? { answeredAfterUs: Math.round(m.forwardAnswered - m.forwardStart) }
        : {},
    });
    if (m.forwardAnswered !== undefined) span("stream", "stream out", m.forwardAnswered, m.end);
  }
  if (m.engineCall !== undefined) {
    const t = f.timings;
    const decodeUs = (t?.predictedMs ?? 0) * 1000;
    const prefillUs = (t?.promptMs ?? 0) * 1000;
    const answered = m.engineAnswered ?? m.end;
    if (t && (t.promptMs !== undefined || t.predictedMs !== undefined)) {
      const decodeStart = Math.max(m.engineCall, m.end - decodeUs);
      const prefillStart = Math.max(m.engineCall, decodeStart - prefillUs);
      span("queue", "queue (slot wait)", m.engineCall, prefillStart);
      span("prefill", "prefill", prefillStart, decodeStart, { tokens: t.promptTokens, engineMs: t.promptMs });
      span("decode", "decode", decodeStart, m.end, {
        tokens: t.predictedTokens,
        engineMs: t.predictedMs,
        ...t.predictedMs && t.predictedTokens
          ? { tokensPerSecond: Math.round((t.predictedTokens / t.predictedMs) * 1e5) / 100 }
          : {},
      });
    } else {
      span("prefill", "engine call", m.engineCall, answered, { timings: "unreported" });
    }
    span("stream", "stream out", answered, m.end);
  }
  return out;
}

/** Ranks: each node's place in the order its first span started (the request's owner is rank 0). */
export function ranksOf(spans: Span[]): Map<string, number> {
  const first = new Map<string, number>();
  for (const s of spans) first.set(s.nodeId, Math.min(first.get(s.nodeId) ?? Infinity, s.startUs));
  return new Map([...first.entries()].sort((a, b) => a[1] - b[1]).map(([n], i) => [n, i]));
}

function tagsOf(s: Span): string[] {
  return s.attrs.forwardedBy ? ["forwarded"] : s.category === "forward" ? ["forwarding"] : [];
}

export function sourceNodesOf(spans: Span[], names: (nodeId: string) => string | undefined): SourceNode[] {
  return [...ranksOf(spans).keys()].map((nodeId) => {
    const friendlyName = names(nodeId);
    return friendlyName ? { nodeId, friendlyName } : { nodeId };
  });
}

export function traceView(taskId: string, spans: Span[], sources: SourceNode[]): TraceView {
  const ranks = ranksOf(spans);
  return {
    taskId,
    traces: [...spans].sort((a, b) => a.startUs - b.startUs).map((s) => ({
      name: s.name,
      startUs: s.startUs,
      durationUs: s.durationUs,
      rank: ranks.get(s.nodeId) ?? 0,
      category: s.category,
      nodeId: s.nodeId,
      ...s.modelId ? { modelId: s.modelId } : {},
      ...s.modelId ? { taskKind: "text" } : {},
      tags: tagsOf(s),
      attrs: { ...s.attrs, ...s.instanceId ? { instanceId: s.instanceId } : {} },
    })),
    sourceNodes: sources,
  };
}

interface CategoryStats {
  totalUs: number;
  count: number;
  minUs: number;
  maxUs: number;
  avgUs: number;
}

function statsBy(spans: Span[]): Record<string, CategoryStats> {
  const out: Record<string, CategoryStats> = {};
  for (const s of spans) {
    const c = out[s.category] ??= { totalUs: 0, count: 0, minUs: Infinity, maxUs: 0, avgUs: 0 };
    c.totalUs += s.durationUs;
    c.count += 1;
    c.minUs = Math.min(c.minUs, s.durationUs);
    c.maxUs = Math.max(c.maxUs, s.durationUs);
  }
  for (const c of Object.values(out)) c.avgUs = Math.round(c.totalUs / c.count);
  return out;
}

/** Wall time: first start to last end, across every node (their clocks as they are). */
export function wallTimeUs(spans: Span[]): number {
  if (spans.length === 0) return 0;
  const start = Math.min(...spans.map((s) => s.startUs));
  const end = Math.max(...spans.map((s) => s.startUs + s.durationUs));
  return end - start;
}

export function traceStats(taskId: string, spans: Span[], sources: SourceNode[]) {
  const ranks = ranksOf(spans);
  const byRank: Record<string, { byCategory: Record<string, CategoryStats> }> = {};
  for (const [nodeId, rank] of ranks) {
    byRank[String(rank)] = { byCategory: statsBy(spans.filter((s) => s.nodeId === nodeId)) };
  }
  return {
    taskId,
    totalWallTimeUs: wallTimeUs(spans),
    byCategory: statsBy(spans),
    byRank,
    sourceNodes: sources,
  };
}

/** A Chrome trace event file (chrome://tracing, Perfetto): one complete event per span, one thread per rank. */
export function chromeTrace(spans: Span[]) {
  const ranks = ranksOf(spans);
  const events: Record<string, unknown>[] = [...spans].sort((a, b) => a.startUs - b.startUs).map((s) => {
    const rank = ranks.get(s.nodeId) ?? 0;
    return {
      name: s.name,
      cat: s.category,
      ph: "X",
      ts: s.startUs,
      dur: s.durationUs,
      pid: 0,
      tid: rank,
      args: {
        rank,
        node_id: s.nodeId,
        model_id: s.modelId,
        task_kind: s.modelId ? "text" : null,
        tags: tagsOf(s),
        attrs: { ...s.attrs, ...s.instanceId ? { instance_id: s.instanceId } : {} },
      },
    };
  });
  for (const [nodeId, rank] of ranks) {
    events.push({
      name: "thread_name",
      ph: "M",
      pid: 0,
      tid: rank,
      args: { name: `Rank ${rank}`, node_id: nodeId },
    });
  }
  return { traceEvents: events, displayTimeUnit: "ms" };
}

/** The list entry for a trace, from the spans this node (or the cluster) holds of it. */
export function traceSummary(
  taskId: string,
  spans: Span[],
  createdAt: string,
  fileSize: number,
  sources: SourceNode[],
): TraceSummary {
  const model = spans.find((s) => s.modelId)?.modelId ?? undefined;
  return {
    taskId,
    createdAt,
    fileSize,
    ...model ? { modelId: model, taskKind: "text" as const } : {},
    categories: [...new Set(spans.map((s) => s.category))].sort(),
    tags: [...new Set(spans.flatMap(tagsOf))].sort(),
    hasToolActivity: spans.some((s) => s.attrs.toolCalls === true),
    sourceNodes: sources,
    spanCount: spans.length,
    totalWallTimeUs: wallTimeUs(spans),
  };
}

/** Merges the same trace's entries from several nodes: sizes and spans add up, nodes are unioned. */
export function mergeSummaries(entries: TraceSummary[]): TraceSummary[] {
  const by = new Map<string, TraceSummary>();
  for (const e of entries) {
    const had = by.get(e.taskId);
    if (!had) {
      by.set(e.taskId, { ...e, sourceNodes: [...e.sourceNodes] });
      continue;
    }
    const nodes = new Map(had.sourceNodes.map((n) => [n.nodeId, n]));
    for (const n of e.sourceNodes) if (!nodes.has(n.nodeId) || n.friendlyName) nodes.set(n.nodeId, n);
    by.set(e.taskId, {
      ...had,
      createdAt: had.createdAt < e.createdAt ? had.createdAt : e.createdAt,
      fileSize: had.fileSize + e.fileSize,
      modelId: had.modelId ?? e.modelId,
      taskKind: had.taskKind ?? e.taskKind,
      categories: [...new Set([...had.categories, ...e.categories])].sort(),
      tags: [...new Set([...had.tags, ...e.tags])].sort(),
      hasToolActivity: had.hasToolActivity || e.hasToolActivity,
      sourceNodes: [...nodes.values()],
      spanCount: had.spanCount + e.spanCount,
      totalWallTimeUs: Math.max(had.totalWallTimeUs, e.totalWallTimeUs),
    });
  }
  return [...by.values()].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
}
