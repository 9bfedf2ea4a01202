/**
 * The OpenAI-compatible surface: `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, and
 * `/v1/cancel/{command_id}`. Each request is checked, routed to the engine of a ready instance (on this
 * node, or streamed through the node that drives it), and answered in upstream Skulk's framing.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import { logger } from "../../log/mod.ts";
import { metricsOf, notedOf, noteQueued, noteTarget, streamObserver } from "../../metrics/node.ts";
import { generationOf } from "../../metrics/registry.ts";
import type { NodeContext } from "../../node/context.ts";
import { withAcceptance } from "../../engines/speculation.ts";
import { ChatReplyAssembler, StreamedEngineError } from "../../serving/chat-reply.ts";
import { ChatStreamTranslator, SseLineReader } from "../../serving/chat-stream.ts";
import { ChatTool, ChatToolChoice, forcedReply, forceToolCall } from "../../serving/forced-tools.ts";
import { FORWARDED_HEADER, forwardRequest } from "../../serving/forward.ts";
import { engineTakesImages, hasImageInput } from "../../serving/images.ts";
import { cancelRoute, COMMAND_ID_HEADER, runningOf } from "../../serving/running.ts";
import { admissionOf, INSTANCE_HEADER, routeRequest } from "../../serving/router.ts";
import type { Target } from "../../serving/target.ts";
import { markTrace, traceEngine, traceForward, traceTarget } from "../../tracing/recorder.ts";
import type { ApiEnv } from "../env.ts";
import { admittedTokens, extendChat } from "../extensions.ts";
import { ApiError, badRequest, notFound, readJsonWithRaw } from "../errors.ts";
import { describe } from "../openapi.ts";
import { slotsOf } from "../slots.ts";

const log = logger("openai");

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

/** A request this node's engine serves: the engine's URL, its target, and the request's command id. */
export interface Local {
  baseUrl: string;
  target: Target;
  commandId: string;
}
type Routed = { local: Local } | { remote: Response };

/**
 * The command id of a request: the owner's, when a peer forwarded it here (so a cancel through either node
 * names the same generation), else a fresh one. A client cannot choose it: only forwarded requests carry it.
 */
function commandIdOf(c: Context<ApiEnv>): string {
  const given = c.req.header(FORWARDED_HEADER) ? c.req.header(COMMAND_ID_HEADER) : undefined;
  if (given === undefined) return crypto.randomUUID();
  if (!z.uuid().safeParse(given).success) throw badRequest(`${COMMAND_ID_HEADER} must be a UUID`);
  if (runningOf(c.var.node).has(given)) {
    throw new ApiError(409, `command ${given} is already running on this node`);
  }
  return given;
}

/**
 * Ends the owner's record of a forwarded request when its answer ends (completed, failed or the client
 * gone), passing the bytes through untouched. Also ends a traced request's trace (routes/traces.ts).
 */
