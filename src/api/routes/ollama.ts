/**
 * Ollama's API under `/ollama/`: liveness, version, tags, ps, show, chat, generate and embeddings, served
 * through the chat route's routing and streaming path, streamed as NDJSON, refused in Ollama's `{"error"}` shape.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { downloadModelId } from "../../cluster/downloads.ts";
import { instanceBody } from "../../cluster/instances.ts";
import { applyResolvedFacts, loadAllResolvedFacts } from "../../models/facts.ts";
import { logger } from "../../log/mod.ts";
import { resolveCapabilities } from "../../models/capabilities.ts";
import type { ModelCard } from "../../models/card.ts";
import { readGgufFacts } from "../../models/gguf/reader.ts";
import { resolveModelFile } from "../../worker/model-files.ts";
import type { NodeContext } from "../../node/context.ts";
import {
  capabilities,
  chatToEngine,
  fromChatReply,
  generateToEngine,
  type Mode,
  type ModelFacts,
  OllamaChatRequest,
  OllamaEmbeddingsRequest,
  OllamaEmbedRequest,
  ollamaError,
  OllamaGenerateRequest,
  OllamaShowRequest,
  OllamaStreamTranslator,
  psEntry,
  showEntry,
  tagEntry,
} from "../../serving/ollama.ts";
import { resolveTarget } from "../../serving/target.ts";
import { VERSION } from "../../version.ts";
import type { ApiEnv } from "../env.ts";
import { admittedTokens, extendChat } from "../extensions.ts";
import { ApiError, badRequest, notFound, readJsonWithRaw, toApiError } from "../errors.ts";
import { describe } from "../openapi.ts";
import { admit, chatGeneration, localEmbeddings, route } from "./openai.ts";

const log = logger("ollama");

/** Upstream Ollama's paths, and the doubled/`v1` forms some front-ends build from a base URL ending in /api. */
const CHAT_PATHS = ["/ollama/api/chat", "/ollama/api/api/chat", "/ollama/api/v1/chat"];
const TAGS_PATHS = ["/ollama/api/tags", "/ollama/api/api/tags", "/ollama/api/v1/tags"];

describe({ method: "get", path: "/ollama/", summary: "Ollama liveness: 'Ollama is running'", tag: "ollama" });
describe({ method: "head", path: "/ollama/", summary: "Ollama liveness", tag: "ollama" });
describe({ method: "get", path: "/ollama/api/version", summary: "Ollama version", tag: "ollama" });
for (const path of TAGS_PATHS) {
  describe({
    method: "get",
    path,
    summary: "Ollama model list (downloaded or placed models)",
    tag: "ollama",
  });
}
describe({
  method: "get",
  path: "/ollama/api/ps",
  summary: "Ollama running models (placed instances)",
  tag: "ollama",
});
describe({
  method: "post",
  path: "/ollama/api/show",
  summary: "Ollama model details",
  tag: "ollama",
  body: OllamaShowRequest,
});
for (const path of CHAT_PATHS) {
  describe({
    method: "post",
    path,
    summary: "Ollama chat (NDJSON unless stream:false)",
    tag: "ollama",
    body: OllamaChatRequest,
  });
}
describe({
  method: "post",
  path: "/ollama/api/generate",
  summary: "Ollama generate (NDJSON unless stream:false)",
  tag: "ollama",
  body: OllamaGenerateRequest,
});
describe({
  method: "post",
  path: "/ollama/api/embed",
  summary: "Ollama embeddings",
  tag: "ollama",
  body: OllamaEmbedRequest,
});
describe({
  method: "post",
  path: "/ollama/api/embeddings",
  summary: "Ollama legacy single embedding",
  tag: "ollama",
  body: OllamaEmbeddingsRequest,
});

/** Parameter counts read from GGUF headers, by file and its size and mtime (a replaced file is read again). */
const parameterCounts = new Map<string, number>();
const PARAMETER_COUNTS_MAX = 1024;

/** What a model's header on this node says (its parameter count); nothing when its file is elsewhere. */
async function factsOf(ctx: NodeContext, card: ModelCard | undefined): Promise<ModelFacts> {
  if (!card) return {};
  const file = await resolveModelFile(card, ctx.config);
  if (!("path" in file)) return {};
  try {
    const st = await Deno.stat(file.path);
    const key = `${file.path}\0${st.size}\0${st.mtime?.getTime()}`;
    let n = parameterCounts.get(key);
    if (n === undefined) {
      n = (await readGgufFacts(file.path)).parameterCount;
      if (parameterCounts.size >= PARAMETER_COUNTS_MAX) parameterCounts.clear();
      parameterCounts.set(key, n);
    }
    return { parameterCount: n };
  } catch (e) {
    log.warn("cannot read the GGUF header of {model}: {error}", { model: card.model_id, error: String(e) });
    return {};
  }
}

