/**
 * The OpenAI-compatible surface: `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, and
 * `/v1/cancel/{command_id}`. Each request is checked, routed to the engine of a ready instance (on this
 * node, or streamed through the node that drives it), and answered in upstream Skulk's framing.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import { logger } from "../../log/mod.ts";
import type { NodeContext } from "../../node/context.ts";
import { ChatStreamTranslator, SseLineReader } from "../../serving/chat-stream.ts";
import { ChatTool, ChatToolChoice, forcedReply, forceToolCall } from "../../serving/forced-tools.ts";
import { forwardRequest } from "../../serving/forward.ts";
import { resolveTarget, type Target } from "../../serving/target.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, notFound, readJsonWithRaw } from "../errors.ts";
import { describe } from "../openapi.ts";
import { slotsOf } from "../slots.ts";

const log = logger("openai");
export const DEFAULT_MAX_TOKENS = Number(
  Deno.env.get("SKULK_MAX_OUTPUT_TOKENS") ?? Deno.env.get("SKULK_MAX_TOKENS") ?? 4096,
);

const Message = z.looseObject({
  role: z.enum(["system", "user", "assistant", "developer", "tool", "function"]),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() })), z.null()]).optional(),
});
const positiveTokens = z.number().int().positive("must be a positive integer");

export const ChatRequest = z.looseObject({
  model: z.string().min(1, "must name a model"),
  messages: z.array(Message).min(1, "must not be empty"),
  stream: z.boolean().optional(),
  max_tokens: positiveTokens.nullish(),
  max_completion_tokens: positiveTokens.nullish(),
  enable_thinking: z.boolean().optional(),
  tools: z.array(ChatTool).optional(),
  tool_choice: ChatToolChoice.optional(),
});
export const CompletionRequest = z.looseObject({
  model: z.string().min(1, "must name a model"),
  prompt: z.union([z.string(), z.array(z.string())]),
  stream: z.boolean().optional(),
  max_tokens: positiveTokens.nullish(),
});
export const EmbeddingRequest = z.looseObject({
  model: z.string().min(1, "must name a model"),
  input: z.union([
    z.string().min(1),
    z.array(z.string()).min(1),
    z.array(z.number()),
    z.array(z.array(z.number())),
  ]),
  dimensions: z.number().int().positive().optional(),
});

describe({
  method: "post",
  path: "/v1/chat/completions",
  summary: "OpenAI chat completions (SSE when stream)",
  tag: "openai",
  body: ChatRequest,
});
describe({
  method: "post",
  path: "/v1/completions",
  summary: "OpenAI legacy completions (SSE when stream)",
  tag: "openai",
  body: CompletionRequest,
});
describe({
  method: "post",
  path: "/v1/embeddings",
  summary: "OpenAI embeddings, for embedding models",
  tag: "openai",
  body: EmbeddingRequest,
});
describe({
  method: "post",
  path: "/v1/cancel/:command_id",
  summary: "Cancel an in-flight generation",
  tag: "openai",
});

/** In-flight generations on this node, by command id, for /v1/cancel. */
const inflight = new Map<string, AbortController>();

type Routed = { local: { baseUrl: string; target: Target } } | { remote: Response };

/** Finds the engine for a model: a local runner's URL, or the driving node's streamed answer. */
export async function route(c: Context<ApiEnv>, model: string, raw: string): Promise<Routed> {
  const ctx = c.var.node;
  const r = resolveTarget(ctx.log.state, model, ctx.nodeId);
  if (!r.ok) {
    throw new ApiError(
      r.status,
      r.message,
      r.status === 404 ? { type: "invalid_request_error", param: "model", code: "model_not_found" } : {},
    );
  }
  if (r.target.driverNode !== ctx.nodeId) {
    const res = await forwardRequest(ctx, r.target.driverNode, c.req.raw, raw);
    if ("error" in res) throw new ApiError(503, res.error);
    return { remote: res };
  }
  const runner = ctx.worker?.runner(r.target.runnerId);
  if (!runner || !runner.baseUrl) {
    const why = runner?.failure ??
      (runner ? `runner is ${runner.phase}` : "its runner is not running on this node yet");
    throw new ApiError(503, `model ${model} cannot serve now: ${why}`);
  }
  return { local: { baseUrl: runner.baseUrl, target: r.target } };
}

