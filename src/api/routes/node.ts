/** Identity and liveness of the node that answers: `/node_id`, `/node/identity`, `/healthz`. */
import { Hono } from "hono";
import { z } from "zod";
import { VERSION } from "../../version.ts";
import type { ApiEnv } from "../env.ts";
import { describe } from "../openapi.ts";

const Identity = z.object({ nodeId: z.string(), hostname: z.string(), ipAddress: z.string() });
const Health = z.object({
  status: z.literal("ok"),
  nodeId: z.string(),
  version: z.string(),
  uptimeSeconds: z.number(),
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
  summary: "Liveness: 200 while the node serves",
  tag: "node",
  response: Health,
});

export function firstIpv4(): string | null {
  return Deno.networkInterfaces().find((i) =>
    i.family === "IPv4" && !i.address.startsWith("127.") && !i.address.startsWith("169.254.")
  )?.address ?? null;
}

export const nodeRoutes = new Hono<ApiEnv>()
  .get("/node_id", (c) => c.json(c.var.node.nodeId))
  .get("/node/identity", (c) => {
    const hostname = Deno.hostname();
    return c.json({ nodeId: c.var.node.nodeId, hostname, ipAddress: firstIpv4() ?? hostname });
  })
  .get("/healthz", (c) =>
    c.json({
      status: "ok" as const,
      nodeId: c.var.node.nodeId,
      version: VERSION,
      uptimeSeconds: Math.round((Date.now() - c.var.node.startedAt) / 1000),
    }));
