/**
 * Anthropic Messages: `POST /v1/messages` and `/v1/messages/count_tokens`, translated onto the engine's Chat
 * Completions through the chat route's routing and streaming path, with Anthropic's error shape on every failure.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import {
  anthropicError,
  AnthropicStreamTranslator,
  CountTokensRequest,
  fromChatReply,
  MessagesRequest,
  toChatPrompt,
  toChatRequest,
} from "../../serving/anthropic.ts";
import { logger } from "../../log/mod.ts";
import type { ApiEnv } from "../env.ts";
import { admittedTokens, extendChat } from "../extensions.ts";
import { ApiError, readJsonWithRaw, toApiError } from "../errors.ts";
import { describe } from "../openapi.ts";
import { admit, callEngine, chatGeneration, engineError, engineFailure, route } from "./openai.ts";

describe({
  method: "post",
  path: "/v1/messages",
  summary: "Anthropic Messages (SSE events when stream)",
  tag: "anthropic",
  body: MessagesRequest,
});
describe({
  method: "post",
  path: "/v1/messages/count_tokens",
  summary: "Anthropic token count of a Messages prompt",
  tag: "anthropic",
  body: CountTokensRequest,
});

const log = logger("anthropic");
const messageId = () => `msg_${crypto.randomUUID().replaceAll("-", "")}`;

function anthropicResponse(c: Context<ApiEnv>, status: ContentfulStatusCode, message: string): Response {
  return c.json(anthropicError(status, message), status);
}

export const anthropicRoutes = new Hono<ApiEnv>()
  .post("/v1/messages", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, MessagesRequest);
    const req = toChatRequest(body);
    const ext = await extendChat(c, "messages", raw, req);
    const routed = await route(c, String(ext.req.model), ext.raw);
    if ("remote" in routed) return routed.remote;
    const { target } = routed.local;
    admit(
      admittedTokens(req, ext.req, body.max_tokens),
      target,
      ctx.worker?.runner(target.runnerId)?.contextTokens ?? null,
    );
    const id = messageId();
    const out = await chatGeneration(
      c,
      routed.local,
      ext.req,
      () => new AnthropicStreamTranslator(id, body.model),
    );
    if (out instanceof Response) return out;
    return c.json(fromChatReply(out.reply, id, body.model));
  })
  .post("/v1/messages/count_tokens", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, CountTokensRequest);
    const routed = await route(c, body.model, raw);
    if ("remote" in routed) return routed.remote;
    const { baseUrl, target } = routed.local;
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort());
    // The engine renders the prompt with the model's own template (tools included), then tokenizes it.
    const prompt = toChatPrompt(body);
    let rendered: Response;
    try {
      rendered = await callEngine(baseUrl, "/apply-template", prompt, abort);
    } catch (e) {
      throw new ApiError(503, engineFailure(ctx, target, e));
    }
    if (!rendered.ok) throw await engineError(rendered);
    const { prompt: text } = await rendered.json() as { prompt: string };
    const tokenized = await callEngine(baseUrl, "/tokenize", { content: text, add_special: true }, abort)
      .catch((e) => {
        throw new ApiError(503, engineFailure(ctx, target, e));
      });
    if (!tokenized.ok) throw await engineError(tokenized);
    const { tokens } = await tokenized.json() as { tokens: unknown[] };
    return c.json({ input_tokens: tokens.length });
  })
  .onError((err, c) => {
    const known = toApiError(err);
    if (known) {
      // A full stream cap or a lost quorum says when to retry; Anthropic's SDKs honour the header.
      if (known.opts.retryAfter !== undefined) c.header("Retry-After", String(known.opts.retryAfter));
      return anthropicResponse(c, known.status, known.message);
    }
    log.error("unhandled error on {path} (request {requestId}): {error}", {
      path: c.req.path,
      requestId: c.var.requestId,
      error: (err as Error).stack ?? String(err),
    });
    return anthropicResponse(c, 500, `internal error (request id ${c.var.requestId}); see the node's log`);
  });