export function engineFailure(ctx: NodeContext, target: Target, err: unknown): string {
  const runner = ctx.worker?.runner(target.runnerId);
  return `the engine serving this model failed during the request: ${
    runner?.failure ?? (err as Error).message
  }`;
}

/** Maps an engine's error answer to ours; llama-server's context overflow becomes context_length_exceeded. */
export async function engineError(res: Response): Promise<ApiError> {
  const text = await res.text();
  let message = text;
  try {
    const j = JSON.parse(text) as { error?: { message?: string; type?: string } };
    message = j.error?.message ?? text;
    if (
      j.error?.type === "exceed_context_size_error" || /context size|context length|exceeds/i.test(message)
    ) {
      return new ApiError(400, `context_length_exceeded: ${message}`, { type: "invalid_request_error" });
    }
  } catch { /* not JSON */ }
  const status = res.status >= 400 && res.status < 500 ? 400 : 502;
  return new ApiError(status, `the engine refused the request: ${message}`, {
    type: status === 400 ? "invalid_request_error" : undefined,
  });
}

export function admit(
  maxTokens: number | null | undefined,
  target: Target,
  contextTokens: number | null,
): void {
  const limit = target.contextTokenLimit ?? contextTokens;
  if (maxTokens && limit && maxTokens >= limit) {
    throw new ApiError(
      400,
      `context_length_exceeded: max_tokens (${maxTokens}) cannot fit the context window of ${limit} tokens; ask for fewer`,
      {
        type: "invalid_request_error",
        param: "max_tokens",
      },
    );
  }
}

export function streamResponse(
  c: Context<ApiEnv>,
  upstream: Response,
  abort: AbortController,
  commandId: string,
  frame: {
    head: () => string;
    push: (p: string) => string;
    end: () => string;
    fail: (m: string) => string;
    done: () => boolean;
  },
  onError: (e: unknown) => string,
  /** Frees the node's stream slot: called once the stream ends, fails or its client goes. */
  release: () => void,
): Response {
  const enc = new TextEncoder();
  const reader = upstream.body!.getReader();
  const lines = new SseLineReader();
  let keepAlive: ReturnType<typeof setInterval> | undefined;
  let lastSent = Date.now();
  const finish = () => {
    clearInterval(keepAlive);
    inflight.delete(commandId);
    release();
  };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (text: string) => {
        lastSent = Date.now();
        controller.enqueue(enc.encode(text));
      };
      send(frame.head());
      // Long prefills send nothing for a while; a comment every 10 s keeps proxies from closing the stream.
      keepAlive = setInterval(() => {
        if (Date.now() - lastSent < 10_000) return;
        try {
          send(": keep-alive\n\n");
        } catch { /* closed */ }
      }, 2000);
    },
    async pull(controller) {
      // A pull must enqueue something (or close): the stream calls pull again only after it does, so
      // engine chunks that translate to nothing (a role-only delta, a usage record) are read past here.
      try {
        for (;;) {
          const { done, value } = await reader.read();
          const text = done ? frame.end() : lines.push(value).map((p) => frame.push(p)).join("");
          if (text) {
            lastSent = Date.now();
            controller.enqueue(enc.encode(text));
          }
          if (done || frame.done()) {
            // The engine may hold its connection open after [DONE]; the answer is complete, so end it now.
            controller.close();
            finish();
            if (!done) void reader.cancel().catch(() => undefined);
            return;
          }
          if (text) return;
        }
      } catch (e) {
        try {
          controller.enqueue(
            enc.encode(abort.signal.aborted ? frame.fail("generation was cancelled") : onError(e)),
          );
          controller.close();
        } catch { /* client already gone */ }
        finish();
      }
    },
    cancel() {
      // The client went away: closing the engine connection stops its generation.
      finish();
      abort.abort();
    },
  });
  c.req.raw.signal.addEventListener("abort", () => abort.abort());
  return new Response(stream, {
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
      "x-request-id": c.var.requestId,
    },
  });
}

