/** Identity and health of the node that answers: `/node_id`, `/node/identity`, `/healthz`. */
import { Hono } from "hono";
import { z } from "zod";
import { firstIpv4 } from "../../telemetry/network.ts";
import { VERSION } from "../../version.ts";
import type { ApiEnv } from "../env.ts";
import { describe } from "../openapi.ts";

const Identity = z.object({ nodeId: z.string(), hostname: z.string(), ipAddress: z.string() });
const Health = z.object({
  status: z.enum(["ok", "degraded"]),
  nodeId: z.string(),
  version: z.string(),
  uptimeSeconds: z.number(),
  /** Why it is degraded (empty when ok). */
  reasons: z.array(z.object({ code: z.string(), message: z.string() })),
});

describe({
  method: "get",
  path: "/node_id",
  summary: "This node's id, as a JSON string",
  tag: "node",
  response: z.string(),
});
describe({
  method: "get",
  path: "/node/identity",
  summary: "This node's id, hostname and first routable IPv4",
  tag: "node",
  response: Identity,
});
describe({
  method: "get",
  path: "/healthz",
  summary:
    "Health: 200 `ok`, or 503 `degraded` with reasons (database unwritable, no or unreachable master, behind the master's log, catching up after start)",
  tag: "node",
  response: Health,
});

export const nodeRoutes = new Hono<ApiEnv>()
  .get("/node_id", (c) => c.json(c.var.node.nodeId))
  .get("/node/identity", (c) => {
    const hostname = Deno.hostname();
    return c.json({ nodeId: c.var.node.nodeId, hostname, ipAddress: firstIpv4() ?? hostname });
  })
  .get("/healthz", (c) => {
    const node = c.var.node;
    const reasons = [
      ...(node.log.writeError ? [{ code: "database_unwritable", message: node.log.writeError.message }] : []),
      ...(node.cluster?.health() ?? []),
    ];
    // 503 when degraded: a load balancer's default check then takes the node out of rotation.
    return c.json({
      status: reasons.length ? "degraded" as const : "ok" as const,
      nodeId: node.nodeId,
      version: VERSION,
      uptimeSeconds: Math.round((Date.now() - node.startedAt) / 1000),
      reasons,
    }, reasons.length ? 503 : 200);
  });
