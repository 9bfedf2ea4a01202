/**
 * `GET /metrics`: this node's Prometheus exposition (text format 0.0.4), behind the API key like every
 * other route when one is set (Prometheus sends it as `authorization: Bearer`).
 */
import { Hono } from "hono";
import { metricsOf } from "../../metrics/node.ts";
import type { ApiEnv } from "../env.ts";
import { describe } from "../openapi.ts";

describe({
  method: "get",
  path: "/metrics",
  summary: "Prometheus metrics of this node (text exposition format; see docs/observability.md)",
  tag: "node",
});

export const metricsRoutes = new Hono<ApiEnv>().get("/metrics", async (c) => {
  const { text, contentType } = await metricsOf(c.var.node).expose();
  return c.body(text, 200, { "content-type": contentType, "cache-control": "no-store" });
});