export async function callEngine(
  baseUrl: string,
  path: string,
  body: unknown,
  abort: AbortController,
): Promise<Response> {
  return await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: abort.signal,
  });
}

interface Generation {
  commandId: string;
  abort: AbortController;
  res: Response;
  /** Frees the stream slot a streamed generation holds (a no-op otherwise). */
  release: () => void;
}

/** Sends a generation to the engine under a fresh command id (cancellable through /v1/cancel). */
export async function startGeneration(
  ctx: NodeContext,
  target: Target,
  baseUrl: string,
  path: string,
  body: Record<string, unknown>,
): Promise<Generation> {
  // A stream takes its slot before the engine starts, so a full node refuses without spending work.
  const release = body.stream === true ? slotsOf(ctx).streams.take() : () => {};
  const commandId = crypto.randomUUID();
  const abort = new AbortController();
  inflight.set(commandId, abort);
  let res: Response;
  try {
    res = await callEngine(baseUrl, path, body, abort);
  } catch (e) {
    inflight.delete(commandId);
    release();
    throw new ApiError(503, engineFailure(ctx, target, e));
  }
  if (!res.ok) {
    inflight.delete(commandId);
    release();
    throw await engineError(res);
  }
  return { commandId, abort, res, release };
}

/** What turns the engine's chat SSE into a client's stream (Chat Completions chunks, Anthropic events). */
export interface ChatStreamFraming {
  head(): string;
  push(payload: string): string;
  end(): string;
  fail(message: string): string;
  readonly done: boolean;
  holdContentAsToolCall(): unknown;
}

/**
 * Runs a chat generation on a local engine: a forced tool call is held to its schema (forced-tools.ts); a
 * stream goes out through `framing`, otherwise the reply comes back parsed, the forced call made a tool call.
 */
export async function chatGeneration(
  c: Context<ApiEnv>,
  target: Target,
  baseUrl: string,
  req: Record<string, unknown>,
  framing: (commandId: string) => ChatStreamFraming,
): Promise<Response | { commandId: string; reply: Record<string, unknown> }> {
  const ctx = c.var.node;
  const forcing = forceToolCall(req);
  const { commandId, abort, res, release } = await startGeneration(
    ctx,
    target,
    baseUrl,
    "/v1/chat/completions",
    forcing.request,
  );
  if (req.stream) {
    const t = framing(commandId);
    if (forcing.forced) t.holdContentAsToolCall();
    return streamResponse(
      c,
      res,
      abort,
      commandId,
      {
        head: () => t.head(),
        push: (p) => t.push(p),
        end: () => t.end(),
        fail: (m) => t.fail(m),
        done: () => t.done,
      },
      (e) => t.fail(engineFailure(ctx, target, e)),
      release,
    );
  }
  try {
    const reply = await res.json() as Record<string, unknown>;
    return { commandId, reply: forcing.forced ? forcedReply(reply) : reply };
  } catch (e) {
    throw new ApiError(503, engineFailure(ctx, target, e));
  } finally {
    inflight.delete(commandId);
    release();
  }
}

