/**
 * Ollama's API on top of the engine's Chat Completions: the wire schemas, request and reply translations, the
 * NDJSON stream translator, and the catalogue shapes of `/api/tags`, `/api/ps` and `/api/show`. Pure.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import type { ModelCard } from "../models/card.ts";
import { ChatEventTranslator, type ChatReply, type ChatUsage } from "./chat-events.ts";
import { ChatTool, ChatToolChoice, newToolCallId } from "./forced-tools.ts";

/** Ollama's sampling options; the ones llama-server has no use for (num_ctx, num_gpu, ...) pass unread. */
export const OllamaOptions = z.object({
  num_predict: z.number().int().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().nonnegative().optional(),
  min_p: z.number().min(0).max(1).optional(),
  repeat_penalty: z.number().optional(),
  presence_penalty: z.number().optional(),
  frequency_penalty: z.number().optional(),
  seed: z.number().int().optional(),
  stop: z.union([z.string(), z.array(z.string())]).optional(),
}).loose();

const OllamaToolCall = z.object({
  function: z.object({
    name: z.string().min(1),
    arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).optional(),
  }).loose(),
}).loose();

export const OllamaMessage = z.object({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.string().nullish(),
  thinking: z.string().optional(),
  images: z.array(z.string().min(1)).nullish(),
  tool_calls: z.array(OllamaToolCall).optional(),
  tool_name: z.string().optional(),
  name: z.string().optional(),
}).loose();
type OllamaMessage = z.infer<typeof OllamaMessage>;

/** `"json"` or a JSON schema the reply must follow. */
const Format = z.union([z.literal("json"), z.literal(""), z.record(z.string(), z.unknown())]);

const GenerationFields = {
  model: z.string().min(1, "must name a model"),
  stream: z.boolean().optional(),
  options: OllamaOptions.optional(),
  format: Format.nullish(),
  keep_alive: z.union([z.string(), z.number()]).optional(),
  think: z.union([z.boolean(), z.enum(["low", "medium", "high"])]).optional(),
};

export const OllamaChatRequest = z.object({
  ...GenerationFields,
  messages: z.array(OllamaMessage).min(1, "must not be empty"),
  tools: z.array(ChatTool).optional(),
  /** Not in Ollama's API (its clients never send it): Skulk takes it to force a call, as Chat Completions does. */
  tool_choice: ChatToolChoice.optional(),
}).loose();
export type OllamaChatRequest = z.infer<typeof OllamaChatRequest>;

export const OllamaGenerateRequest = z.object({
  ...GenerationFields,
  prompt: z.string().optional(),
  suffix: z.string().optional(),
  system: z.string().optional(),
  images: z.array(z.string().min(1)).nullish(),
  raw: z.boolean().optional(),
  context: z.array(z.number()).optional(),
}).loose();
export type OllamaGenerateRequest = z.infer<typeof OllamaGenerateRequest>;

export const OllamaShowRequest = z.object({
  model: z.string().min(1).optional(),
  name: z.string().min(1).optional(),
  verbose: z.boolean().optional(),
}).loose();

export const OllamaEmbedRequest = z.object({
  model: z.string().min(1, "must name a model"),
  input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
  truncate: z.boolean().optional(),
  dimensions: z.number().int().positive().optional(),
  options: OllamaOptions.optional(),
  keep_alive: z.union([z.string(), z.number()]).optional(),
}).loose();

export const OllamaEmbeddingsRequest = z.object({
  model: z.string().min(1, "must name a model"),
  prompt: z.string().min(1, "must not be empty"),
  options: OllamaOptions.optional(),
  keep_alive: z.union([z.string(), z.number()]).optional(),
}).loose();

/** A refused Ollama request's body. */
export const ollamaError = (message: string) => ({ error: message });

/** Base64 images carry no media type; the first bytes tell the common ones apart. */
function imageUrl(b64: string): string {
  const data = b64.replace(/^data:[^,]*,/, "");
  const type = data.startsWith("/9j/")
    ? "image/jpeg"
    : data.startsWith("R0lGOD")
    ? "image/gif"
    : data.startsWith("UklGR")
    ? "image/webp"
    : "image/png";
  return `data:${type};base64,${data}`;
}

