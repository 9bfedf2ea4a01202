/**
 * Diagnostics in upstream's shapes: this node's (`/v1/diagnostics/node`, its capture bundle), every node's
 * (`/v1/diagnostics/cluster`, one node's proxied) and the merged flight recorder (`…/cluster/timeline`).
 */
import type { Context } from "hono";
import { Hono } from "hono";
import {
  captureOf,
  clusterDiagnostics,
  clusterTimeline,
  diagnosticsOf,
  localAnswer,
  NodeUnreachable,
  NotOnNode,
  UnknownNode,
} from "../../diagnostics/cluster.ts";
import { capture, nodeDiagnostics, UnknownRunner } from "../../diagnostics/node.ts";
import {
  CaptureRequestSchema,
  CaptureSchema,
  ClusterDiagnosticsSchema,
  NodeDiagnosticsSchema,
  PeerDiagRequestSchema,
  TimelineSchema,
} from "../../diagnostics/shapes.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, describeZodError, JsonBodyError, notFound, parseJsonBody } from "../errors.ts";
import { describe } from "../openapi.ts";
import { answer, peerBody, peerGateFor } from "./peer.ts";

/** Node ids are PeerIds (base58); anything else is refused before it is looked up or sent anywhere. */
const NODE_ID = /^[A-Za-z0-9]{1,128}$/;
const MAX_PER_NODE = 100_000;
const MAX_LIMIT = 100_000;

describe({
  method: "get",
  path: "/v1/diagnostics/node",
  summary: "This node's diagnostics: runtime, identity, resources, processes, runners, placements, warnings",
  tag: "diagnostics",
  response: NodeDiagnosticsSchema,
});
describe({
  method: "post",
  path: "/v1/diagnostics/node/capture",
  summary: "A capture bundle: diagnostics with CPU sampled over a window, the flight recorder, the log tail",
  tag: "diagnostics",
  body: CaptureRequestSchema,
  response: CaptureSchema,
});
describe({
  method: "get",
  path: "/v1/diagnostics/cluster",
  summary: "Every node's diagnostics (a node that does not answer is listed with its error)",
  tag: "diagnostics",
  response: ClusterDiagnosticsSchema,
});
describe({
  method: "get",
  path: "/v1/diagnostics/cluster/timeline",
  summary: "Every node's flight recorder merged in time order (unreachable nodes named)",
  tag: "diagnostics",
  query: {
    since: "only entries after this time (ISO 8601, or ms since the epoch)",
    per_node: `entries asked of each node, its newest (default 500, at most ${MAX_PER_NODE})`,
    limit: `entries in the answer, the newest (default 2000, at most ${MAX_LIMIT})`,
  },
  response: TimelineSchema,
});
describe({
  method: "get",
  path: "/v1/diagnostics/cluster/{node_id}",
  summary: "One node's diagnostics, proxied to it over the signed peer route",
  tag: "diagnostics",
  response: NodeDiagnosticsSchema,
});
describe({
  method: "post",
  path: "/v1/diagnostics/cluster/{node_id}/capture",
  summary: "One node's capture bundle, proxied",
  tag: "diagnostics",
  body: CaptureRequestSchema,
  response: CaptureSchema,
});
describe({
  method: "post",
  path: "/cluster/peer/diagnostics",
  summary:
    "Peer: this node's diagnostics, capture or flight recorder for a fan-out (HMAC-signed, not for clients)",
  tag: "cluster",
});

function nodeIdParam(c: Context<ApiEnv>): string {
  const id = c.req.param("node_id") ?? "";
  if (!NODE_ID.test(id)) throw badRequest("node_id must be a node id (1-128 letters and digits)", "node_id");
  return id;
}

/** A capture's body: optional (an empty body takes every default). */
async function captureRequest(c: Context<ApiEnv>) {
  const raw = await c.req.text();
  let json: unknown = {};
  if (raw.trim() !== "") {
    try {
      json = parseJsonBody(raw);
    } catch (e) {
      throw badRequest(e instanceof JsonBodyError ? e.message : `request body is not valid JSON`);
    }
  }
  const parsed = CaptureRequestSchema.safeParse(json);
  if (!parsed.success) {
    const { message, param } = describeZodError(parsed.error);
    throw new ApiError(400, `invalid request: ${message}`, { param, type: "invalid_request_error" });
  }
  return parsed.data;
}

function intParam(c: Context<ApiEnv>, name: string, dflt: number, max: number): number {
  const v = c.req.query(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n < 1 || n > max) {
    throw badRequest(`${name} must be a whole number from 1 to ${max}`, name);
  }
  return n;
}

function sinceParam(c: Context<ApiEnv>): number | undefined {
  const v = c.req.query("since");
  if (v === undefined) return undefined;
  const ms = /^\d+$/.test(v) ? Number(v) : Date.parse(v);
  if (!Number.isFinite(ms)) {
    throw badRequest("since must be an ISO 8601 time or milliseconds since the epoch", "since");
  }
  return ms;
}

/** Domain errors of the diagnostics to statuses. */
function translated(e: unknown): never {
  if (e instanceof UnknownNode || e instanceof UnknownRunner || e instanceof NotOnNode) {
    throw notFound(e.message);
  }
  if (e instanceof NodeUnreachable) throw new ApiError(503, e.message, { type: "node_unreachable" });
  throw e;
}

export const diagnosticsRoutes = new Hono<ApiEnv>()
  .use("/cluster/peer/diagnostics", peerGateFor(["diagnostics"]))
  .post("/cluster/peer/diagnostics", async (c) => {
    const [cl, req] = await peerBody(c, PeerDiagRequestSchema);
    try {
      return await answer(c, cl, await localAnswer(c.var.node, req));
    } catch (e) {
      return translated(e);
    }
  })
  .get("/v1/diagnostics/node", async (c) => c.json(await nodeDiagnostics(c.var.node)))
  .post("/v1/diagnostics/node/capture", async (c) => {
    const req = await captureRequest(c);
    return c.json(await capture(c.var.node, req).catch(translated));
  })
  .get("/v1/diagnostics/cluster", async (c) => c.json(await clusterDiagnostics(c.var.node)))
  .get("/v1/diagnostics/cluster/timeline", async (c) => {
    const q = {
      sinceMs: sinceParam(c),
      perNode: intParam(c, "per_node", 500, MAX_PER_NODE),
      limit: intParam(c, "limit", 2000, MAX_LIMIT),
    };
    return c.json(await clusterTimeline(c.var.node, q));
  })
  .get("/v1/diagnostics/cluster/:node_id", async (c) => {
    const id = nodeIdParam(c);
    return c.json(await diagnosticsOf(c.var.node, id).catch(translated));
  })
  .post("/v1/diagnostics/cluster/:node_id/capture", async (c) => {
    const id = nodeIdParam(c);
    const request = await captureRequest(c);
    return c.json(await captureOf(c.var.node, id, { what: "capture", request }).catch(translated));
  });
