/**
 * Models from outside the catalogue: `GET /models/search` (the hub's listing), `POST /models/add` (a hub repo by
 * id, or a local GGUF with gguf_path) and `DELETE /models/custom/{model_id}`; adds and deletes go to the master.
 */
import { Hono } from "hono";
import { z } from "zod";
import { addHubModel, addModel, deleteModel } from "../../app/models.ts";
import { nodePorts } from "../../app/ports.ts";
import { hubCard } from "../../models/hub-card.ts";
import { HubClient, HubError, HubModelSchema, hubOptions } from "../../models/hub.ts";
import type { NodeContext } from "../../node/context.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, readJson } from "../errors.ts";
import { describe } from "../openapi.ts";
import { checkModelId, ModelIdSchema } from "../../security/ids.ts";

/** A quantisation name as GGUF file names spell it (Q4_K_M, IQ4_XS, BF16, ...). */
const QuantSchema = z.string().regex(/^[A-Za-z0-9_]{1,32}$/, "must be a quantisation name like Q4_K_M");

export const AddModelBody = z.object({
  model_id: ModelIdSchema.optional(),
  /** Not upstream: the quantisation to take from a GGUF repo (default: QUANT_PREFERENCE in hub-card.ts). */
  quant: QuantSchema.optional(),
  /** Not upstream: an absolute path of a GGUF file on this node. */
  gguf_path: z.string().min(1).optional(),
  /** Not upstream: a draft model beside gguf_path, for speculative decoding (draft-simple). */
  draft_path: z.string().min(1).optional(),
}).strict();

export const DeletedBody = z.object({ message: z.string(), model_id: z.string() });

/** The search's bounds: the hub answers at most 100 per page here, and a query is a few words. */
export const SEARCH_LIMITS = { maxLimit: 100, defaultLimit: 20, maxQuery: 200 } as const;

const SearchQuery = z.object({
  query: z.string().max(SEARCH_LIMITS.maxQuery, `query has at most ${SEARCH_LIMITS.maxQuery} characters`)
    .default(""),
  limit: z.string().default(String(SEARCH_LIMITS.defaultLimit)).transform(Number).pipe(
    z.number().int().min(1).max(SEARCH_LIMITS.maxLimit),
  ),
  mlx_only: z.enum(["true", "false"]).default("false").transform((v) => v === "true"),
});

describe({
  method: "get",
  path: "/models/search",
  summary: "Search the model hub (HF_ENDPOINT), most downloaded first",
  tag: "models",
  query: {
    query: "words to search for in repo ids",
    limit: `results, 1-${SEARCH_LIMITS.maxLimit} (default ${SEARCH_LIMITS.defaultLimit})`,
    mlx_only: "'true' for mlx-community repos only",
  },
  response: z.array(HubModelSchema),
});
describe({
  method: "post",
  path: "/models/add",
  summary: "Add a custom model card: a hub repo by model_id (GGUF or MLX), or a local GGUF with gguf_path",
  tag: "models",
  body: AddModelBody,
});
describe({
  method: "delete",
  path: "/models/custom/:model_id",
  summary: "Delete a custom model card",
  tag: "models",
  response: DeletedBody,
});

/** The hub this node talks to, or a 503 when it must not (offline mode). */
function hubOf(node: NodeContext): HubClient {
  const options = hubOptions(node.config);
  if (node.config.offline) {
    throw new ApiError(
      503,
      `this node is in offline mode (SKULK_OFFLINE), so it does not contact the model hub at ${options.endpoint}`,
      { type: "service_unavailable", code: "hub_offline" },
    );
  }
  return new HubClient(options);
}

/**
 * A hub failure as the client should see it: the repo or hub named, with the hub's own verdict. A 404 or 401/403
 * is about the asked repo only for an add; for a search it means the hub itself is misconfigured (502).
 */
function hubFailure(e: unknown, endpoint: string, repoAsked: boolean): unknown {
  if (!(e instanceof HubError)) return e;
  if (repoAsked && e.status === 404) return new ApiError(404, e.message, { param: "model_id" });
  if (repoAsked && (e.status === 401 || e.status === 403)) {
    return new ApiError(403, e.message, { param: "model_id" });
  }
  if (e.status === null && e.retryable) {
    return new ApiError(503, `the model hub at ${endpoint} is unreachable: ${e.message}`, {
      type: "service_unavailable",
      code: "hub_unreachable",
    });
  }
  return new ApiError(502, `the model hub at ${endpoint} gave an answer this node cannot use: ${e.message}`);
}

export const customModelRoutes = new Hono<ApiEnv>();

customModelRoutes.get("/models/search", async (c) => {
  const q = SearchQuery.safeParse(c.req.query());
  if (!q.success) {
    const issue = q.error.issues[0];
    throw badRequest(`${issue.path.join(".")}: ${issue.message}`, String(issue.path[0] ?? "query"));
  }
  const hub = hubOf(c.var.node);
  try {
    return c.json(await hub.search({ query: q.data.query, limit: q.data.limit, mlxOnly: q.data.mlx_only }));
  } catch (e) {
    throw hubFailure(e, hub.options.endpoint, false);
  }
});

customModelRoutes.post("/models/add", async (c) => {
  const body = await readJson(c, AddModelBody);
  if (body.draft_path && !body.gguf_path) throw badRequest("draft_path needs gguf_path", "draft_path");
  if (body.gguf_path) {
    return c.json(await addModel(nodePorts(c.var.node), body.gguf_path, body.model_id, body.draft_path));
  }
  if (!body.model_id) {
    throw badRequest("send model_id (a hub id) or gguf_path (a local GGUF file)", "model_id");
  }
  const hub = hubOf(c.var.node);
  try {
    return c.json(
      await addHubModel(
        nodePorts(c.var.node),
        (id, quant) => hubCard(hub, id, quant),
        body.model_id,
        body.quant,
      ),
    );
  } catch (e) {
    throw hubFailure(e, hub.options.endpoint, true);
  }
});

customModelRoutes.delete("/models/custom/:modelId{.+}", async (c) => {
  const modelId = checkModelId(c.req.param("modelId"));
  return c.json(await deleteModel(nodePorts(c.var.node), modelId));
});
