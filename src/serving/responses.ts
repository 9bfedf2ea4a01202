/**
 * OpenAI Responses on top of the engine's Chat Completions: the wire schema, input items → chat messages, and
 * the reply (whole, or llama-server's SSE chunks) → a `response` object and the Responses event stream. Pure.
 */
import { z } from "zod";
import { type ChatTool, type ChatToolChoice, newToolCallId } from "./forced-tools.ts";
import { ChatEventTranslator, type ChatReply, type ChatUsage } from "./chat-events.ts";

const InputContent = z.discriminatedUnion("type", [
  z.object({ type: z.literal("input_text"), text: z.string() }).loose(),
  z.object({ type: z.literal("output_text"), text: z.string() }).loose(),
  z.object({ type: z.literal("input_image"), image_url: z.string().min(1) }).loose(),
]);
const MessageItem = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([z.string(), z.array(InputContent)]),
}).loose();
const FunctionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
}).loose();
const FunctionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(InputContent)]),
}).loose();
const ReasoningItem = z.object({ type: z.literal("reasoning") }).loose();
export const InputItem = z.union([FunctionCallItem, FunctionCallOutputItem, ReasoningItem, MessageItem]);
export type InputItem = z.infer<typeof InputItem>;

const FunctionTool = z.object({
  type: z.literal("function"),
  name: z.string().min(1, "must name the function"),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
}).loose();

export const ResponsesRequest = z.object({
  model: z.string().min(1, "must name a model"),
  input: z.union([z.string().min(1, "must not be empty"), z.array(InputItem).min(1, "must not be empty")]),
  instructions: z.string().nullish(),
  max_output_tokens: z.number().int().positive("must be a positive integer").nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  tools: z.array(FunctionTool).optional(),
  tool_choice: z.union([
    z.enum(["auto", "none", "required"]),
    z.object({ type: z.literal("function"), name: z.string().min(1) }),
  ]).optional(),
  parallel_tool_calls: z.boolean().nullish(),
  previous_response_id: z.string().regex(
    /^resp_[A-Za-z0-9]{1,64}$/,
    "must be a response id (resp_ and letters or digits)",
  ).nullish(),
  /** Keep the response for a later previous_response_id (OpenAI's default: true). */
  store: z.boolean().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
}).loose();
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

type ChatMessage = Record<string, unknown> & { role: string };

function chatParts(content: string | z.infer<typeof InputContent>[]) {
  if (typeof content === "string") return content;
  const parts = content.map((c) =>
    c.type === "input_image"
      ? { type: "image_url" as const, image_url: { url: c.image_url } }
      : { type: "text" as const, text: c.text }
  );
  return parts.every((p) => p.type === "text")
    ? parts.map((p) => (p as { text: string }).text).join("")
    : parts;
}

