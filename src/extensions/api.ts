/**
 * The extension API, version 1: what an extension module's default export is, what its hooks receive, and the
 * zod schema that checks an export at load. Extension authors import their types from this one module.
 */
import type { Logger } from "@logtape/logtape";
import { z } from "zod";

/** The extension API this Skulk speaks; an extension naming another is refused at load. */
export const EXTENSION_API_VERSION = 1;

/**
 * A Chat Completions request as the engine will get it (`model`, `messages`, `max_tokens`, `stream`, tools,
 * sampling fields...): every chat-shaped API (Chat Completions, Messages, Responses, Ollama chat) is translated
 * into this form before the extensions see it.
 */
export type ChatRequest = Record<string, unknown> & { model: string; messages: ChatMessage[] };
export type ChatMessage = Record<string, unknown> & { role: string; content?: unknown };

/** Which API a chat request came in through. */
export type ChatApi = "chat_completions" | "messages" | "responses" | "ollama_chat";

/** Token counts in OpenAI's names, whatever API answered. */
export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** The completed answer, assembled from what the client was sent (streamed or not). */
export interface ChatResponse {
  api: ChatApi;
  stream: boolean;
  /** The HTTP status the client got. */
  status: number;
  /** The assistant's text (tool calls are not included). */
  text: string;
  /** Reasoning ("thinking") text, when the model produced any. */
  reasoning: string;
  /** The API's own stop reason (`stop`, `length`, `end_turn`, `completed`...); null when none was sent. */
  finishReason: string | null;
  usage: ChatUsage | null;
  /** Why the request failed (an error status, an error event in the stream, the client going away). */
  error: string | null;
}

/** What each hook of an extension receives besides its arguments. */
export interface ExtensionContext {
  /** The extension's name, as it declared it. */
  readonly name: string;
  readonly nodeId: string;
  readonly skulkVersion: string;
  /** The extension's own settings: `extensions.config.<name>` in skulk.yaml (an empty object when none). */
  readonly config: Readonly<Record<string, unknown>>;
  /** A logtape logger whose category ends with the extension's name. */
  readonly logger: Logger;
  /**
   * Embeddings of `inputs` by `model`, served by the cluster through the same routing as `POST /v1/embeddings`
   * (this node's engine or the node that drives the model), one vector per input in order. Rejects with the
   * API's message when the model is unknown, not ready, or not an embedding model.
   */
  embed(model: string, inputs: string | string[]): Promise<number[][]>;
}

/** Per-request facts the chat hooks get (read-only). */
export interface ChatInfo {
  api: ChatApi;
  requestId: string;
}

/**
 * An extension: the default export of its module. Every hook is optional and guarded: a throw, a rejection or
 * (for onChatRequest) a run past its budget is logged and counted, and the request goes on as if the hook
 * had not run.
 */
export interface Extension {
  /** Names the extension in logs, status and `extensions.config`; letters, digits, `.`, `_`, `-`. */
  name: string;
  apiVersion: typeof EXTENSION_API_VERSION;
  /** Once at node start, before any request reaches the extension. A failure refuses the extension. */
  setup?(ctx: ExtensionContext): unknown;
  /**
   * Before the request is routed: return the request to send instead (a new object or the one given,
   * changed), or undefined to leave it as it is. Extensions run in load order, each on the previous output.
   */
  onChatRequest?(
    req: ChatRequest,
    ctx: ExtensionContext & { chat: ChatInfo },
  ): ChatRequest | undefined | void | Promise<ChatRequest | undefined | void>;
  /** After the client has its whole answer: the request as sent to the engine and the answer. */
  onChatResponse?(req: ChatRequest, res: ChatResponse, ctx: ExtensionContext & { chat: ChatInfo }): unknown;
  /** At node shutdown. */
  teardown?(): unknown;
}

const fn = <T>(what: string) =>
  z.custom<T>((v) => typeof v === "function", `${what} must be a function`).optional();

export const ExtensionName = z.string().regex(
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
  "name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
);

/** What an extension's default export must be; `apiVersion` is checked first, on its own (load.ts). */
export const ExtensionSchema = z.object({
  name: ExtensionName,
  apiVersion: z.literal(EXTENSION_API_VERSION),
  setup: fn<Extension["setup"]>("setup"),
  onChatRequest: fn<Extension["onChatRequest"]>("onChatRequest"),
  onChatResponse: fn<Extension["onChatResponse"]>("onChatResponse"),
  teardown: fn<Extension["teardown"]>("teardown"),
});

/** What a request hook may hand back: a chat request that can still be routed. */
export const ChatRequestShape = z.looseObject({
  model: z.string().min(1, "model must name a model"),
  messages: z.array(z.looseObject({ role: z.string().min(1) })).min(1, "messages must not be empty"),
});

export const HookSchema = z.enum(["setup", "onChatRequest", "onChatResponse", "teardown"]);
export type Hook = z.infer<typeof HookSchema>;

/** An extension this node runs, as `GET /v1/extensions` (and node diagnostics) show it. */
export const LoadedStatusSchema = z.object({
  name: z.string(),
  source: z.string(),
  hooks: z.array(HookSchema),
  calls: z.object({ onChatRequest: z.number(), onChatResponse: z.number() }),
  /** Hook runs that threw or rejected, or returned an unusable request. */
  errors: z.number(),
  /** Hook runs abandoned at their budget. */
  timeouts: z.number(),
  lastError: z.object({ hook: HookSchema, message: z.string(), at: z.string() }).nullable(),
});
export type LoadedStatus = z.infer<typeof LoadedStatusSchema>;

/** An extension named in the settings that this node does not run, and why. */
export const RefusedStatusSchema = z.object({
  source: z.string(),
  name: z.string().nullable(),
  reason: z.string(),
});
export type RefusedStatus = z.infer<typeof RefusedStatusSchema>;

export const ExtensionsStatusSchema = z.object({
  apiVersion: z.number(),
  /** False when `extensions.disable` (SKULK_EXTENSIONS_DISABLE) turned every extension off. */
  enabled: z.boolean(),
  requestBudgetMs: z.number(),
  loaded: z.array(LoadedStatusSchema),
  refused: z.array(RefusedStatusSchema),
});
export type ExtensionsStatus = z.infer<typeof ExtensionsStatusSchema>;