function userContent(text: string, images: string[] | null | undefined): unknown {
  if (!images?.length) return text;
  return [
    ...(text ? [{ type: "text", text }] : []),
    ...images.map((i) => ({ type: "image_url", image_url: { url: imageUrl(i) } })),
  ];
}

const argsText = (a: Record<string, unknown> | string | undefined) =>
  typeof a === "string" ? a : JSON.stringify(a ?? {});

/**
 * Ollama messages as Chat Completions messages. Ollama's tool calls carry no ids and its tool results name
 * the tool, not the call: calls get ids here, and each result answers the oldest call not yet answered.
 */
export function toChatMessages(messages: OllamaMessage[]): Record<string, unknown>[] {
  const pending: { id: string; name: string }[] = [];
  return messages.map((m) => {
    const content = m.content ?? "";
    if (m.role === "assistant") {
      const out: Record<string, unknown> = { role: "assistant", content };
      if (m.thinking) out.reasoning_content = m.thinking;
      if (m.tool_calls?.length) {
        out.tool_calls = m.tool_calls.map((tc) => {
          const id = newToolCallId();
          pending.push({ id, name: tc.function.name });
          return {
            id,
            type: "function",
            function: { name: tc.function.name, arguments: argsText(tc.function.arguments) },
          };
        });
        if (!content) out.content = null;
      }
      return out;
    }
    if (m.role === "tool") {
      const name = m.tool_name ?? m.name;
      const i = name ? pending.findIndex((p) => p.name === name) : 0;
      const call = pending.splice(i < 0 ? 0 : i, 1)[0];
      return { role: "tool", tool_call_id: call?.id ?? newToolCallId(), content };
    }
    return { role: m.role, content: m.role === "user" ? userContent(content, m.images) : content };
  });
}

/** The fields chat and generate share: options, format, thinking, streaming. */
function generationFields(
  req: { options?: z.infer<typeof OllamaOptions>; format?: z.infer<typeof Format> | null; think?: unknown },
  stream: boolean,
  defaultMaxTokens: number,
): Record<string, unknown> {
  const o = req.options ?? {};
  // Ollama's num_predict -1 (or -2) means "until done": the node's bound then applies.
  const out: Record<string, unknown> = {
    max_tokens: o.num_predict !== undefined && o.num_predict > 0 ? o.num_predict : defaultMaxTokens,
  };
  for (
    const k of [
      "temperature",
      "top_p",
      "top_k",
      "min_p",
      "seed",
      "presence_penalty",
      "frequency_penalty",
    ] as const
  ) {
    if (o[k] !== undefined) out[k] = o[k];
  }
  if (o.repeat_penalty !== undefined) out.repeat_penalty = o.repeat_penalty;
  if (o.stop !== undefined) out.stop = typeof o.stop === "string" ? [o.stop] : o.stop;
  if (req.format === "json") out.response_format = { type: "json_object" };
  else if (req.format && typeof req.format === "object") {
    out.response_format = { type: "json_schema", json_schema: { name: "format", schema: req.format } };
  }
  if (req.think !== undefined) out.chat_template_kwargs = { enable_thinking: req.think !== false };
  if (stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return out;
}

/** Ollama streams unless told not to. */
export const streams = (req: { stream?: boolean }) => req.stream !== false;

/** A chat request as the engine's Chat Completions request. */
export function chatToEngine(req: OllamaChatRequest, defaultMaxTokens: number): Record<string, unknown> {
  const out: Record<string, unknown> = {
    model: req.model,
    messages: toChatMessages(req.messages),
    ...generationFields(req, streams(req), defaultMaxTokens),
  };
  if (req.tools?.length) out.tools = req.tools;
  if (req.tool_choice && (req.tools?.length || req.tool_choice === "none")) out.tool_choice = req.tool_choice;
  return out;
}

/** A generate request as a one-turn chat: the model's own template wraps the prompt, as Ollama's does. */
export function generateToEngine(
  req: OllamaGenerateRequest,
  defaultMaxTokens: number,
): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  if (req.system) messages.push({ role: "system", content: req.system });
  messages.push({ role: "user", content: userContent(req.prompt ?? "", req.images) });
  return { model: req.model, messages, ...generationFields(req, streams(req), defaultMaxTokens) };
}

/** llama-server's timing record on a reply (and on a stream's last chunk). */
export interface EngineTimings {
  prompt_n?: number;
  prompt_ms?: number;
  predicted_n?: number;
  predicted_ms?: number;
}

