/**
 * Placement dry runs: `GET /instance/previews` (every combination, truthful rows) and
 * `GET /instance/placement` (the one instance the planner would create), over live state and telemetry.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { z } from "zod";
import { InstanceSchema } from "../../cluster/instances.ts";
import type { ModelCard } from "../../models/card.ts";
import {
  applyResolvedFacts,
  type HubDeps,
  hubEndpoint,
  loadResolvedFacts,
  recordResolvedFacts,
  resolveFromHub,
} from "../../models/facts.ts";
import type { NodeContext } from "../../node/context.ts";
import {
  InstanceMetaSchema,
  placeInstance,
  PlaceInstanceParamsSchema,
  plan,
  recordFor,
  ShardingSchema,
} from "../../placement/planner.ts";
import { placementPreviews, PlacementPreviewSchema } from "../../placement/previews.ts";
import { buildClusterView, type ClusterView } from "../../placement/view.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, describeZodError, readJson, unavailable } from "../errors.ts";
import { describe } from "../openapi.ts";
import { createInstance } from "./instances.ts";
import { checkModelId } from "../../security/ids.ts";

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

/** Upstream's `PlaceInstanceParams`: what a client sends to `POST /place_instance`. */
const PlaceBody = PlaceInstanceParamsSchema.pick({
  model_id: true,
  sharding: true,
  instance_meta: true,
  min_nodes: true,
  excluded_nodes: true,
});
describe({
  method: "post",
  path: "/place_instance",
  summary: "Place a model where the planner decides (400 with the reason when it cannot be placed)",
  tag: "instances",
  body: PlaceBody,
});

/** Upstream waits this long for telemetry still gossiping before answering 503. */
export const PLACEMENT_INFO_WAIT_MS = 15_000;

/** The planner's view of this node's cluster right now. */
export function currentView(node: NodeContext, now = Date.now()): ClusterView {
  return buildClusterView(node.log.state, node.telemetry.entries(), now, {
    nodeTimeoutMs: node.config.nodeTimeout * 1000,
  });
}

/**
 * The card placement plans with: the catalogue's card with its recorded facts applied; a size the card
 * leaves open is resolved from the hub (`HF_ENDPOINT`) on first contact and recorded for next time.
 */
export async function placementCard(
  node: NodeContext,
  modelId: string | undefined,
  hub: Partial<HubDeps> = {},
): Promise<ModelCard> {
  if (!modelId) throw badRequest("model_id is required", "model_id");
  const card = node.catalog.get(checkModelId(modelId));
  if (!card) {
    throw badRequest(
      `unknown model ${modelId}: add it with POST /models/add or pick one from GET /models`,
      "model_id",
    );
  }
  let facts = await loadResolvedFacts(node.store.db, modelId);
  if (!card.storage_size && !facts && card.gguf_file) {
    const deps: HubDeps = { endpoint: hubEndpoint(), fetch, timeoutMs: 10_000, ...hub };
    try {
      facts = await resolveFromHub(card, deps);
    } catch (e) {
      throw badRequest(
        `the size of ${modelId} is not known yet and could not be resolved from ${deps.endpoint}: ${
          (e as Error).message
        }`,
        "model_id",
      );
    }
    await recordResolvedFacts(node.store.db, modelId, facts, deps.endpoint);
  }
  return applyResolvedFacts(card, facts);
}

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
  const node = c.var.node;
  const card = await placementCard(node, c.req.query("model_id"));
  const previews = placementPreviews(currentView(node), card, {
    excludedNodeIds: list(c, "excluded_node_ids"),
    nodeIds: list(c, "node_ids"),
  }, ids);
  return c.json({ previews });
});

placementRoutes.get("/instance/placement", async (c) => {
  const node = c.var.node;
  const card = await placementCard(node, c.req.query("model_id"));
  const q = PlacementQuery.safeParse({
    sharding: c.req.query("sharding") || undefined,
    instance_meta: c.req.query("instance_meta") || undefined,
    min_nodes: c.req.query("min_nodes") || undefined,
  });
  if (!q.success) {
    const { message, param } = describeZodError(q.error);
    throw new ApiError(400, `invalid query: ${message}`, { param, type: "invalid_request_error" });
  }
  const r = plan(currentView(node), card, {
    model_id: card.model_id,
    ...q.data,
    excluded_nodes: list(c, "excluded_nodes"),
    required_nodes: [],
  }, ids);
  if (!r.ok) throw r.pending ? unavailable(r.error) : badRequest(r.error, "model_id");
  return c.json(r.placement.instance);
});

placementRoutes.post("/place_instance", async (c) => {
  const node = c.var.node;
  const body = await readJson(c, PlaceBody);
  const card = await placementCard(node, body.model_id);
  const deadline = Date.now() + PLACEMENT_INFO_WAIT_MS;
  for (;;) {
    const request = { ...body, required_nodes: [] };
    const r = placeInstance(currentView(node), card, request);
    if ("instance" in r) return c.json(await createInstance(node, r.instance, recordFor(request)));
    if (!r.pending) throw badRequest(r.error, "model_id");
    if (Date.now() >= deadline) throw unavailable(`${r.error} (waited ${PLACEMENT_INFO_WAIT_MS / 1000}s)`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
});
