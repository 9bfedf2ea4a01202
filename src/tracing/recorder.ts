/**
 * Per-request trace recording: the moments the request path marks (route, forward, engine call), kept by
 * the request's context object while it runs, then turned into spans and handed to the node's span writer.
 */
import type { Db } from "../store/db.ts";
import { type Category, engineTimingsOf, type Marks, type Span, spansFromMarks } from "./spans.ts";
import { SpanWriter } from "./store.ts";

/**
 * Carries the task id on a forwarded request. The serving node trusts it only on a request whose peer
 * signature it verified (api/routes/traces.ts), so a client cannot add spans to another request's trace.
 */
export const TASK_ID_HEADER = "x-skulk-task-id";

/** Microseconds since the Unix epoch, at sub-millisecond resolution. */
export const nowUs = (): number => Math.round((performance.timeOrigin + performance.now()) * 1000);

interface Active {
  taskId: string;
  nodeId: string;
  path: string;
  marks: Omit<Marks, "end">;
  model: string | null;
  instanceId: string | null;
  commandId?: string;
  forwardedTo?: string;
  forwardedBy?: string;
  timings?: () => unknown;
  /** Spans a part of the request path recorded itself (`traceSpan`). */
  extra: {
    category: Category;
    name: string;
    startUs: number;
    endUs: number;
    attrs: Record<string, unknown>;
  }[];
}

/** Keyed by the request's context object, which every middleware and handler of one request shares. */
const active = new WeakMap<object, Active>();

export function beginTrace(
  req: object,
  init: { taskId: string; nodeId: string; path: string; arrivedUs: number; forwardedBy?: string },
): void {
  active.set(req, {
    taskId: init.taskId,
    nodeId: init.nodeId,
    path: init.path,
    marks: { arrived: init.arrivedUs },
    model: null,
    instanceId: null,
    forwardedBy: init.forwardedBy,
    extra: [],
  });
}

/** The task id of a request being traced that reached routing (only such a request leaves spans). */
export function routedTraceOf(req: object): string | undefined {
  const a = active.get(req);
  return a?.marks.routeStart !== undefined ? a.taskId : undefined;
}

type Mark = "routeStart" | "routed" | "engineCall" | "engineAnswered" | "forwardAnswered";

/** Records a moment of the request (a no-op when it is not traced). */
export function markTrace(req: object, mark: Mark): void {
  const a = active.get(req);
  if (a) a.marks[mark] ??= nowUs();
}

/** Routing decided: the model, the instance chosen and the command id; ends the route span. */
export function traceTarget(
  req: object,
  model: string,
  instanceId: string | undefined,
  commandId?: string,
): void {
  const a = active.get(req);
  if (!a) return;
  a.marks.routed ??= nowUs();
  a.model = model;
  a.instanceId = instanceId ?? null;
  a.commandId ??= commandId;
}

/**
 * About to forward to `toNode`: sets the task id header on the forwarded request when this request is
 * traced, and removes any a client sent, so only this node's decision travels.
 */
export function traceForward(req: object, headers: Headers, toNode: string): void {
  headers.delete(TASK_ID_HEADER);
  const a = active.get(req);
  if (!a) return;
  headers.set(TASK_ID_HEADER, a.taskId);
  a.forwardedTo = toNode;
  a.marks.forwardStart ??= nowUs();
}

/** How to read the engine's timings once the answer ended (the stream's last chunk, or the reply). */
export function traceEngine(req: object, read: () => unknown): void {
  const a = active.get(req);
  if (a) a.timings = read;
}

/**
 * A span a part of the request path measures itself (an admission queue's wait, an extension hook), joined
 * to the request's trace when it is traced; a no-op otherwise.
 */
export function traceSpan(
  req: object,
  category: Category,
  name: string,
  startUs: number,
  endUs = nowUs(),
  attrs: Record<string, unknown> = {},
): void {
  active.get(req)?.extra.push({ category, name, startUs, endUs, attrs });
}

/** Ends the request's trace: its spans, or null when it was not traced or never reached routing. */
export function endTrace(req: object, status: number, streamed: boolean, endUs = nowUs()): Span[] | null {
  const a = active.get(req);
  if (!a) return null;
  active.delete(req);
  if (a.marks.routeStart === undefined) return null;
  const extra = a.extra.map((e): Span => ({
    taskId: a.taskId,
    nodeId: a.nodeId,
    category: e.category,
    name: e.name,
    startUs: Math.round(e.startUs),
    durationUs: Math.max(0, Math.round(e.endUs - e.startUs)),
    modelId: a.model,
    instanceId: a.instanceId,
    attrs: e.attrs,
  }));
  return [
    ...spansFromMarks({ ...a.marks, end: endUs }, {
      taskId: a.taskId,
      nodeId: a.nodeId,
      path: a.path,
      modelId: a.model,
      instanceId: a.instanceId,
      commandId: a.commandId,
      forwardedTo: a.forwardedTo,
      forwardedBy: a.forwardedBy,
      status,
      streamed,
      timings: engineTimingsOf(a.timings?.()),
    }),
    ...extra,
  ];
}

const writers = new WeakMap<object, SpanWriter>();

/** The node's span writer, made on first use (keyed by the node's store, which it writes to). */
export function spanWriterOf(store: { db: Db }): SpanWriter {
  let w = writers.get(store);
  if (!w) writers.set(store, w = new SpanWriter(store.db));
  return w;
}
