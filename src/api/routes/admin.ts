/**
 * Operator actions: `POST /admin/restart[?node_id=]` restarts this node's daemon, or asks the named node
 * to restart over the signed peer channel (the operator panel's one-tap restart).
 */
import { Hono } from "hono";
import { z } from "zod";
import type { ApiEnv } from "../env.ts";
import { ApiError, conflict, notFound, unavailable } from "../errors.ts";
import { describe } from "../openapi.ts";

const Restart = z.object({ status: z.enum(["restarting", "restart_sent"]), node_id: z.string() });
describe({
  method: "post",
  path: "/admin/restart",
  summary: "Restart this node's daemon, or another node's with ?node_id=",
  tag: "admin",
  query: { node_id: "the node to restart (default: this node)" },
  response: Restart,
});

export const adminRoutes = new Hono<ApiEnv>()
  .post("/admin/restart", async (c) => {
    const n = c.var.node;
    const target = c.req.query("node_id") || n.nodeId;
    if (target === n.nodeId) {
      if (!n.restart) {
        throw new ApiError(501, "this node was not started by 'skulk run' and cannot restart itself");
      }
      if (!n.restart()) throw conflict(`a restart of node ${n.nodeId} is already pending`);
      return c.json({ status: "restarting" as const, node_id: n.nodeId });
    }
    const cluster = n.cluster;
    if (!cluster) throw notFound(`node ${target} is unknown: this node runs no cluster plane`);
    const known = cluster.view().peers.find((p) => p.nodeId === target);
    if (!known) throw notFound(`node ${target} is not in this cluster; GET /state lists the nodes`);
    try {
      await cluster.call(target, "restart", {});
    } catch (e) {
      throw unavailable(`node ${target} did not take the restart: ${(e as Error).message}`);
    }
    return c.json({ status: "restart_sent" as const, node_id: target });
  });