export const openaiRoutes = new Hono<ApiEnv>()
  .post("/v1/chat/completions", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, ChatRequest);
    if (
      body.messages.every((m) =>
        m.content === null || m.content === undefined || m.content === "" ||
        (Array.isArray(m.content) && m.content.length === 0)
      ) && !body.messages.some((m) => "tool_calls" in m)
    ) {
      throw badRequest("nothing to generate from: every message is empty", "messages");
    }
    const routed = await route(c, body.model, raw);
    if ("remote" in routed) return routed.remote;
    const { baseUrl, target } = routed.local;
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? null;
    admit(maxTokens, target, ctx.worker?.runner(target.runnerId)?.contextTokens ?? null);
    const { enable_thinking, max_completion_tokens: _mct, ...rest } = body;
    const req: Record<string, unknown> = { ...rest, max_tokens: maxTokens ?? DEFAULT_MAX_TOKENS };
    if (enable_thinking !== undefined) {
      req.chat_template_kwargs = { ...(rest.chat_template_kwargs as object ?? {}), enable_thinking };
    }
    if (body.stream) req.stream_options = { include_usage: true };
    const out = await chatGeneration(
      c,
      target,
      baseUrl,
      req,
      (id) => new ChatStreamTranslator(id, body.model),
    );
    if (out instanceof Response) return out;
    return c.json({
      ...out.reply,
      id: out.commandId,
      object: "chat.completion",
      model: body.model,
      service_tier: null,
    });
  })
  .post("/v1/completions", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, CompletionRequest);
    const routed = await route(c, body.model, raw);
    if ("remote" in routed) return routed.remote;
    const { baseUrl, target } = routed.local;
    admit(body.max_tokens, target, ctx.worker?.runner(target.runnerId)?.contextTokens ?? null);
    const req = { ...body, max_tokens: body.max_tokens ?? DEFAULT_MAX_TOKENS };
    const { commandId, abort, res, release } = await startGeneration(
      ctx,
      target,
      baseUrl,
      "/v1/completions",
      req,
    );
    if (body.stream) {
      let done = false;
      const rewrite = (p: string) => {
        if (p.trim() === "[DONE]") {
          done = true;
          return "data: [DONE]\n\n";
        }
        try {
          return `data: ${JSON.stringify({ ...JSON.parse(p), id: commandId, model: body.model })}\n\n`;
        } catch {
          return "";
        }
      };
      const fail = (
        m: string,
      ) => (done
        ? ""
        : (done = true,
          `data: ${
            JSON.stringify({ error: { message: m, type: "ServiceUnavailable", param: null, code: 503 } })
          }\n\ndata: [DONE]\n\n`));
      return streamResponse(
        c,
        res,
        abort,
        commandId,
        {
          head: () => `: command_id ${commandId}\n\n`,
          push: rewrite,
          end: () => (done ? "" : (done = true, "data: [DONE]\n\n")),
          fail,
          done: () => done,
        },
        (e) => fail(engineFailure(ctx, target, e)),
        release,
      );
    }
    inflight.delete(commandId);
    const out = await res.json() as Record<string, unknown>;
    return c.json({ ...out, id: commandId, model: body.model });
  })
  .post("/v1/embeddings", async (c) => {
    const ctx = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, EmbeddingRequest);
    const card = ctx.catalog.get(body.model);
    if (card && !card.tasks.includes("TextEmbedding")) {
      throw badRequest(`${body.model} is not an embedding model`, "model");
    }
    if (body.dimensions !== undefined) {
      throw badRequest(
        "dimensions is not supported: embedding models return their native size",
        "dimensions",
      );
    }
    const routed = await route(c, body.model, raw);
    if ("remote" in routed) return routed.remote;
    const { baseUrl, target } = routed.local;
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort());
    let res: Response;
    try {
      res = await callEngine(baseUrl, "/v1/embeddings", body, abort);
    } catch (e) {
      throw new ApiError(503, engineFailure(ctx, target, e));
    }
    if (!res.ok) throw await engineError(res);
    const out = await res.json() as Record<string, unknown>;
    return c.json({ ...out, model: body.model });
  })
  .post("/v1/cancel/:command_id", (c) => {
    const id = c.req.param("command_id");
    const abort = inflight.get(id);
    if (!abort) throw notFound("Command not found or already completed");
    abort.abort();
    inflight.delete(id);
    log.info("cancelled command {id}", { id });
    return c.json({ message: "Command cancelled.", command_id: id });
  });
