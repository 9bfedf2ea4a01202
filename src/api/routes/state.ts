/** The cluster as this node sees it: `/state` (upstream's wire shape) and `/events` (the indexed log). */
import { asc, gte } from "drizzle-orm";
import { Hono } from "hono";
import { events } from "../../store/schema.ts";
import type { ApiEnv } from "../env.ts";
import { badRequest } from "../errors.ts";
import { describe } from "../openapi.ts";
import { stateToWire } from "../wire/state.ts";

describe({
  method: "get",
  path: "/state",
  summary: "Cluster state with telemetry and node health",
  tag: "state",
});
describe({
  method: "get",
  path: "/events",
  summary: "The indexed control-plane log, oldest first",
  tag: "state",
  query: { since: "first index to return (default 0)", limit: "at most this many (default 1000, max 10000)" },
});

export const stateRoutes = new Hono<ApiEnv>()
  .get("/state", (c) => {
    const n = c.var.node;
    return c.json(stateToWire(n.log.state, n.telemetry.entries(), Date.now(), n.masterNodeId()));
  })
  .get("/events", async (c) => {
    const since = Number(c.req.query("since") ?? 0);
    const limit = Number(c.req.query("limit") ?? 1000);
    if (!Number.isInteger(since) || since < 0) {
      throw badRequest("since must be a non-negative integer", "since");
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > 10000) {
      throw badRequest("limit must be an integer from 1 to 10000", "limit");
    }
    const rows = await c.var.node.store.db.select().from(events).where(gte(events.idx, since)).orderBy(
      asc(events.idx),
    ).limit(limit);
    return c.json(
      rows.map((r) => ({
        idx: r.idx,
        session: r.session,
        createdAt: r.createdAt,
        event: JSON.parse(r.payload),
      })),
    );
  });
