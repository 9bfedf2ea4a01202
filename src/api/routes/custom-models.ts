/**
 * Custom model cards: `POST /models/add` registers a local GGUF (card facts read from its header) and
 * `DELETE /models/custom/{model_id}` removes a custom card, each through a control-plane event.
 */
import { Hono } from "hono";
import { z } from "zod";
import { makeEvent } from "../../cluster/events.ts";
import { cardToWire } from "../../models/card.ts";
import { modelListEntry } from "../../models/catalog.ts";
import { localCard, LocalModelError } from "../../models/local.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, conflict, notFound, readJson } from "../errors.ts";
import { describe } from "../openapi.ts";
import { checkModelId, ModelIdSchema } from "../../security/ids.ts";

export const AddModelBody = z.object({
  model_id: ModelIdSchema.optional(),
  /** Not upstream: an absolute path of a GGUF file on this node. */
  gguf_path: z.string().min(1).optional(),
}).strict();

export const DeletedBody = z.object({ message: z.string(), model_id: z.string() });

describe({
  method: "post",
  path: "/models/add",
  summary: "Add a custom model card (a local GGUF with gguf_path)",
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

export const customModelRoutes = new Hono<ApiEnv>();

customModelRoutes.post("/models/add", async (c) => {
  const body = await readJson(c, AddModelBody);
  const n = c.var.node;
  if (!body.gguf_path) {
    if (!body.model_id) {
      throw badRequest("send model_id (a hub id) or gguf_path (a local GGUF file)", "model_id");
    }
    // No hub client in this build: say so rather than pretend to look.
    throw badRequest(
      `cannot add '${body.model_id}': fetching cards from the model hub is unavailable on this node (offline); ` +
        `register a local file instead with {"model_id", "gguf_path"}`,
      "model_id",
    );
  }
  const card = await localCard(body.gguf_path, body.model_id).catch((e) => {
    throw e instanceof LocalModelError ? badRequest(e.message, "gguf_path") : e;
  });
  const existing = n.catalog.get(card.model_id);
  if (existing && !existing.is_custom) {
    throw conflict(`'${card.model_id}' is a bundled card; choose another model_id`);
  }
  await n.submit(makeEvent("CustomModelCardAdded", { modelCard: cardToWire(card) }));
  const added = n.catalog.get(card.model_id);
  if (!added) {
    throw new ApiError(
      503,
      `the card for '${card.model_id}' was submitted but is not in this node's catalogue yet; retry GET /models`,
    );
  }
  return c.json(modelListEntry(added));
});

customModelRoutes.delete("/models/custom/:modelId{.+}", async (c) => {
  const modelId = checkModelId(c.req.param("modelId"));
  const n = c.var.node;
  const card = n.catalog.get(modelId);
  if (!card?.is_custom) {
    throw notFound(card ? `'${modelId}' is a bundled card, not a custom one` : `no custom card '${modelId}'`);
  }
  await n.submit(makeEvent("CustomModelCardDeleted", { modelId }));
  return c.json({ message: "Model card deleted", model_id: modelId });
});
