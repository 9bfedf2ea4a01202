/**
 * OpenAI Responses: `POST /v1/responses`, translated onto the engine's Chat Completions through the chat
 * route's routing and generation path; streamed as Responses events. Responses are kept (store, the default)
 * on the node whose engine generated them, so `previous_response_id` continues a conversation there.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { responseStoreOf } from "../../serving/response-store.ts";
import {
  fromChatReply,
  type InputItem,
  inputItems,
  outputAsInput,
  type OutputItem,
  ResponsesRequest,
  ResponsesStreamTranslator,
  toChatRequest,
} from "../../serving/responses.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, readJsonWithRaw } from "../errors.ts";
import { describe } from "../openapi.ts";
import { admit, chatGeneration, route } from "./openai.ts";

describe({
  method: "post",
  path: "/v1/responses",
  summary: "OpenAI Responses (SSE events when stream)",
  tag: "openai",
  body: ResponsesRequest,
});

function storeOf(c: Context<ApiEnv>) {
  const { config } = c.var.node;
  return responseStoreOf(c.var.node, {
    maxEntries: config.responsesStoreMax,
    maxBytes: config.responsesStoreBytes,
    ttlMs: config.responsesStoreTtl * 1000,
  });
}

export const responsesRoutes = new Hono<ApiEnv>()
  .post("/v1/responses", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, ResponsesRequest);
    // A follow-up goes where the model runs, as the first turn did: the driving node keeps the responses.
    const routed = await route(c, body.model, raw);
    if ("remote" in routed) return routed.remote;
    const { target } = routed.local;
    admit(body.max_output_tokens, target, ctx.worker?.runner(target.runnerId)?.contextTokens ?? null);
    const store = storeOf(c);
    let earlier: InputItem[] = [];
    if (body.previous_response_id) {
      const prev = store.get(body.previous_response_id);
      if (!prev) {
        throw new ApiError(404, `Previous response with id '${body.previous_response_id}' not found.`, {
          type: "invalid_request_error",
          param: "previous_response_id",
          code: "previous_response_not_found",
        });
      }
      earlier = prev.items as InputItem[];
    }
    const input = [...earlier, ...inputItems(body)];
    const id = `resp_${crypto.randomUUID().replaceAll("-", "")}`;
    const keep = (output: OutputItem[]) => {
      if (body.store !== false) store.put(id, { items: [...input, ...outputAsInput(output)] });
    };
    const createdAt = Math.floor(Date.now() / 1000);
    const out = await chatGeneration(
      c,
      routed.local,
      toChatRequest({ ...body, input }, ctx.config.maxOutputTokens),
      () => new ResponsesStreamTranslator(id, body, keep),
    );
    if (out instanceof Response) return out;
    const response = fromChatReply(out.reply, body, id, createdAt);
    keep(response.output);
    return c.json(response);
  });
