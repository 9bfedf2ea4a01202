/**
 * Node-to-node routes under /cluster/peer/*: gossip, events and commands to the master, log sync and push,
 * restart. Headers are checked before the body is read, the body is bounded (PEER_BODY_LIMIT) while it is
 * read, and the HMAC over it is verified before it is parsed.
 */
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { CommandRequestSchema } from "../../app/commands.ts";
import { NoMaster, toWire } from "../../app/errors.ts";
import { EventSchema, makeEvent } from "../../cluster/events.ts";
import { eventIdOf } from "../../cluster/log.ts";
import { GossipMessageSchema } from "../../cluster/gossip.ts";
import { H, PEER_BODY_LIMIT, type Verdict } from "../../cluster/peers.ts";
import type { ClusterHandle } from "../../cluster/handle.ts";
import { PushSchema, SyncRequestSchema } from "../../cluster/replication.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, describeZodError, notFound } from "../errors.ts";
import { describe } from "../openapi.ts";

const PEER_SUMMARIES = [
  ["gossip", "Peer: push-pull exchange of statuses and telemetry deltas"],
  ["submit", "Peer: hand an event to the master to be indexed"],
  ["sync", "Peer: a follower asks the master for the log after its last index"],
  ["push", "Peer: the master pushes a newly indexed event"],
  ["restart", "Peer: restart this node's daemon"],
  ["command", "Peer: a command for the master to decide (place, create/delete instance, add/delete card)"],
] as const;
const PEER_PATHS = PEER_SUMMARIES.map(([p]) => p);

for (const [path, summary] of PEER_SUMMARIES) {
  describe({
    method: "post",
    path: `/cluster/peer/${path}`,
    summary: `${summary} (HMAC-signed, not for clients)`,
    tag: "cluster",
  });
}
describe({
  method: "get",
  path: "/cluster/view",
  summary: "This node's view of the cluster: role, session, peers",
  tag: "cluster",
});
describe({
  method: "post",
  path: "/cluster/test_events",
  summary: "Test mode only (SKULK_TEST_MODE, else 404): submit no-op TestEvents through this node",
  tag: "cluster",
  query: { count: "how many (1-1000, default 1)" },
});

function refuse(c: Context<ApiEnv>, verdict: Exclude<Verdict, { ok: true }>): ApiError {
  c.header(H.refusal, verdict.reason);
  return new ApiError(403, `peer refused: ${verdict.public}`, { type: "peer_refused", code: verdict.reason });
}

/**
 * Before any byte of a peer body: the cluster plane runs, the headers pass (version, namespace, time) and
 * the declared size fits. A chunked body is read by bodyLimit, which stops at the limit.
 */
const limit = bodyLimit({
  maxSize: PEER_BODY_LIMIT,
  onError: () => {
    throw new ApiError(413, `peer body larger than ${PEER_BODY_LIMIT} bytes`, { type: "peer_refused" });
  },
});

/** The gate of the peer routes under `paths` (other route modules add their own peer routes with it). */
export function peerGateFor(paths: readonly string[]): MiddlewareHandler<ApiEnv> {
  const routes = new Set(paths.map((p) => `/cluster/peer/${p}`));
  return (c, next) => {
    if (c.req.method !== "POST" || !routes.has(c.req.path)) return next(); // unknown paths stay 404
    const cluster = c.var.node.cluster;
    if (!cluster) throw notFound("this node runs no cluster plane");
    const early = cluster.precheck(c.req.raw.headers);
    if (early && !early.ok) throw refuse(c, early);
    return limit(c, next);
  };
}

const peerGate = peerGateFor(PEER_PATHS);

/** Verifies the signature over the (bounded) body, then parses it; a refusal is a 403 with its reason in a header. */
export async function peerBody<S extends z.ZodType>(
  c: Context<ApiEnv>,
  schema: S,
): Promise<[ClusterHandle, z.infer<S>]> {
  const cluster = c.var.node.cluster;
  if (!cluster) throw notFound("this node runs no cluster plane");
  const body = new Uint8Array(await c.req.arrayBuffer());
  const url = new URL(c.req.url);
  const verdict = await cluster.verify({
    method: c.req.method,
    path: url.pathname + url.search,
    headers: c.req.raw.headers,
    body,
  });
  if (!verdict.ok) throw refuse(c, verdict);
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(body));
  } catch {
    throw badRequest("peer body is not JSON");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw badRequest(`invalid peer message: ${describeZodError(parsed.error).message}`);
  return [cluster, parsed.data];
}

/** A JSON answer signed for the request it answers, so the asking node knows it came from a member. */
export async function answer(
  c: Context<ApiEnv>,
  cluster: ClusterHandle,
  value: unknown,
  status: 200 | 409 = 200,
) {
  const bytes = new TextEncoder().encode(JSON.stringify(value));
  const headers = await cluster.signAnswer(c.req.header(H.signature) ?? "", bytes);
  return c.body(bytes, status, { ...headers, "content-type": "application/json" });
}

export const peerRoutes = new Hono<ApiEnv>()
  .use("/cluster/peer/*", peerGate)
  .post("/cluster/peer/gossip", async (c) => {
    const [cl, m] = await peerBody(c, GossipMessageSchema);
    return await answer(c, cl, cl.gossip(m));
  })
  .post("/cluster/peer/submit", async (c) => {
    const [cl, m] = await peerBody(c, z.object({ event: EventSchema }).strict());
    return await answer(c, cl, await cl.submit(m.event));
  })
  .post("/cluster/peer/sync", async (c) => {
    const [cl, m] = await peerBody(c, SyncRequestSchema);
    return await answer(c, cl, await cl.sync(m));
  })
  .post("/cluster/peer/push", async (c) => {
    const [cl, m] = await peerBody(c, PushSchema);
    return await answer(c, cl, await cl.push(m));
  })
  .post("/cluster/peer/command", async (c) => {
    const [cl, request] = await peerBody(c, CommandRequestSchema);
    const desk = c.var.node.commands;
    // A refusal travels as data in a signed 200, so the asking node rethrows the same domain error.
    const outcome = desk
      ? await desk.outcome(request)
      : { ok: false, error: toWire(new NoMaster("this node takes no commands"))! };
    return await answer(c, cl, outcome);
  })
  .post("/cluster/peer/restart", async (c) => {
    const [cl] = await peerBody(c, z.object({}).strict());
    const n = c.var.node;
    if (!n.restart) throw new ApiError(501, "this node cannot restart itself (no supervisor hook)");
    const ok = n.restart();
    return await answer(
      c,
      cl,
      { status: ok ? "restarting" : "restart_already_pending", node_id: n.nodeId },
      ok ? 200 : 409,
    );
  })
  .post("/cluster/test_events", async (c) => {
    // Anyone could fill the event log through it, so it exists only where the test harness asks for it.
    if (!c.var.node.config.testMode) {
      throw notFound("POST /cluster/test_events is served only by nodes in test mode (SKULK_TEST_MODE)");
    }
    const count = Number(c.req.query("count") ?? 1);
    if (!Number.isInteger(count) || count < 1 || count > 1000) {
      throw badRequest("count must be an integer from 1 to 1000", "count");
    }
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const e = makeEvent("TestEvent");
      await c.var.node.submit(e);
      ids.push(eventIdOf(e));
    }
    return c.json({ submitted: ids });
  })
  .get("/cluster/view", (c) => {
    const cl = c.var.node.cluster;
    if (!cl) throw notFound("this node runs no cluster plane");
    return c.json(cl.view());
  });
