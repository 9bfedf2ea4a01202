/**
 * The flight recorder: a bounded ring of this node's recent control and runner events (placement
 * decisions, runner phases, engine exits with their log tails, elections, peer refusals, healing).
 */
import { z } from "zod";

export const FlightSourceSchema = z.enum(["placement", "runner", "engine", "election", "peer", "healing"]);
export type FlightSource = z.infer<typeof FlightSourceSchema>;

const Attr = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** One entry as every node keeps and serves it (the timeline merges them across nodes by `at`). */
export const FlightEntrySchema = z.object({
  /** ISO time on the recording node's clock, to the millisecond. */
  at: z.string(),
  nodeId: z.string(),
  /** Per node and run: orders entries recorded in the same millisecond. */
  seq: z.number().int().nonnegative(),
  source: FlightSourceSchema,
  event: z.string(),
  detail: z.string(),
  /** The runner's phase after the event (runner and engine entries). */
  phase: z.string().nullable(),
  runnerId: z.string().nullable(),
  instanceId: z.string().nullable(),
  modelId: z.string().nullable(),
  taskId: z.string().nullable(),
  commandId: z.string().nullable(),
  attrs: z.record(z.string(), Attr),
  /** An engine's last log lines, on its exit. */
  logTail: z.array(z.string()),
});
export type FlightEntry = z.infer<typeof FlightEntrySchema>;

/** What a producer says; the recorder stamps time, node and sequence and bounds every field. */
export interface FlightNote {
  source: FlightSource;
  event: string;
  detail: string;
  phase?: string | null;
  runnerId?: string | null;
  instanceId?: string | null;
  modelId?: string | null;
  taskId?: string | null;
  commandId?: string | null;
  attrs?: Record<string, string | number | boolean | null>;
  logTail?: readonly string[];
}

/** The one thing producers hold: they note, they never read (the routes read the recorder itself). */
export interface FlightPort {
  note(n: FlightNote): void;
}

/** Bounds per entry, so the ring's memory is its size times a known maximum (docs/observability.md). */
export const DETAIL_CHARS = 1000;
export const TAIL_LINES = 15;
export const TAIL_LINE_CHARS = 300;
export const ATTRS = 16;
export const ATTR_CHARS = 200;
const ID_CHARS = 200;

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const id = (s: string | null | undefined) => (s ? cut(s, ID_CHARS) : null);

export function boundedEntry(n: FlightNote, at: number, nodeId: string, seq: number): FlightEntry {
  const attrs: FlightEntry["attrs"] = {};
  for (const [k, v] of Object.entries(n.attrs ?? {}).slice(0, ATTRS)) {
    attrs[cut(k, 64)] = typeof v === "string" ? cut(v, ATTR_CHARS) : v;
  }
  return {
    at: new Date(at).toISOString(),
    nodeId,
    seq,
    source: n.source,
    event: cut(n.event, 64),
    detail: cut(n.detail, DETAIL_CHARS),
    phase: id(n.phase),
    runnerId: id(n.runnerId),
    instanceId: id(n.instanceId),
    modelId: id(n.modelId),
    taskId: id(n.taskId),
    commandId: id(n.commandId),
    attrs,
    logTail: (n.logTail ?? []).slice(-TAIL_LINES).map((l) => cut(l, TAIL_LINE_CHARS)),
  };
}

export interface Window {
  /** Only entries strictly after this time (ms since the epoch). */
  sinceMs?: number;
  /** The newest this many of what remains. */
  limit?: number;
}

/** Entries of one node in time order: `window` keeps those after `sinceMs`, then the newest `limit`. */
export function windowed(entries: readonly FlightEntry[], w: Window): FlightEntry[] {
  const after = w.sinceMs === undefined ? entries : entries.filter((e) => Date.parse(e.at) > w.sinceMs!);
  return w.limit === undefined ? [...after] : after.slice(Math.max(0, after.length - w.limit));
}

export class FlightRecorder implements FlightPort {
  readonly #ring: (FlightEntry | undefined)[];
  #next = 0;
  #seq = 0;

  constructor(readonly nodeId: string, readonly size: number, private readonly now = Date.now) {
    this.#ring = new Array(size);
  }

  note(n: FlightNote): void {
    this.#ring[this.#next] = boundedEntry(n, this.now(), this.nodeId, this.#seq++);
    this.#next = (this.#next + 1) % this.size;
  }

  /** Entries ever noted (the ring holds the newest `size` of them). */
  get noted(): number {
    return this.#seq;
  }

  /** Oldest first. */
  entries(w: Window = {}): FlightEntry[] {
    const all = [...this.#ring.slice(this.#next), ...this.#ring.slice(0, this.#next)].filter(
      (e): e is FlightEntry => e !== undefined,
    );
    return windowed(all, w);
  }
}

/** Merges nodes' entries into one time line: by time, then node, then each node's own order. */
export function mergeTimelines(parts: readonly (readonly FlightEntry[])[], limit?: number): FlightEntry[] {
  const all = parts.flat().sort((a, b) =>
    a.at < b.at ? -1 : a.at > b.at ? 1 : a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : a.seq - b.seq
  );
  return limit === undefined ? all : all.slice(Math.max(0, all.length - limit));
}
