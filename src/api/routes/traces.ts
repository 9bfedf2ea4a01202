/**
 * Request tracing over HTTP: the middleware that traces a request (and trusts a forwarded task id only on a
 * verified peer signature), `GET/PUT /v1/tracing`, and the trace routes, local and fanned out to the cluster.
 */
import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
import { z } from "zod";
import { makeEvent } from "../../cluster/events.ts";
import { notedOf } from "../../metrics/node.ts";
import type { NodeContext } from "../../node/context.ts";
import { FORWARDED_HEADER } from "../../serving/forward.ts";
import { fanOut, type NodeFailure, spansFromView } from "../../tracing/cluster.ts";
import { beginTrace, endTrace, routedTraceOf, spanWriterOf, TASK_ID_HEADER } from "../../tracing/recorder.ts";
import {
  chromeTrace,
  mergeSummaries,
  sourceNodesOf,
  type Span,
  TaskIdSchema,
  traceStats,
  traceSummary,
  TraceSummarySchema,
  traceView,
  TraceViewSchema,
} from "../../tracing/spans.ts";
import { deleteTraces, MAX_LIST, recentTraces, spansOf } from "../../tracing/store.ts";
import { signedForward } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { badRequest, notFound, readJson } from "../errors.ts";
import { describe } from "../openapi.ts";
import { appliedHere } from "./config.ts";
import { untilDone } from "./openai.ts";

const TracingState = z.object({ enabled: z.boolean() }).strict();
const TraceList = z.object({ traces: z.array(TraceSummarySchema) });
const ClusterTraceList = TraceList.extend({
  /** Nodes that did not answer: the list holds the others' traces. */
  partial: z.array(z.object({ nodeId: z.string(), error: z.string() })).optional(),
});
const DeleteBody = z.object({ taskIds: z.array(TaskIdSchema).max(MAX_LIST) }).strict();

describe({
  method: "get",
  path: "/v1/tracing",
  summary: "Whether requests are traced, cluster-wide",
  tag: "tracing",
  response: TracingState,
});
describe({
  method: "put",
  path: "/v1/tracing",
  summary: "Turn request tracing on or off for every node (through the master); applies to new requests",
  tag: "tracing",
  body: TracingState,
  response: TracingState,
});
describe({
  method: "get",
  path: "/v1/traces",
  summary: "Traces this node holds, newest first",
  tag: "tracing",
  query: { limit: `how many (1-${MAX_LIST}, default 50)` },
  response: TraceList,
});
describe({
  method: "get",
  path: "/v1/traces/cluster",
  summary: "Traces every node holds, merged by task id; `partial` names nodes that did not answer",
  tag: "tracing",
  query: { limit: `how many (1-${MAX_LIST}, default 50)` },
  response: ClusterTraceList,
});
for (const scope of ["", "/cluster"]) {
  const where = scope ? "every node's spans of the request (fan-out)" : "this node's spans of the request";
  describe({
    method: "get",
    path: `/v1/traces${scope}/{task_id}`,
    summary: `One trace: ${where}`,
    tag: "tracing",
  });
  describe({
    method: "get",
    path: `/v1/traces${scope}/{task_id}/stats`,
    summary: `Time by category and by node (rank) of one trace: ${where}`,
    tag: "tracing",
  });
  describe({
    method: "get",
    path: `/v1/traces${scope}/{task_id}/raw`,
    summary: `One trace as a Chrome trace event file (chrome://tracing, Perfetto): ${where}`,
    tag: "tracing",
  });
}
describe({
  method: "post",
  path: "/v1/traces/delete",
  summary: "Delete traces this node holds",
  tag: "tracing",
  body: DeleteBody,
});

/** Content types of answers that end after the handler returns (SSE, Ollama's NDJSON). */
const STREAMED = /text\/event-stream|application\/x-ndjson/;

/** The request's arrival in epoch microseconds (the first middleware noted it). */
function arrivalUs(c: Context<ApiEnv>): number {
  const at = notedOf(c)?.arrivedAt ?? performance.now();
  return Math.round((performance.timeOrigin + at) * 1000);
}

/**
 * Traces a POST when tracing is on (captured at arrival: a toggle applies to new requests), or when it was
 * forwarded here signed with the forwarding node's task id, which joins this node's spans to that trace.
 * Its spans are queued once the answer's last byte left; nothing is written on the request path.
 */
export const traceRequests: MiddlewareHandler<ApiEnv> = async (c, next) => {
  if (c.req.method !== "POST") return await next();
  const n = c.var.node;
  const by = c.req.header(FORWARDED_HEADER);
  const given = c.req.header(TASK_ID_HEADER);
  let taskId: string | undefined;
  if (by) {
    if (given && TaskIdSchema.safeParse(given).success && await signedForward(c)) taskId = given;
  } else if (n.log.state.tracingEnabled) taskId = crypto.randomUUID();
  if (!taskId) return await next();
  beginTrace(c, { taskId, nodeId: n.nodeId, path: c.req.path, arrivedUs: arrivalUs(c), forwardedBy: by });
  await next();
  // A POST that never reached routing (no model named, refused early, not a generation) leaves no trace.
  if (!routedTraceOf(c)) return void endTrace(c, c.res.status, false);
  const res = c.res;
  const streamed = !!res.body && STREAMED.test(res.headers.get("content-type") ?? "");
  const finish = () => {
    const spans = endTrace(c, res.status, streamed);
    if (spans) spanWriterOf(n.store).add(spans);
  };
  const headers = new Headers(res.headers);
  headers.set(TASK_ID_HEADER, taskId);
  const init = { status: res.status, statusText: res.statusText, headers };
  if (streamed) c.res = untilDone(new Response(res.body, init), finish);
  else {
    finish();
    c.res = new Response(res.body, init);
  }
};