const KEEP_ALIVE = new TextEncoder().encode(": keep-alive\n\n");
const isKeepAlive = (b: Uint8Array) =>
  b.length === KEEP_ALIVE.length && b.every((x, i) => x === KEEP_ALIVE[i]);

/**
 * The shared stream path frames SSE (its idle keep-alive is an SSE comment); an NDJSON reader would take that
 * comment for a broken line, so it is dropped here. Cancelling this body cancels the one beneath it.
 */
function asNdjson(res: Response): Response {
  const body = res.body!.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (!isKeepAlive(chunk)) controller.enqueue(chunk);
      },
    }),
  );
  const headers = new Headers(res.headers);
  headers.set("content-type", "application/x-ndjson");
  return new Response(body, { status: res.status, headers });
}

/** A chat or generate request, run on the one generation path and answered in Ollama's shape. */
async function generation(
  c: Context<ApiEnv>,
  mode: Mode,
  raw: string,
  body: OllamaChatRequest | OllamaGenerateRequest,
  engineReq: Record<string, unknown>,
): Promise<Response> {
  const ctx = c.var.node;
  const startedMs = performance.now();
  // Extensions shape chats; a generate (a prompt to continue) is not one.
  const ext = mode === "chat" ? await extendChat(c, "ollama_chat", raw, engineReq) : { req: engineReq, raw };
  const routed = await route(c, String(ext.req.model), ext.raw);
  if ("remote" in routed) return routed.remote;
  const { target } = routed.local;
  // Only a client's own num_predict is checked against the context, as on the chat route: the node's default
  // bound is a ceiling the engine stops at, not a demand.
  const asked = body.options?.num_predict;
  admit(
    admittedTokens(engineReq, ext.req, asked && asked > 0 ? asked : null),
    target,
    ctx.worker?.runner(target.runnerId)?.contextTokens ?? null,
  );
  const out = await chatGeneration(
    c,
    routed.local,
    ext.req,
    () => new OllamaStreamTranslator(mode, body.model, startedMs),
  );
  if (out instanceof Response) return asNdjson(out);
  return c.json(
    fromChatReply(out.reply, mode, body.model, new Date().toISOString(), performance.now() - startedMs),
  );
}

/** Embeddings of one or more texts from the engine's OpenAI endpoint, in input order. */
async function embed(c: Context<ApiEnv>, model: string, input: string | string[], raw: string) {
  const ctx = c.var.node;
  const card = ctx.catalog.get(model);
  if (card && !card.tasks.includes("TextEmbedding")) {
    throw badRequest(`${model} is not an embedding model`, "model");
  }
  const routed = await route(c, model, raw);
  if ("remote" in routed) return routed.remote;
  const out = await localEmbeddings(c, routed.local, { model, input }) as {
    data: { index: number; embedding: number[] }[];
    usage?: { prompt_tokens?: number };
  };
  return {
    embeddings: [...out.data].sort((a, b) => a.index - b.index).map((d) => d.embedding),
    promptTokens: out.usage?.prompt_tokens ?? 0,
  };
}

/**
 * The cards Ollama's lists describe, with any size the card leaves open filled in: from the facts recorded when it
 * was first placed, else from a completed download of it. Ollama's clients type `size` as a number (the `ollama`
 * npm client's ModelResponse), so it is resolved rather than null; every model these lists name is placed,
 * downloaded or a local file, so one of the two is there.
 */
async function sizedCards(ctx: ApiEnv["Variables"]["node"]) {
  const facts = await loadAllResolvedFacts(ctx.store.db);
  const downloaded = new Map<string, number>();
  for (const p of Object.values(ctx.log.state.downloads).flat()) {
    if (!("DownloadCompleted" in p)) continue;
    const id = downloadModelId(p);
    downloaded.set(id, Math.max(downloaded.get(id) ?? 0, p.DownloadCompleted.total.inBytes));
  }
  return (id: string) => {
    const card = ctx.catalog.get(id);
    if (!card) return undefined;
    const sized = applyResolvedFacts(card, facts.get(id));
    const fromDownload = downloaded.get(id) ?? 0;
    return sized.storage_size || fromDownload <= 0
      ? sized
      : { ...sized, storage_size: { in_bytes: fromDownload } };
  };
}

