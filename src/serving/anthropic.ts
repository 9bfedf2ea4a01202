/**
 * Anthropic Messages on top of the engine's Chat Completions: the wire schemas, the request translation, the
 * reply translation, and a stream translator from llama-server's SSE chunks to Anthropic's event sequence. Pure.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import type { ChatTool, ChatToolChoice } from "./forced-tools.ts";
import { newToolCallId } from "./forced-tools.ts";
import { ChatEventTranslator, type ChatReply } from "./chat-events.ts";

const TextBlock = z.object({ type: z.literal("text"), text: z.string() }).loose();
const ImageBlock = z.object({
  type: z.literal("image"),
  source: z.union([
    z.object({ type: z.literal("base64"), media_type: z.string().min(1), data: z.string().min(1) }).loose(),
    z.object({ type: z.literal("url"), url: z.string().min(1) }).loose(),
  ]),
}).loose();
const ThinkingBlock = z.object({ type: z.literal("thinking"), thinking: z.string() }).loose();
const RedactedThinkingBlock = z.object({ type: z.literal("redacted_thinking") }).loose();
const ToolUseBlock = z.object({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
}).loose();
const ToolResultBlock = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.union([TextBlock, ImageBlock]))]).optional(),
  is_error: z.boolean().optional(),
}).loose();
const ContentBlock = z.discriminatedUnion("type", [
  TextBlock,
  ImageBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
  ToolUseBlock,
  ToolResultBlock,
]);
type ContentBlock = z.infer<typeof ContentBlock>;

const MessageParam = z.object({
  role: z.enum(["user", "assistant"]),
  content: z.union([z.string(), z.array(ContentBlock)]),
}).loose();

const Tool = z.object({
  name: z.string().min(1, "must name the tool"),
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()),
}).loose();

const ToolChoice = z.discriminatedUnion("type", [
  z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({
    type: z.literal("tool"),
    name: z.string().min(1),
    disable_parallel_tool_use: z.boolean().optional(),
  }),
  z.object({ type: z.literal("none") }),
]);

/** Fields both a message request and a token count take. */
const PromptFields = {
  model: z.string().min(1, "must name a model"),
  messages: z.array(MessageParam).min(1, "must not be empty"),
  system: z.union([z.string(), z.array(TextBlock)]).optional(),
  tools: z.array(Tool).optional(),
  tool_choice: ToolChoice.optional(),
  thinking: z.object({
    type: z.enum(["enabled", "disabled", "adaptive"]),
    budget_tokens: z.number().int().positive().optional(),
  }).loose().optional(),
};

export const MessagesRequest = z.object({
  ...PromptFields,
  max_tokens: z.number().int().positive("must be a positive integer"),
  stop_sequences: z.array(z.string().min(1)).max(16).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().positive().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
}).loose();
export type MessagesRequest = z.infer<typeof MessagesRequest>;

export const CountTokensRequest = z.object(PromptFields).loose();
export type CountTokensRequest = z.infer<typeof CountTokensRequest>;

export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use";

/** An Anthropic error body: `{"type": "error", "error": {"type", "message"}}`. */
export function anthropicErrorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503 || status === 529) return "overloaded_error";
  if (status >= 500) return "api_error";
  return "invalid_request_error";
}

export function anthropicError(status: number, message: string) {
  return { type: "error" as const, error: { type: anthropicErrorType(status), message } };
}

type ChatContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };
type ChatMessage = Record<string, unknown> & { role: string };

function imagePart(b: z.infer<typeof ImageBlock>): ChatContentPart {
  const s = b.source;
  const url = s.type === "base64" ? `data:${s.media_type};base64,${s.data}` : s.url;
  return { type: "image_url", image_url: { url } };
}

/** Text only stays a string (templates without typed parts then render it unchanged). */
function chatContent(parts: ChatContentPart[]): string | ChatContentPart[] {
  return parts.every((p) => p.type === "text")
    ? parts.map((p) => (p as { text: string }).text).join("")
    : parts;
}

function toolResultText(b: z.infer<typeof ToolResultBlock>): string {
  const text = typeof b.content === "string"
    ? b.content
    : (b.content ?? []).map((c) => (c.type === "text" ? c.text : "")).join("");
  return b.is_error ? `Error: ${text}` : text;
}

