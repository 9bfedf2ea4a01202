/**
 * OpenAI Responses: `POST /v1/responses`, translated onto the engine's Chat Completions through the chat
 * route's routing and generation path; streamed as Responses events. Nothing is stored between requests.
 */
import { Hono } from "hono";
import {
  fromChatReply,
  ResponsesRequest,
  ResponsesStreamTranslator,
  toChatRequest,
} from "../../serving/responses.ts";
import type { ApiEnv } from "../env.ts";
import { admittedTokens, extendChat } from "../extensions.ts";
import { badRequest, readJsonWithRaw } from "../errors.ts";
import { describe } from "../openapi.ts";
import { admit, chatGeneration, route } from "./openai.ts";

describe({
  method: "post",
  path: "/v1/responses",
  summary: "OpenAI Responses (SSE events when stream)",
  tag: "openai",
  body: ResponsesRequest,
});

export const responsesRoutes = new Hono<ApiEnv>()
  .post("/v1/responses", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, ResponsesRequest);
    if (body.previous_response_id) {
      throw badRequest(
        "previous_response_id is not supported: this server keeps no responses; send the whole conversation as input",
        "previous_response_id",
      );
    }
    const req = toChatRequest(body, ctx.config.maxOutputTokens);
    const ext = await extendChat(c, "responses", raw, req);
    const routed = await route(c, String(ext.req.model), ext.raw);
    if ("remote" in routed) return routed.remote;
    const { target } = routed.local;
    admit(
      admittedTokens(req, ext.req, body.max_output_tokens),
      target,
      ctx.worker?.runner(target.runnerId)?.contextTokens ?? null,
    );
    const id = `resp_${crypto.randomUUID().replaceAll("-", "")}`;
    const createdAt = Math.floor(Date.now() / 1000);
    const out = await chatGeneration(
      c,
      routed.local,
      ext.req,
      () => new ResponsesStreamTranslator(id, body),
    );
    if (out instanceof Response) return out;
    return c.json(fromChatReply(out.reply, body, id, createdAt));
  });