const NS_PER_MS = 1_000_000;

export function doneReason(finish: string | null | undefined): "stop" | "length" | "tool_call" {
  if (finish === "length") return "length";
  if (finish === "tool_calls") return "tool_call";
  return "stop";
}

/** The closing fields of an answer: why it ended, token counts, and durations in nanoseconds. */
export function doneFields(
  finish: string | null | undefined,
  usage: ChatUsage | null | undefined,
  timings: EngineTimings | null | undefined,
  totalMs: number,
) {
  return {
    done: true as const,
    done_reason: doneReason(finish),
    total_duration: Math.round(totalMs * NS_PER_MS),
    load_duration: 0,
    prompt_eval_count: usage?.prompt_tokens ?? timings?.prompt_n ?? 0,
    prompt_eval_duration: Math.round((timings?.prompt_ms ?? 0) * NS_PER_MS),
    eval_count: usage?.completion_tokens ?? timings?.predicted_n ?? 0,
    eval_duration: Math.round((timings?.predicted_ms ?? 0) * NS_PER_MS),
  };
}

export interface OllamaToolCallOut {
  function: { name: string; arguments: Record<string, unknown> };
}

function parseArgs(args: string): Record<string, unknown> {
  try {
    const v = JSON.parse(args || "{}");
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

export type Mode = "chat" | "generate";

/** What an answer says, as a chat `message` or generate's `response`/`thinking`. */
function said(mode: Mode, content: string, thinking: string, calls: OllamaToolCallOut[]) {
  if (mode === "generate") return { response: content, ...(thinking ? { thinking } : {}) };
  return {
    message: {
      role: "assistant" as const,
      content,
      ...(thinking ? { thinking } : {}),
      ...(calls.length ? { tool_calls: calls } : {}),
    },
  };
}

/** A non-streamed engine reply (already through forcedReply when forced) as Ollama's answer. */
export function fromChatReply(
  out: ChatReply & { timings?: EngineTimings },
  mode: Mode,
  model: string,
  createdAt: string,
  totalMs: number,
) {
  const choice = out.choices?.[0];
  const m = choice?.message ?? {};
  const calls = (m.tool_calls ?? []).map((tc) => ({
    function: { name: tc.function?.name ?? "", arguments: parseArgs(tc.function?.arguments ?? "") },
  }));
  return {
    model,
    created_at: createdAt,
    ...said(mode, m.content ?? "", m.reasoning_content ?? "", calls),
    ...doneFields(choice?.finish_reason, out.usage, out.timings, totalMs),
  };
}

/**
 * llama-server's Chat Completions SSE payloads in, Ollama's NDJSON lines out: one line per text or thinking
 * delta, tool calls whole (Ollama never streams partial arguments) on a line of their own, then the `done`
 * line with counts and durations; a failure is a last line with `error`.
 */
export class OllamaStreamTranslator extends ChatEventTranslator {
  #calls: { name: string; args: string }[] = [];
  #timings: EngineTimings | null = null;

  constructor(
    readonly mode: Mode,
    readonly model: string,
    /** When the request came in (ms, performance.now), for total_duration. */
    readonly startedMs: number,
    readonly now: () => number = () => performance.now(),
    readonly clock: () => string = () => new Date().toISOString(),
  ) {
    super();
  }

  #line(fields: Record<string, unknown>): string {
    return JSON.stringify({ model: this.model, created_at: this.clock(), ...fields }) + "\n";
  }

  head(): string {
    return "";
  }

  override push(payload: string): string {
    // The timings ride on the last chunk, which the common reader does not keep.
    if (payload.includes('"timings"')) {
      try {
        this.#timings = (JSON.parse(payload) as { timings?: EngineTimings }).timings ?? this.#timings;
      } catch { /* not JSON: the common reader skips it too */ }
    }
    return super.push(payload);
  }

  protected reasoning(text: string): string {
    return this.#line({ ...said(this.mode, "", text, []), done: false });
  }

  protected content(text: string): string {
    return this.#line({ ...said(this.mode, text, "", []), done: false });
  }

  protected toolCall(index: number, _id: string, name: string, args: string): string {
    const call = this.#calls[index] ?? (this.#calls[index] = { name: "", args: "" });
    call.name += name;
    call.args += args;
    return "";
  }

  protected close(): string {
    const calls = this.#calls.filter(Boolean).map((c) => ({
      function: { name: c.name, arguments: parseArgs(c.args) },
    }));
    const callLine = calls.length ? this.#line({ ...said(this.mode, "", "", calls), done: false }) : "";
    return callLine +
      this.#line({
        ...said(this.mode, "", "", []),
        ...doneFields(this.finish, this.usage, this.#timings, this.now() - this.startedMs),
      });
  }

  protected failure(message: string): string {
    return JSON.stringify(ollamaError(message)) + "\n";
  }
}

