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
import { admittedTokens, extendChat } from "../extensions.ts";
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

/**
 * `req` (a chat request made from the new input alone) with the earlier turns' messages put back after its
 * leading system and developer messages, where the instructions and any an extension added stand.
 */
function withHistory(
  req: Record<string, unknown>,
  body: ResponsesRequest,
  earlier: InputItem[],
): Record<string, unknown> {
  const history = toChatRequest({ ...body, instructions: null, input: earlier }, 0).messages as unknown[];
  const messages = (req.messages ?? []) as { role?: unknown }[];
  const lead = messages.findIndex((m) => m.role !== "system" && m.role !== "developer");
  const at = lead === -1 ? messages.length : lead;
  return { ...req, messages: [...messages.slice(0, at), ...history, ...messages.slice(at)] };
}

export const responsesRoutes = new Hono<ApiEnv>()
  .post("/v1/responses", async (c) => {
    const ctx = c.var.node;
    const { raw: given, body } = await readJsonWithRaw(c, ResponsesRequest);
    const store = storeOf(c);
    // A response is kept on the node whose engine answered it. One kept here goes out with the request as
    // plain input, so whichever instance serves the follow-up (replicas, another node) has the conversation;
    // one kept elsewhere is looked up by the node the request is routed to, usually the one that answered it.
    const prev = body.previous_response_id ? store.get(body.previous_response_id) : undefined;
    const earlier = (prev?.items ?? []) as InputItem[];
    const input = [...earlier, ...inputItems(body)];
    const raw = prev ? JSON.stringify({ ...JSON.parse(given), input, previous_response_id: null }) : given;
    const req = toChatRequest({ ...body, input }, ctx.config.maxOutputTokens);
    const ext = await extendChat(c, "responses", raw, req);
    const routed = await route(c, String(ext.req.model), ext.raw);
    if ("remote" in routed) return routed.remote;
    if (body.previous_response_id && !prev) {
      throw new ApiError(404, `Previous response with id '${body.previous_response_id}' not found.`, {
        type: "invalid_request_error",
        param: "previous_response_id",
        code: "previous_response_not_found",
      });
    }
    // A peer that did not keep the earlier turns sent its extensions' request without them: put them back.
    const chatReq = prev && ext.req !== req ? withHistory(ext.req, body, earlier) : ext.req;
    const { target } = routed.local;
    admit(
      admittedTokens(req, ext.req, body.max_output_tokens),
      target,
      ctx.worker?.runner(target.runnerId)?.contextTokens ?? null,
    );
    const id = `resp_${crypto.randomUUID().replaceAll("-", "")}`;
    const keep = (output: OutputItem[]) => {
      if (body.store !== false) store.put(id, { items: [...input, ...outputAsInput(output)] });
    };
    const createdAt = Math.floor(Date.now() / 1000);
    const out = await chatGeneration(
      c,
      routed.local,
      chatReq,
      () => new ResponsesStreamTranslator(id, body, keep),
    );
    if (out instanceof Response) return out;
    const response = fromChatReply(out.reply, body, id, createdAt);
    keep(response.output);
    return c.json(response);
  });