function taskIdParam(c: Context<ApiEnv>): string {
  const parsed = TaskIdSchema.safeParse(c.req.param("task_id"));
  if (!parsed.success) throw badRequest(parsed.error.issues[0].message, "task_id");
  return parsed.data;
}

function limitParam(c: Context<ApiEnv>): number {
  const raw = c.req.query("limit");
  if (raw === undefined) return 50;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIST) {
    throw badRequest(`limit must be an integer from 1 to ${MAX_LIST}`, "limit");
  }
  return n;
}

const friendlyName = (n: NodeContext) => (id: string) => n.telemetry.get(id)?.reading.identity.friendlyName;

/** This node's spans of a trace, after writing what is still buffered (so a just-finished request shows). */
async function localSpans(n: NodeContext, taskId: string): Promise<Span[]> {
  await spanWriterOf(n.store).flush();
  return await spansOf(n.store.db, taskId);
}

async function localList(n: NodeContext, limit: number) {
  await spanWriterOf(n.store).flush();
  const rows = await recentTraces(n.store.db, limit);
  return rows.map((r) =>
    traceSummary(r.taskId, r.spans, r.createdAt, r.fileSize, sourceNodesOf(r.spans, friendlyName(n)))
  );
}

/** Every node's spans of a trace: this node's and each peer's (which answers with what it recorded). */
async function clusterSpans(
  n: NodeContext,
  taskId: string,
): Promise<{ spans: Span[]; failed: NodeFailure[] }> {
  const [mine, { answers, failed }] = await Promise.all([
    localSpans(n, taskId),
    fanOut(n, `/v1/traces/${taskId}`, TraceViewSchema),
  ]);
  const theirs = answers.flatMap((a) => a.value ? spansFromView(a.value, a.nodeId) : []);
  return { spans: [...mine, ...theirs].sort((a, b) => a.startUs - b.startUs), failed };
}

const traceNotFound = (taskId: string) => notFound(`Trace not found: ${taskId}`);

function rawAnswer(c: Context<ApiEnv>, taskId: string, spans: Span[]): Response {
  return c.body(JSON.stringify(chromeTrace(spans)), 200, {
    "content-type": "application/json",
    "content-disposition": `attachment; filename="trace_${taskId}.json"`,
  });
}

const partialOf = (failed: NodeFailure[]) => failed.length ? { partial: failed } : {};

/** One trace as a view, its stats or a Chrome file: this node's spans, or every node's (`cluster`). */
async function traceAnswer(c: Context<ApiEnv>, cluster: boolean, shape: "view" | "stats" | "raw") {
  const n = c.var.node;
  const taskId = taskIdParam(c);
  const { spans, failed } = cluster
    ? await clusterSpans(n, taskId)
    : { spans: await localSpans(n, taskId), failed: [] };
  if (spans.length === 0) throw traceNotFound(taskId);
  if (shape === "raw") return rawAnswer(c, taskId, spans);
  const sources = sourceNodesOf(spans, friendlyName(n));
  const body = shape === "view" ? traceView(taskId, spans, sources) : traceStats(taskId, spans, sources);
  return c.json({ ...body, ...partialOf(failed) });
}

export const traceRoutes = new Hono<ApiEnv>()
  .get("/v1/tracing", (c) => c.json({ enabled: c.var.node.log.state.tracingEnabled }))
  .put("/v1/tracing", async (c) => {
    const n = c.var.node;
    const { enabled } = await readJson(c, TracingState);
    if (n.log.state.tracingEnabled !== enabled) {
      await n.submit(makeEvent("TracingStateChanged", { enabled }));
      await appliedHere(() => n.log.state.tracingEnabled === enabled, "GET /v1/tracing");
    }
    return c.json({ enabled: n.log.state.tracingEnabled });
  })
  .get("/v1/traces", async (c) => c.json({ traces: await localList(c.var.node, limitParam(c)) }))
  .post("/v1/traces/delete", async (c) => {
    const { taskIds } = await readJson(c, DeleteBody);
    await spanWriterOf(c.var.node.store).flush();
    return c.json(await deleteTraces(c.var.node.store.db, taskIds));
  })
  .get("/v1/traces/cluster", async (c) => {
    const n = c.var.node;
    const limit = limitParam(c);
    const [mine, { answers, failed }] = await Promise.all([
      localList(n, limit),
      fanOut(n, `/v1/traces?limit=${limit}`, TraceList),
    ]);
    const merged = mergeSummaries([...mine, ...answers.flatMap((a) => a.value?.traces ?? [])]).slice(
      0,
      limit,
    );
    return c.json({ traces: merged, ...partialOf(failed) });
  })
  .get("/v1/traces/cluster/:task_id", (c) => traceAnswer(c, true, "view"))
  .get("/v1/traces/cluster/:task_id/stats", (c) => traceAnswer(c, true, "stats"))
  .get("/v1/traces/cluster/:task_id/raw", (c) => traceAnswer(c, true, "raw"))
  .get("/v1/traces/:task_id", (c) => traceAnswer(c, false, "view"))
  .get("/v1/traces/:task_id/stats", (c) => traceAnswer(c, false, "stats"))
  .get("/v1/traces/:task_id/raw", (c) => traceAnswer(c, false, "raw"));
