/**
 * Custom model cards: `POST /models/add` registers a local GGUF (card facts read from its header) and
 * `DELETE /models/custom/{model_id}` removes a custom card, each a command the master decides (src/app).
 */
import { Hono } from "hono";
import { z } from "zod";
import { addModel, deleteModel } from "../../app/models.ts";
import { nodePorts } from "../../app/ports.ts";
import type { ApiEnv } from "../env.ts";
import { badRequest, readJson } from "../errors.ts";
import { describe } from "../openapi.ts";
import { checkModelId, ModelIdSchema } from "../../security/ids.ts";

export const AddModelBody = z.object({
  model_id: ModelIdSchema.optional(),
  /** Not upstream: an absolute path of a GGUF file on this node. */
  gguf_path: z.string().min(1).optional(),
  /** Not upstream: a draft model beside gguf_path, for speculative decoding (draft-simple). */
  draft_path: z.string().min(1).optional(),
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
  if (body.draft_path && !body.gguf_path) throw badRequest("draft_path needs gguf_path", "draft_path");
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
  return c.json(await addModel(nodePorts(c.var.node), body.gguf_path, body.model_id, body.draft_path));
});

customModelRoutes.delete("/models/custom/:modelId{.+}", async (c) => {
  const modelId = checkModelId(c.req.param("modelId"));
  return c.json(await deleteModel(nodePorts(c.var.node), modelId));
});