/** One Anthropic message as Chat Completions messages: tool results become `tool` messages, in order. */
function chatMessages(m: z.infer<typeof MessageParam>): ChatMessage[] {
  if (typeof m.content === "string") return [{ role: m.role, content: m.content }];
  const out: ChatMessage[] = [];
  let parts: ChatContentPart[] = [];
  let reasoning = "";
  const calls: unknown[] = [];
  const flush = () => {
    if (parts.length === 0) return;
    out.push({ role: m.role, content: chatContent(parts) });
    parts = [];
  };
  for (const b of m.content as ContentBlock[]) {
    if (b.type === "text") parts.push({ type: "text", text: b.text });
    else if (b.type === "image") parts.push(imagePart(b));
    else if (b.type === "thinking") reasoning += b.thinking;
    else if (b.type === "tool_use") {
      calls.push({
        id: b.id,
        type: "function",
        function: { name: b.name, arguments: JSON.stringify(b.input) },
      });
    } else if (b.type === "tool_result") {
      flush();
      out.push({ role: "tool", tool_call_id: b.tool_use_id, content: toolResultText(b) });
    }
  }
  if (m.role === "assistant") {
    const msg: ChatMessage = {
      role: "assistant",
      content: parts.length ? chatContent(parts) : calls.length ? null : "",
    };
    if (reasoning) msg.reasoning_content = reasoning;
    if (calls.length) msg.tool_calls = calls;
    return [...out, msg];
  }
  flush();
  return out;
}

function chatToolChoice(c: z.infer<typeof ToolChoice> | undefined): ChatToolChoice | undefined {
  if (!c) return undefined;
  if (c.type === "any") return "required";
  if (c.type === "tool") return { type: "function", function: { name: c.name } };
  return c.type;
}

/** The prompt part of a Messages request as Chat Completions fields (also what count_tokens counts). */
export function toChatPrompt(req: CountTokensRequest): Record<string, unknown> & {
  messages: ChatMessage[];
  tools?: ChatTool[];
  tool_choice?: ChatToolChoice;
} {
  const system = typeof req.system === "string"
    ? req.system
    : (req.system ?? []).map((b) => b.text).join("\n");
  const messages: ChatMessage[] = [
    ...(system ? [{ role: "system", content: system }] : []),
    ...req.messages.flatMap(chatMessages),
  ];
  const out: ReturnType<typeof toChatPrompt> = { model: req.model, messages };
  if (req.tools?.length) {
    out.tools = req.tools.map((t) => ({
      type: "function" as const,
      function: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        parameters: t.input_schema,
      },
    }));
  }
  const choice = chatToolChoice(req.tool_choice);
  if (choice && (out.tools || choice === "none")) out.tool_choice = choice;
  if (
    req.tool_choice && "disable_parallel_tool_use" in req.tool_choice &&
    req.tool_choice.disable_parallel_tool_use
  ) {
    out.parallel_tool_calls = false;
  }
  if (req.thinking) out.chat_template_kwargs = { enable_thinking: req.thinking.type !== "disabled" };
  return out;
}

