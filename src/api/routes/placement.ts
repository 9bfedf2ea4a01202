/**
 * Placement: dry runs (`GET /instance/previews`, every combination; `GET /instance/placement`, the one
 * instance the planner would create) over live state, and `POST /place_instance` through src/app.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import { InstanceSchema } from "../../cluster/instances.ts";
import { PlaceRequestSchema } from "../../app/commands.ts";
import { placementCard, placeModel } from "../../app/instances.ts";
import { nodePorts, viewOf } from "../../app/ports.ts";
import { InstanceMetaSchema, plan, ShardingSchema } from "../../placement/planner.ts";
import { placementPreviews, PlacementPreviewSchema } from "../../placement/previews.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, describeZodError, readJson, unavailable } from "../errors.ts";
import { describe } from "../openapi.ts";

describe({
  method: "get",
  path: "/instance/previews",
  summary:
    "Every placement combination for a model: what would launch, memory per node, context limit, or why not",
  tag: "instances",
  query: {
    model_id: "the model to preview (required)",
    excluded_node_ids: "node ids to leave out (repeatable or comma-separated)",
    node_ids: "node ids every placement must use (repeatable or comma-separated)",
  },
  response: z.object({ previews: z.array(PlacementPreviewSchema) }),
});
describe({
  method: "get",
  path: "/instance/placement",
  summary: "The instance the planner would create for a model (400 with the reason when it cannot be placed)",
  tag: "instances",
  query: {
    model_id: "the model to place (required)",
    sharding: "Pipeline (default) or Tensor",
    instance_meta: "MlxRing (default), MlxJaccl or LlamaRpc",
    min_nodes: "the fewest nodes to use (default 1)",
  },
  response: InstanceSchema,
});

describe({
  method: "post",
  path: "/place_instance",
  summary: "Place a model where the planner decides (400 with the reason when it cannot be placed)",
  tag: "instances",
  body: PlaceRequestSchema,
});

/** Query lists arrive repeated (`?a=1&a=2`) or comma-separated (`?a=1,2`); accept both. */
function list(c: Context<ApiEnv>, name: string): string[] {
  return (c.req.queries(name) ?? []).flatMap((v) => v.split(",")).map((s) => s.trim()).filter(Boolean);
}

const PlacementQuery = z.object({
  sharding: ShardingSchema.default("Pipeline"),
  instance_meta: InstanceMetaSchema.default("MlxRing"),
  min_nodes: z.coerce.number().int().positive().default(1),
});

const ids = { newId: () => crypto.randomUUID() };

export const placementRoutes = new Hono<ApiEnv>();

placementRoutes.get("/instance/previews", async (c) => {
  const p = nodePorts(c.var.node);
  const card = await placementCard(p, c.req.query("model_id"));
  const previews = placementPreviews(viewOf(p), card, {
    excludedNodeIds: list(c, "excluded_node_ids"),
    nodeIds: list(c, "node_ids"),
  }, ids);
  return c.json({ previews });
});

placementRoutes.get("/instance/placement", async (c) => {
  const p = nodePorts(c.var.node);
  const card = await placementCard(p, c.req.query("model_id"));
  const q = PlacementQuery.safeParse({
    sharding: c.req.query("sharding") || undefined,
    instance_meta: c.req.query("instance_meta") || undefined,
    min_nodes: c.req.query("min_nodes") || undefined,
  });
  if (!q.success) {
    const { message, param } = describeZodError(q.error);
    throw new ApiError(400, `invalid query: ${message}`, { param, type: "invalid_request_error" });
  }
  const r = plan(viewOf(p), card, {
    model_id: card.model_id,
    ...q.data,
    excluded_nodes: list(c, "excluded_nodes"),
    required_nodes: [],
  }, ids);
  if (!r.ok) throw r.pending ? unavailable(r.error) : badRequest(r.error, "model_id");
  return c.json(r.placement.instance);
});

placementRoutes.post("/place_instance", async (c) => {
  const body = await readJson(c, PlaceRequestSchema);
  return c.json(await placeModel(nodePorts(c.var.node), body));
});