export const ollamaRoutes = new Hono<ApiEnv>()
  // Hono answers HEAD with the GET handler, body dropped: what Ollama's liveness probes expect.
  .get("/ollama", (c) => c.text("Ollama is running"))
  .get("/ollama/", (c) => c.text("Ollama is running"))
  .get("/ollama/api/version", (c) => c.json({ version: VERSION }))
  .get("/ollama/api/ps", async (c) => {
    const ctx = c.var.node;
    const cardOf = await sizedCards(ctx);
    const ids = [
      ...new Set(Object.values(ctx.log.state.instances).map((i) => instanceBody(i).shardAssignments.modelId)),
    ];
    const models = await Promise.all(ids.map(async (id) => {
      const card = cardOf(id);
      return psEntry(id, card, await factsOf(ctx, card));
    }));
    return c.json({ models });
  })
  .post("/ollama/api/show", async (c) => {
    const ctx = c.var.node;
    const { body } = await readJsonWithRaw(c, OllamaShowRequest);
    const id = body.model ?? body.name;
    if (!id) throw badRequest("name the model: give 'model' (or 'name')", "model");
    const card = ctx.catalog.get(id);
    if (!card) throw notFound(`model '${id}' not found`);
    const caps = resolveCapabilities(card);
    return c.json(showEntry(
      card,
      capabilities(card, {
        tools: caps.supports_tool_calling,
        vision: caps.supports_image_input,
        thinking: caps.supports_thinking,
      }),
      new Date(),
      await factsOf(ctx, card),
    ));
  })
  .post("/ollama/api/generate", async (c) => {
    const { raw, body } = await readJsonWithRaw(c, OllamaGenerateRequest);
    if (body.raw) throw badRequest("raw is not supported: the model's own template always applies", "raw");
    if (body.suffix) throw badRequest("suffix (fill-in-the-middle) is not supported", "suffix");
    if (!body.prompt && !body.images?.length) {
      // Ollama answers an empty prompt by loading the model; a placed model is always loaded, so only the
      // lookup's answer (404 unknown, 503 not ready) is left to give.
      const ctx = c.var.node;
      const r = resolveTarget(ctx.log.state, body.model, ctx.nodeId);
      if (!r.ok) throw new ApiError(r.status, r.message);
      return c.json({
        model: body.model,
        created_at: new Date().toISOString(),
        response: "",
        done: true,
        done_reason: "load",
      });
    }
    return await generation(
      c,
      "generate",
      raw,
      body,
      generateToEngine(body, c.var.node.config.maxOutputTokens),
    );
  })
  .post("/ollama/api/embed", async (c) => {
    const { raw, body } = await readJsonWithRaw(c, OllamaEmbedRequest);
    if (body.dimensions !== undefined) {
      throw badRequest(
        "dimensions is not supported: embedding models return their native size",
        "dimensions",
      );
    }
    const t0 = performance.now();
    const out = await embed(c, body.model, body.input, raw);
    if (out instanceof Response) return out;
    return c.json({
      model: body.model,
      embeddings: out.embeddings,
      total_duration: Math.round((performance.now() - t0) * 1e6),
      load_duration: 0,
      prompt_eval_count: out.promptTokens,
    });
  })
  .post("/ollama/api/embeddings", async (c) => {
    const { raw, body } = await readJsonWithRaw(c, OllamaEmbeddingsRequest);
    const out = await embed(c, body.model, body.prompt, raw);
    if (out instanceof Response) return out;
    return c.json({ embedding: out.embeddings[0] ?? [] });
  });

for (const path of TAGS_PATHS) {
  ollamaRoutes.get(path, async (c) => {
    const ctx = c.var.node;
    const state = ctx.log.state;
    const ids = new Set<string>();
    // Downloaded somewhere, a local file, or placed: every model a client could name here.
    for (const p of Object.values(state.downloads).flat()) {
      if ("DownloadCompleted" in p) ids.add(downloadModelId(p));
    }
    for (const card of ctx.catalog.all()) if (card.gguf_path !== undefined) ids.add(card.model_id);
    for (const i of Object.values(state.instances)) ids.add(instanceBody(i).shardAssignments.modelId);
    const now = new Date();
    const cardOf = await sizedCards(ctx);
    const models = await Promise.all(
      [...ids].sort().map(async (id) => {
        const card = cardOf(id);
        return tagEntry(id, card, now, await factsOf(ctx, card));
      }),
    );
    return c.json({ models });
  });
}
for (const path of CHAT_PATHS) {
  ollamaRoutes.post(path, async (c) => {
    const { raw, body } = await readJsonWithRaw(c, OllamaChatRequest);
    return await generation(c, "chat", raw, body, chatToEngine(body, c.var.node.config.maxOutputTokens));
  });
}

ollamaRoutes.onError((err, c) => {
  const known = toApiError(err);
  if (known) {
    if (known.opts.retryAfter !== undefined) c.header("Retry-After", String(known.opts.retryAfter));
    return c.json(ollamaError(known.message), known.status);
  }
  log.error("unhandled error on {path} (request {requestId}): {error}", {
    path: c.req.path,
    requestId: c.var.requestId,
    error: (err as Error).stack ?? String(err),
  });
  return c.json(ollamaError(`internal error (request id ${c.var.requestId}); see the node's log`), 500);
});