export function untilDone(res: Response, done: () => void): Response {
  if (!res.body) return (done(), res);
  let ended = false;
  const end = () => {
    if (!ended) (ended = true, done());
  };
  const body = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({ flush: end }));
  const reader = body.getReader();
  const out = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done: last, value } = await reader.read();
        if (last) return (controller.close(), end());
        controller.enqueue(value);
      } catch (e) {
        end();
        controller.error(e);
      }
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
  return new Response(out, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/**
 * The instance a forwarding peer chose: trusted only on a peer's forward, verified by its signature when
 * this node has an API key (without one, the cluster trusts its LAN, as for the command id).
 */
function pinnedInstance(c: Context<ApiEnv>): string | undefined {
  const peer = c.var.node.config.apiKey ? c.var.peer : c.req.header(FORWARDED_HEADER);
  return peer ? c.req.header(INSTANCE_HEADER) : undefined;
}

/**
 * Finds the engine for a model: the balancer's instance (serving/router.ts), as a local runner's URL, or
 * the driving node's streamed answer.
 */
export async function route(c: Context<ApiEnv>, model: string, raw: string): Promise<Routed> {
  const ctx = c.var.node;
  markTrace(c, "routeStart");
  const r = routeRequest(ctx, model, raw, pinnedInstance(c));
  noteTarget(c, model, r.ok ? r.target.instanceId : undefined);
  traceTarget(c, model, r.ok ? r.target.instanceId : undefined);
  if (!r.ok) {
    throw new ApiError(
      r.status,
      r.message,
      r.status === 404 ? { type: "invalid_request_error", param: "model", code: "model_not_found" } : {},
    );
  }
  log.debug("{model} routed to instance {instance} on {node} ({why})", {
    model,
    instance: r.target.instanceId,
    node: r.target.driverNode,
    why: r.why,
  });
  const commandId = commandIdOf(c);
  traceTarget(c, model, r.target.instanceId, commandId);
  if (r.target.driverNode !== ctx.nodeId) {
    // This node owns the request: it names the command and records which node drives it, so a cancel
    // sent here reaches the engine's node.
    const headers = new Headers(c.req.raw.headers);
    headers.set(COMMAND_ID_HEADER, commandId);
    headers.set(INSTANCE_HEADER, r.target.instanceId);
    traceForward(c, headers, r.target.driverNode);
    const req = new Request(c.req.raw.url, { method: c.req.method, headers, signal: c.req.raw.signal });
    const running = runningOf(ctx);
    running.add({
      commandId,
      model,
      instanceId: r.target.instanceId,
      driverNode: r.target.driverNode,
      ownerNode: ctx.nodeId,
      path: c.req.path,
      startedAt: Date.now(),
    });
    const res = await forwardRequest(ctx, r.target.driverNode, req, raw);
    markTrace(c, "forwardAnswered");
    if ("error" in res) {
      running.remove(commandId);
      throw new ApiError(503, res.error);
    }
    return { remote: untilDone(res, () => running.remove(commandId)) };
  }
  const runner = ctx.worker?.runner(r.target.runnerId);
  if (!runner || !runner.baseUrl) {
    const why = runner?.failure ??
      (runner ? `runner is ${runner.phase}` : "its runner is not running on this node yet");
    throw new ApiError(503, `model ${model} cannot serve now: ${why}`);
  }
  return { local: { baseUrl: runner.baseUrl, target: r.target, commandId } };
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
  /** Set once the stream was closed or errored: a read that settles afterwards sends nothing. */
  let ended = false;
  const finish = () => {
    clearInterval(keepAlive);
    runningOf(c.var.node).remove(commandId);
    release();
  };
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      // A cancel ends the client's stream here and now, whether or not a read of the engine's body is
      // pending (an aborted fetch does not always settle one); closing the engine connection stops it.
      abort.signal.addEventListener("abort", () => {
        if (ended) return;
        ended = true;
        try {
          controller.enqueue(enc.encode(frame.fail("generation was cancelled")));
          controller.close();
        } catch { /* the client already went */ }
        finish();
        void reader.cancel().catch(() => undefined);
      });
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
          if (ended) return;
          const text = done ? frame.end() : lines.push(value).map((p) => frame.push(p)).join("");
          if (text) {
            lastSent = Date.now();
            controller.enqueue(enc.encode(text));
          }
          if (done || frame.done()) {
            // The engine may hold its connection open after [DONE]; the answer is complete, so end it now.
            ended = true;
            controller.close();
            finish();
            if (!done) void reader.cancel().catch(() => undefined);
            return;
          }
          if (text) return;
        }
      } catch (e) {
        if (ended) return;
        ended = true;
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
      ended = true;
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

/**
 * Waits for a slot of the instance's engine (serving/admission.ts), notes the wait for the response header
 * and the metrics, and returns one release for the slot and `also` (the stream slot).
 */
async function admitted(
  c: Context<ApiEnv>,
  target: Target,
  signal: AbortSignal,
  also: () => void = () => {},
): Promise<() => void> {
  const ctx = c.var.node;
  const gone = AbortSignal.any([signal, c.req.raw.signal]);
  let a;
  try {
    a = await admissionOf(ctx).enter(target.instanceId, gone);
  } catch (e) {
    if (!gone.aborted) throw e;
    throw new ApiError(503, `the request was cancelled while it waited for instance ${target.instanceId}`);
  }
  noteQueued(c, a.waitedMs);
  metricsOf(ctx).queued(notedOf(c)?.model ?? "", a.waitedMs / 1000);
  return () => (a.release(), also());
}

/** Sends a generation to the engine under its command id, recorded as running (cancellable through /v1/cancel). */
export async function startGeneration(
  c: Context<ApiEnv>,
  routed: Local,
  path: string,
  body: Record<string, unknown>,
  /** Whether the client gets a stream (and so holds a stream slot); the engine may stream either way. */
  clientStream = body.stream === true,
): Promise<Generation> {
  const ctx = c.var.node;
  const { baseUrl, target, commandId } = routed;
  // A stream takes its slot before the engine starts, so a full node refuses without spending work.
  const releaseStream = clientStream ? slotsOf(ctx).streams.take() : () => {};
  const abort = new AbortController();
  const running = runningOf(ctx);
  const forwardedBy = c.req.header(FORWARDED_HEADER);
  running.add({
    commandId,
    model: String(body.model),
    instanceId: target.instanceId,
    driverNode: ctx.nodeId,
    ownerNode: forwardedBy && ctx.telemetry.get(forwardedBy) ? forwardedBy : ctx.nodeId,
    path: c.req.path,
    startedAt: Date.now(),
  }, abort);
  // A client that goes ends its generation, streamed or not (streamResponse also aborts on a stream's cancel).
  c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
  // Queued (and counted by the router) until the instance has a free engine slot; a cancel leaves the line.
  let release: () => void;
  try {
    release = await admitted(c, target, abort.signal, releaseStream);
  } catch (e) {
    running.remove(commandId);
    releaseStream();
    throw e;
  }
  let res: Response;
  markTrace(c, "engineCall");
  try {
    res = await callEngine(baseUrl, path, body, abort);
  } catch (e) {
    running.remove(commandId);
    release();
    throw new ApiError(503, engineFailure(ctx, target, e));
  }
  if (!res.ok) {
    running.remove(commandId);
    release();
    throw await engineError(res);
  }
  markTrace(c, "engineAnswered");
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
  /** What the engine reported so far (its last chunk's usage and timings), for the metrics; absent when unread. */
  readonly usage?: unknown;
  readonly timings?: unknown;
}

/**
 * Runs a chat generation on a local engine: a forced tool call is held to its schema (forced-tools.ts); a
 * stream goes out through `framing` holding a stream slot, otherwise the reply comes back parsed, the forced
 * call made a tool call.
 */
export async function chatGeneration(
  c: Context<ApiEnv>,
  local: Local,
  req: Record<string, unknown>,
  framing: (commandId: string) => ChatStreamFraming,
): Promise<Response | { commandId: string; reply: Record<string, unknown> }> {
  const ctx = c.var.node;
  if (
    hasImageInput(req.messages) &&
    !engineTakesImages(ctx.worker?.runner(local.target.runnerId)?.engine?.spec.args)
  ) {
    throw badRequest(
      `model ${
        String(req.model)
      } takes no images: it runs without a vision projector (mmproj); send text only`,
      "messages",
    );
  }
  const forcing = forceToolCall(req);
  // The engine always streams: llama-server checks a non-streamed task's connection only after a second
  // with no result for any of its tasks, so while other requests or probes keep it busy a client that went
  // was never noticed and the engine generated on to max_tokens. A stream notices at its next token.
  const { commandId, abort, res, release } = await startGeneration(
    c,
    local,
    "/v1/chat/completions",
    req.stream
      ? forcing.request
      : { ...forcing.request, stream: true, stream_options: { include_usage: true } },
    req.stream === true,
  );
  const model = String(req.model ?? "");
  if (req.stream) {
    const t = framing(commandId);
    if (forcing.forced) t.holdContentAsToolCall();
    traceEngine(c, () => t.timings);
    const seen = streamObserver(metricsOf(ctx), c, model, () => ({ usage: t.usage, timings: t.timings }));
    return streamResponse(
      c,
      res,
      abort,
      commandId,
      {
        head: () => t.head(),
        push: (p) => seen(t.push(p), t.done),
        end: () => seen(t.end(), true),
        fail: (m) => t.fail(m),
        done: () => t.done,
      },
      (e) => t.fail(engineFailure(ctx, local.target, e)),
      release,
    );
  }
  try {
    const reply = await wholeReply(res, abort.signal);
    if (reply.usage && typeof reply.usage === "object") {
      reply.usage = withAcceptance(reply.usage as Record<string, unknown>, reply.timings);
    }
    metricsOf(ctx).generation(generationOf(model, reply.usage, reply.timings, null));
    traceEngine(c, () => reply.timings);
    return { commandId, reply: forcing.forced ? forcedReply(reply) : reply };
  } catch (e) {
    if (e instanceof StreamedEngineError) {
      throw await engineError(new Response(JSON.stringify({ error: e.body }), { status: 500 }));
    }
    if (abort.signal.aborted) throw new ApiError(503, "generation was cancelled");
    throw new ApiError(503, engineFailure(ctx, local.target, e));
  } finally {
    runningOf(ctx).remove(commandId);
    release();
  }
}

/**
 * The engine's streamed chat read to its end as one reply (serving/chat-reply.ts). An abort ends a pending
 * read at once (an aborted fetch does not always settle one), so a cancelled request frees its slot.
 */
async function wholeReply(res: Response, signal: AbortSignal): Promise<Record<string, unknown>> {
  const reader = res.body!.getReader();
  const stop = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener("abort", stop, { once: true });
  try {
    const lines = new SseLineReader();
    const reply = new ChatReplyAssembler();
    while (!reply.done) {
      const { done, value } = await reader.read();
      if (signal.aborted) throw new Error("generation was cancelled");
      if (done) break;
      for (const p of lines.push(value)) reply.push(p);
    }
    if (!reply.done) throw new Error("the engine's answer ended early");
    // The engine may hold its connection open after [DONE]; the answer is complete.
    stop();
    return reply.reply();
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

/** The local engine's `/v1/embeddings` answer to `body`, parsed; cancelled when the client goes. */
export async function localEmbeddings(
  c: Context<ApiEnv>,
  local: Local,
  body: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const abort = new AbortController();
  c.req.raw.signal.addEventListener("abort", () => abort.abort());
  const release = await admitted(c, local.target, abort.signal);
  try {
    let res: Response;
    try {
      res = await callEngine(local.baseUrl, "/v1/embeddings", body, abort);
    } catch (e) {
      throw new ApiError(503, engineFailure(c.var.node, local.target, e));
    }
    if (!res.ok) throw await engineError(res);
    return await res.json() as Record<string, unknown>;
  } finally {
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
    const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? null;
    const { enable_thinking, max_completion_tokens: _mct, ...rest } = body;
    const req: Record<string, unknown> = { ...rest, max_tokens: maxTokens ?? ctx.config.maxOutputTokens };
    if (enable_thinking !== undefined) {
      req.chat_template_kwargs = { ...(rest.chat_template_kwargs as object ?? {}), enable_thinking };
    }
    if (body.stream) req.stream_options = { include_usage: true };
    const ext = await extendChat(c, "chat_completions", raw, req);
    const routed = await route(c, String(ext.req.model), ext.raw);
    if ("remote" in routed) return routed.remote;
    const { target } = routed.local;
    admit(
      admittedTokens(req, ext.req, maxTokens),
      target,
      ctx.worker?.runner(target.runnerId)?.contextTokens ?? null,
    );
    const out = await chatGeneration(
      c,
      routed.local,
      ext.req,
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
    const { target } = routed.local;
    admit(body.max_tokens, target, ctx.worker?.runner(target.runnerId)?.contextTokens ?? null);
    const req = { ...body, max_tokens: body.max_tokens ?? ctx.config.maxOutputTokens };
    const { commandId, abort, res, release } = await startGeneration(c, routed.local, "/v1/completions", req);
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
    try {
      const out = await res.json() as Record<string, unknown>;
      metricsOf(ctx).generation(generationOf(body.model, out.usage, out.timings, null));
      traceEngine(c, () => out.timings);
      return c.json({ ...out, id: commandId, model: body.model });
    } finally {
      runningOf(ctx).remove(commandId);
      release();
    }
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
    const out = await localEmbeddings(c, routed.local, body);
    return c.json({ ...out, model: body.model });
  })
  .post("/v1/cancel/:command_id", async (c) => {
    const ctx = c.var.node;
    const id = c.req.param("command_id");
    const running = runningOf(ctx);
    const entry = running.get(id);
    const reported = ctx.telemetry.entries().flatMap(([node, e]) =>
      node === ctx.nodeId ? [] : e.reading.running ?? []
    );
    const where = cancelRoute(id, ctx.nodeId, entry?.request, reported);
    const gone = () => notFound("Command not found or already completed");
    if (where.kind === "unknown") throw gone();
    if (where.kind === "local") {
      if (!entry?.abort) throw gone();
      entry.abort.abort();
      running.remove(id);
      log.info("cancelled command {id}", { id });
      return c.json({ message: "Command cancelled.", command_id: id });
    }
    // Another node's engine generates it: that node cancels (a forwarded cancel is never forwarded again).
    if (c.req.header(FORWARDED_HEADER)) throw gone();
    const res = await forwardRequest(ctx, where.driverNode, c.req.raw, new Uint8Array());
    if ("error" in res) throw new ApiError(503, res.error);
    log.info("cancel of command {id} forwarded to {node}: {status}", {
      id,
      node: where.driverNode,
      status: res.status,
    });
    return res;
  });