/** A Messages request as the engine's Chat Completions request. */
export function toChatRequest(req: MessagesRequest): Record<string, unknown> {
  const out: Record<string, unknown> = { ...toChatPrompt(req), max_tokens: req.max_tokens };
  if (req.stop_sequences?.length) {
    out.stop = req.stop_sequences;
    // llama-server says which stop word ended generation only in its verbose record (`__verbose`).
    out.verbose = true;
  }
  if (req.temperature !== undefined) out.temperature = req.temperature;
  if (req.top_p !== undefined) out.top_p = req.top_p;
  if (req.top_k !== undefined) out.top_k = req.top_k;
  if (req.stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return out;
}

/**
 * Why generation ended, in Anthropic's words. Chat Completions says `stop` both for end of text and for a
 * stop sequence; the text's end tells them apart only when it is given (the engine strips the sequence).
 */
export function stopReason(finish: string | null | undefined, stopSequenceHit: string | null): StopReason {
  if (finish === "tool_calls") return "tool_use";
  if (finish === "length") return "max_tokens";
  if (stopSequenceHit) return "stop_sequence";
  return "end_turn";
}

export type AnthropicBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

function parseInput(args: string): Record<string, unknown> {
  try {
    const v = JSON.parse(args || "{}");
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

const toolUseId = (
  id: string | undefined,
) => (id && id.startsWith("toolu_") ? id : `toolu_${(id || newToolCallId()).replace(/^call_/, "")}`);

/**
 * A thinking block's signature: Anthropic's is opaque to clients, which send it back with the block. Nothing here
 * verifies it (the engine re-reads thinking as text); a digest of the text keeps it non-empty and stable, as
 * clients that drop unsigned thinking expect.
 */
export function thinkingSignature(thinking: string): string {
  return createHash("sha256").update(`skulk-thinking:${thinking}`).digest("base64");
}

const stopWord = (v: { stopping_word?: string } | null | undefined): string | null =>
  v?.stopping_word || null;

/** A non-streamed engine reply (already through forcedReply when forced) as an Anthropic message. */
export function fromChatReply(out: ChatReply, id: string, model: string) {
  const stopSequenceHit = stopWord(out.__verbose);
  const choice = out.choices?.[0];
  const m = choice?.message ?? {};
  const content: AnthropicBlock[] = [];
  if (m.reasoning_content) {
    content.push({
      type: "thinking",
      thinking: m.reasoning_content,
      signature: thinkingSignature(m.reasoning_content),
    });
  }
  if (m.content) content.push({ type: "text", text: m.content });
  for (const tc of m.tool_calls ?? []) {
    content.push({
      type: "tool_use",
      id: toolUseId(tc.id),
      name: tc.function?.name ?? "",
      input: parseInput(tc.function?.arguments ?? ""),
    });
  }
  if (content.length === 0) content.push({ type: "text", text: "" });
  const reason = stopReason(choice?.finish_reason, stopSequenceHit);
  return {
    id,
    type: "message" as const,
    role: "assistant" as const,
    model,
    content,
    stop_reason: reason,
    stop_sequence: reason === "stop_sequence" ? stopSequenceHit : null,
    usage: { input_tokens: out.usage?.prompt_tokens ?? 0, output_tokens: out.usage?.completion_tokens ?? 0 },
  };
}

export function sseEvent(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * llama-server's Chat Completions SSE payloads in, Anthropic's event sequence out: message_start, ping, per
 * block content_block_start / _delta / _stop (text, thinking, tool_use with input_json_delta), message_delta
 * with stop_reason and usage, message_stop. A forced tool call's JSON text is held and sent as one tool_use.
 */
export class AnthropicStreamTranslator extends ChatEventTranslator {
  #open: { kind: "text" | "thinking" | "tool"; toolIndex?: number } | null = null;
  #index = -1;
  /** The open thinking block's text so far, signed when the block closes. */
  #thinking = "";

  constructor(readonly id: string, readonly model: string) {
    super();
  }

  head(): string {
    return sseEvent("message_start", {
      type: "message_start",
      message: {
        id: this.id,
        type: "message",
        role: "assistant",
        model: this.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    }) + sseEvent("ping", { type: "ping" });
  }

  #close(): string {
    if (!this.#open) return "";
    // Anthropic ends a thinking block with its signature, as one signature_delta.
    const signed = this.#open.kind === "thinking"
      ? this.#delta({ type: "signature_delta", signature: thinkingSignature(this.#thinking) })
      : "";
    this.#open = null;
    this.#thinking = "";
    return signed + sseEvent("content_block_stop", { type: "content_block_stop", index: this.#index });
  }

  #start(kind: "text" | "thinking" | "tool", block: Record<string, unknown>, toolIndex?: number): string {
    const out = this.#close();
    this.#index++;
    this.#open = { kind, toolIndex };
    return out +
      sseEvent("content_block_start", {
        type: "content_block_start",
        index: this.#index,
        content_block: block,
      });
  }

  #delta(delta: Record<string, unknown>): string {
    return sseEvent("content_block_delta", { type: "content_block_delta", index: this.#index, delta });
  }

  protected reasoning(text: string): string {
    const start = this.#open?.kind === "thinking"
      ? ""
      : this.#start("thinking", { type: "thinking", thinking: "", signature: "" });
    this.#thinking += text;
    return start + this.#delta({ type: "thinking_delta", thinking: text });
  }

  protected content(text: string): string {
    const start = this.#open?.kind === "text" ? "" : this.#start("text", { type: "text", text: "" });
    return start + this.#delta({ type: "text_delta", text });
  }

  protected toolCall(index: number, id: string, name: string, args: string): string {
    const start = this.#open?.kind === "tool" && this.#open.toolIndex === index
      ? ""
      : this.#start("tool", { type: "tool_use", id: toolUseId(id), name, input: {} }, index);
    return start + (args ? this.#delta({ type: "input_json_delta", partial_json: args }) : "");
  }

  /** The last block's stop (an empty text block when there was none), message_delta, message_stop. */
  protected close(): string {
    let out = this.#index < 0 ? this.#start("text", { type: "text", text: "" }) : "";
    out += this.#close();
    const reason = stopReason(this.finish, this.stopWord);
    const usage = {
      input_tokens: this.usage?.prompt_tokens ?? 0,
      output_tokens: this.usage?.completion_tokens ?? 0,
    };
    return out +
      sseEvent("message_delta", {
        type: "message_delta",
        delta: { stop_reason: reason, stop_sequence: reason === "stop_sequence" ? this.stopWord : null },
        usage,
      }) +
      sseEvent("message_stop", { type: "message_stop" });
  }

  /** Anthropic's `event: error`. */
  protected failure(message: string): string {
    return sseEvent("error", anthropicError(503, message));
  }
}