/** What the route learned of a model beyond its card: its parameter count, from a GGUF header on this node. */
export interface ModelFacts {
  parameterCount?: number;
}

/** Ollama's human form of a parameter count (format.HumanNumber): 8B, 3.2B, 494.03M, 2.17M. */
export function humanCount(n: number): string {
  const units: [number, string][] = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "K"]];
  for (const [size, unit] of units) {
    if (n < size) continue;
    const v = n / size;
    if (Number.isInteger(v) || unit === "K") return `${v.toFixed(0)}${unit}`;
    return `${v.toFixed(unit === "M" ? 2 : 1)}${unit}`;
  }
  return String(n);
}

/** Ollama's `details` of a model, from its card and what its header says. */
export function modelDetails(card: ModelCard | undefined, facts: ModelFacts = {}) {
  return {
    parent_model: "",
    format: "gguf",
    family: card?.family ?? "",
    families: card?.family ? [card.family] : null,
    parameter_size: facts.parameterCount ? humanCount(facts.parameterCount) : "",
    quantization_level: card?.quantization ?? "",
  };
}

/**
 * The model's digest, as Ollama's 64 hex digits: sha256 of its manifest (id, revision, file, size, type), the
 * same on every node and changed by any new revision or file, without reading gigabytes of weights.
 */
export function manifestDigest(modelId: string, card: ModelCard | undefined): string {
  const manifest = JSON.stringify([
    modelId,
    card?.source_revision ?? null,
    card?.gguf_file ?? card?.gguf_path?.replace(/^.*\//, "") ?? null,
    card?.storage_size?.in_bytes ?? null,
    card?.quantization ?? null,
  ]);
  return createHash("sha256").update(manifest).digest("hex");
}

/** One `/api/tags` entry. */
export function tagEntry(modelId: string, card: ModelCard | undefined, now: Date, facts: ModelFacts = {}) {
  return {
    name: modelId,
    model: modelId,
    modified_at: now.toISOString(),
    size: card?.storage_size?.in_bytes ?? 0,
    digest: manifestDigest(modelId, card),
    details: modelDetails(card, facts),
  };
}

/** One `/api/ps` entry: a placed instance, kept loaded until it is deleted. */
export function psEntry(modelId: string, card: ModelCard | undefined, facts: ModelFacts = {}) {
  return {
    name: modelId,
    model: modelId,
    size: card?.storage_size?.in_bytes ?? 0,
    digest: manifestDigest(modelId, card),
    details: modelDetails(card, facts),
    // Ollama unloads after keep_alive; a placed instance stays until deleted, so no expiry is near.
    expires_at: "9999-12-31T23:59:59Z",
    size_vram: 0,
    context_length: card?.context_length ?? 0,
  };
}

/** Ollama's capability words for a card. */
export function capabilities(card: ModelCard, caps: { tools: boolean; vision: boolean; thinking: boolean }) {
  if (card.tasks.includes("TextEmbedding")) return ["embedding"];
  return [
    "completion",
    ...(caps.tools ? ["tools"] : []),
    ...(caps.vision ? ["vision"] : []),
    ...(caps.thinking ? ["thinking"] : []),
  ];
}

/** `/api/show` for a card. */
export function showEntry(card: ModelCard, caps: string[], now: Date, facts: ModelFacts = {}) {
  return {
    modelfile: `FROM ${card.model_id}`,
    parameters: "",
    template: "{{ .Prompt }}",
    details: modelDetails(card, facts),
    model_info: {
      "general.architecture": card.family ?? "",
      ...(facts.parameterCount ? { "general.parameter_count": facts.parameterCount } : {}),
      ...(card.context_length ? { [`${card.family ?? "general"}.context_length`]: card.context_length } : {}),
    },
    capabilities: caps,
    modified_at: now.toISOString(),
  };
}