function chatMessages(items: InputItem[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const item of items) {
    if (item.type === "function_call") {
      const call = {
        id: item.call_id,
        type: "function",
        function: { name: item.name, arguments: item.arguments },
      };
      const last = out.at(-1);
      // Consecutive calls are one assistant turn with several tool calls.
      if (last?.role === "assistant" && Array.isArray(last.tool_calls)) last.tool_calls.push(call);
      else out.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (item.type === "function_call_output") {
      const output = chatParts(item.output);
      out.push({
        role: "tool",
        tool_call_id: item.call_id,
        content: typeof output === "string" ? output : "",
      });
    } else if (item.type === "reasoning") continue;
    else {out.push({
        role: item.role === "developer" ? "system" : item.role,
        content: chatParts(item.content),
      });}
  }
  return out;
}

/** The request's input as items (a string is one user message). */
export function inputItems(req: ResponsesRequest): InputItem[] {
  return typeof req.input === "string" ? [{ role: "user", content: req.input }] : req.input;
}

/**
 * A response's output as the input items that replay it in a later turn: its messages as assistant turns and
 * its function calls as calls; reasoning is left out, as the chat template drops earlier turns' thinking.
 */
export function outputAsInput(output: OutputItem[]): InputItem[] {
  return output.flatMap((o): InputItem[] => {
    if (o.type === "message") {
      return [{ type: "message", role: "assistant", content: o.content.map((c) => c.text).join("") }];
    }
    if (o.type === "function_call") {
      return [{ type: "function_call", call_id: o.call_id, name: o.name, arguments: o.arguments }];
    }
    return [];
  });
}

/** A Responses request as the engine's Chat Completions request. */
export function toChatRequest(req: ResponsesRequest, defaultMaxTokens: number): Record<string, unknown> {
  const messages = [
    ...(req.instructions ? [{ role: "system", content: req.instructions }] : []),
    ...chatMessages(inputItems(req)),
  ];
  const out: Record<string, unknown> = {
    model: req.model,
    messages,
    max_tokens: req.max_output_tokens ?? defaultMaxTokens,
  };
  if (req.tools?.length) {
    out.tools = req.tools.map((t): ChatTool => ({
      type: "function",
      function: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        ...(t.parameters ? { parameters: t.parameters } : {}),
      },
    }));
  }
  if (req.tool_choice) {
    const c = req.tool_choice;
    out.tool_choice =
      (typeof c === "string" ? c : { type: "function", function: { name: c.name } }) as ChatToolChoice;
  }
  if (req.parallel_tool_calls === false) out.parallel_tool_calls = false;
  if (req.temperature !== undefined && req.temperature !== null) out.temperature = req.temperature;
  if (req.top_p !== undefined && req.top_p !== null) out.top_p = req.top_p;
  if (req.stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return out;
}

const itemId = (prefix: string) => `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;

export type OutputItem =
  | { type: "reasoning"; id: string; summary: { type: "summary_text"; text: string }[]; status?: "completed" }
  | {
    type: "message";
    id: string;
    role: "assistant";
    status: "completed" | "in_progress";
    content: { type: "output_text"; text: string; annotations: never[]; logprobs: never[] }[];
  }
  | {
    type: "function_call";
    id: string;
    call_id: string;
    name: string;
    arguments: string;
    status: "completed" | "in_progress";
  };

const messageItem = (text: string, status: "completed" | "in_progress" = "completed"): OutputItem => ({
  type: "message",
  id: itemId("msg"),
  role: "assistant",
  status,
  content: status === "completed" ? [{ type: "output_text", text, annotations: [], logprobs: [] }] : [],
});

const callItem = (
  callId: string,
  name: string,
  args: string,
  status: "completed" | "in_progress" = "completed",
) => ({ type: "function_call", id: itemId("fc"), call_id: callId, name, arguments: args, status }) as const;

type Usage = ChatUsage;

/** The `response` object: what the request asked for, what came out, and why it ended. */
export function responseObject(
  req: ResponsesRequest,
  id: string,
  createdAt: number,
  output: OutputItem[],
  status: "completed" | "incomplete" | "in_progress",
  usage: Usage | null,
) {
  const text = output.flatMap((o) => (o.type === "message" ? o.content.map((c) => c.text) : [])).join("");
  return {
    id,
    object: "response" as const,
    created_at: createdAt,
    status,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    model: req.model,
    output,
    output_text: text,
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: req.previous_response_id ?? null,
    store: req.store ?? true,
    temperature: req.temperature ?? null,
    top_p: req.top_p ?? null,
    tool_choice: req.tool_choice ?? "auto",
    tools: req.tools ?? [],
    text: { format: { type: "text" } },
    metadata: req.metadata ?? {},
    usage: usage
      ? {
        input_tokens: usage.prompt_tokens ?? 0,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: usage.completion_tokens ?? 0,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0),
      }
      : null,
  };
}

/** A non-streamed engine reply (forced calls already made tool calls) as a `response`. */
export function fromChatReply(out: ChatReply, req: ResponsesRequest, id: string, createdAt: number) {
  const choice = out.choices?.[0];
  const m = choice?.message ?? {};
  const output: OutputItem[] = [];
  if (m.reasoning_content) {
    output.push({
      type: "reasoning",
      id: itemId("rs"),
      summary: [{ type: "summary_text", text: m.reasoning_content }],
    });
  }
  if (m.content) output.push(messageItem(m.content));
  for (const tc of m.tool_calls ?? []) {
    output.push(callItem(tc.id || newToolCallId(), tc.function?.name ?? "", tc.function?.arguments ?? ""));
  }
  const status = choice?.finish_reason === "length" ? "incomplete" : "completed";
  return responseObject(req, id, createdAt, output, status, out.usage ?? null);
}

/**
 * llama-server's Chat Completions SSE payloads in, Responses events out (`event: <type>` with `data` carrying
 * `type` and `sequence_number`): created, in_progress, per item output_item.added / deltas / done, completed.
 */
export class ResponsesStreamTranslator extends ChatEventTranslator {
  #seq = 0;
  readonly #output: OutputItem[] = [];
  #open: { kind: "message" | "reasoning"; text: string; item: OutputItem } | null = null;
  #call: { index: number; item: Extract<OutputItem, { type: "function_call" }> } | null = null;
  readonly #createdAt = Math.floor(Date.now() / 1000);

  constructor(
    readonly id: string,
    readonly req: ResponsesRequest,
    /** Told the finished response's output (not a failed one's), to keep it for a follow-up. */
    readonly onDone: (output: OutputItem[]) => void = () => {},
  ) {
    super();
  }

  #event(type: string, body: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.#seq++, ...body })}\n\n`;
  }

  #response(status: "completed" | "incomplete" | "in_progress") {
    return responseObject(this.req, this.id, this.#createdAt, this.#output, status, this.usage);
  }

  head(): string {
    const response = this.#response("in_progress");
    return this.#event("response.created", { response }) + this.#event("response.in_progress", { response });
  }

  #closeOpen(): string {
    let out = this.#closeCall();
    const o = this.#open;
    if (!o) return out;
    this.#open = null;
    const index = this.#output.indexOf(o.item);
    if (o.item.type === "message") {
      const part = {
        type: "output_text" as const,
        text: o.text,
        annotations: [] as never[],
        logprobs: [] as never[],
      };
      o.item.content = [part];
      o.item.status = "completed";
      const at = { item_id: o.item.id, output_index: index, content_index: 0 };
      out += this.#event("response.output_text.done", { ...at, text: o.text, logprobs: [] }) +
        this.#event("response.content_part.done", { ...at, part });
    } else if (o.item.type === "reasoning") {
      o.item.summary = [{ type: "summary_text", text: o.text }];
      const at = { item_id: o.item.id, output_index: index, summary_index: 0 };
      out += this.#event("response.reasoning_summary_text.done", { ...at, text: o.text }) +
        this.#event("response.reasoning_summary_part.done", { ...at, part: o.item.summary[0] });
    }
    return out + this.#event("response.output_item.done", { output_index: index, item: o.item });
  }

  #closeCall(): string {
    const c = this.#call;
    if (!c) return "";
    this.#call = null;
    c.item.status = "completed";
    const index = this.#output.indexOf(c.item);
    return this.#event("response.function_call_arguments.done", {
      item_id: c.item.id,
      output_index: index,
      name: c.item.name,
      arguments: c.item.arguments,
    }) + this.#event("response.output_item.done", { output_index: index, item: c.item });
  }

  #text(kind: "message" | "reasoning", delta: string): string {
    let out = "";
    if (this.#open?.kind !== kind) {
      out += this.#closeOpen();
      const item: OutputItem = kind === "message"
        ? messageItem("", "in_progress")
        : { type: "reasoning", id: itemId("rs"), summary: [] };
      this.#output.push(item);
      this.#open = { kind, text: "", item };
      const index = this.#output.length - 1;
      out += this.#event("response.output_item.added", { output_index: index, item });
      out += kind === "message"
        ? this.#event("response.content_part.added", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [], logprobs: [] },
        })
        : this.#event("response.reasoning_summary_part.added", {
          item_id: item.id,
          output_index: index,
          summary_index: 0,
          part: { type: "summary_text", text: "" },
        });
    }
    const o = this.#open!;
    o.text += delta;
    const index = this.#output.indexOf(o.item);
    return out + (kind === "message"
      ? this.#event("response.output_text.delta", {
        item_id: o.item.id,
        output_index: index,
        content_index: 0,
        delta,
        logprobs: [],
      })
      : this.#event("response.reasoning_summary_text.delta", {
        item_id: o.item.id,
        output_index: index,
        summary_index: 0,
        delta,
      }));
  }

  #callDelta(index: number, id: string, name: string, args: string): string {
    let out = "";
    if (!this.#call || this.#call.index !== index) {
      out += this.#closeOpen();
      const item = callItem(id || newToolCallId(), name, "", "in_progress");
      this.#output.push(item);
      this.#call = { index, item };
      out += this.#event("response.output_item.added", { output_index: this.#output.length - 1, item });
    }
    if (!args) return out;
    const c = this.#call!;
    c.item.arguments += args;
    return out + this.#event("response.function_call_arguments.delta", {
      item_id: c.item.id,
      output_index: this.#output.indexOf(c.item),
      delta: args,
    });
  }

  protected reasoning(text: string): string {
    return this.#text("reasoning", text);
  }

  protected content(text: string): string {
    return this.#text("message", text);
  }

  protected toolCall(index: number, id: string, name: string, args: string): string {
    return this.#callDelta(index, id, name, args);
  }

  /** The open item's done events, then `response.completed` (or `.incomplete` when cut at the limit). */
  protected close(): string {
    const status = this.finish === "length" ? "incomplete" : "completed";
    const closing = this.#closeOpen();
    this.onDone(this.#output);
    return closing + this.#event(`response.${status}`, { response: this.#response(status) });
  }

  protected failure(message: string): string {
    return this.#event("error", { code: "server_error", message, param: null });
  }
}
