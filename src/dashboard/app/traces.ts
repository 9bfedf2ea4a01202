/**
 * Pure readings for the observability view: a trace laid out as a waterfall (one lane per node, bars placed
 * by start and length within the trace's wall time) and the cluster timeline read defensively. No DOM here.
 */

export interface TraceSpanWire {
  name: string;
  startUs: number;
  durationUs: number;
  rank: number;
  category: string;
  nodeId?: string;
  modelId?: string;
  attrs: Record<string, unknown>;
}

export interface TraceWire {
  taskId: string;
  traces: TraceSpanWire[];
  sourceNodes: { nodeId: string; friendlyName?: string }[];
  partial?: { nodeId: string; error: string }[];
}

export interface TraceListEntry {
  taskId: string;
  createdAt: string;
  modelId?: string;
  categories: string[];
  sourceNodes: { nodeId: string; friendlyName?: string }[];
  spanCount?: number;
  totalWallTimeUs?: number;
}

export interface WaterfallBar {
  name: string;
  category: string;
  /** Percent of the trace's wall time, from its first start. */
  left: number;
  width: number;
  durationUs: number;
  offsetUs: number;
}

export interface WaterfallLane {
  nodeId: string;
  label: string;
  rank: number;
  bars: WaterfallBar[];
}

/** One lane per node in rank order; bars in start order. A zero-length trace still draws (1 µs wide). */
export function waterfall(t: TraceWire): { lanes: WaterfallLane[]; totalUs: number } {
  const spans = t.traces.filter((s) => Number.isFinite(s.startUs) && Number.isFinite(s.durationUs));
  if (spans.length === 0) return { lanes: [], totalUs: 0 };
  const start = Math.min(...spans.map((s) => s.startUs));
  const end = Math.max(...spans.map((s) => s.startUs + s.durationUs));
  const total = Math.max(1, end - start);
  const names = new Map(t.sourceNodes.map((n) => [n.nodeId, n.friendlyName]));
  const lanes = new Map<string, WaterfallLane>();
  for (const s of [...spans].sort((a, b) => a.startUs - b.startUs)) {
    const id = s.nodeId ?? `rank ${s.rank}`;
    let lane = lanes.get(id);
    if (!lane) {
      lanes.set(id, lane = { nodeId: id, label: names.get(id) ?? id.slice(0, 12), rank: s.rank, bars: [] });
    }
    lane.bars.push({
      name: s.name,
      category: s.category,
      left: ((s.startUs - start) / total) * 100,
      width: Math.max(0.3, (s.durationUs / total) * 100),
      durationUs: s.durationUs,
      offsetUs: s.startUs - start,
    });
  }
  return { lanes: [...lanes.values()].sort((a, b) => a.rank - b.rank), totalUs: total };
}

export function micros(us: number | undefined): string {
  if (us === undefined || !Number.isFinite(us)) return "—";
  if (us < 1000) return `${Math.round(us)} µs`;
  if (us < 1_000_000) return `${(us / 1000).toFixed(us < 10_000 ? 2 : 1)} ms`;
  return `${(us / 1_000_000).toFixed(2)} s`;
}

export interface TimelineEvent {
  at: number;
  nodeId: string;
  kind: string;
  summary: string;
}

/**
 * The merged cluster timeline (`{events: [{at, node_id, kind, summary}], partial?}`), read field by field:
 * an entry without a time is skipped, other missing fields read as "—"; `at` may be ms or an ISO string.
 */
export function timelineEvents(raw: unknown): { events: TimelineEvent[]; partial: string[] } {
  if (!raw || typeof raw !== "object") return { events: [], partial: [] };
  const r = raw as Record<string, unknown>;
  const list = Array.isArray(r.events) ? r.events : Array.isArray(r.timeline) ? r.timeline : [];
  const str = (v: unknown) => typeof v === "string" && v ? v : typeof v === "number" ? String(v) : "—";
  const events: TimelineEvent[] = [];
  for (const e of list) {
    if (!e || typeof e !== "object") continue;
    const x = e as Record<string, unknown>;
    const at = typeof x.at === "number" ? x.at : typeof x.at === "string" ? Date.parse(x.at) : NaN;
    if (!Number.isFinite(at)) continue;
    events.push({
      at,
      nodeId: str(x.node_id ?? x.nodeId),
      kind: str(x.kind ?? x.event ?? x.phase),
      summary: str(x.summary ?? x.detail),
    });
  }
  events.sort((a, b) => a.at - b.at);
  const partialRaw = Array.isArray(r.partial)
    ? r.partial
    : Array.isArray(r.unreachableNodes)
    ? r.unreachableNodes
    : [];
  const partial = partialRaw.map((p) =>
    p && typeof p === "object"
      ? str((p as Record<string, unknown>).node_id ?? (p as Record<string, unknown>).nodeId)
      : str(p)
  );
  return { events, partial };
}
