/**
 * Forced tool calls (`tool_choice: "required"` or a named function), made reliable for every model: the engine
 * still renders the tools into the prompt, but its output is constrained by a JSON schema `{name, arguments}`
 * (as vLLM does), and the JSON that comes back is turned into the tool call. Pure: request and reply rewrites.
 */
import { z } from "zod";

/** An OpenAI Chat Completions function tool. */
export const ChatTool = z.looseObject({
  type: z.literal("function"),
  function: z.looseObject({
    name: z.string().min(1, "must name the function"),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});
export type ChatTool = z.infer<typeof ChatTool>;

export const ChatToolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.looseObject({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) }),
]);
export type ChatToolChoice = z.infer<typeof ChatToolChoice>;

/** A request the forced-call rewrite refuses; the API layer makes it a 400 naming `param`. */
export class ToolRequestError extends Error {
  constructor(message: string, readonly param: string) {
    super(message);
    this.name = "ToolRequestError";
  }
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** The tools a call is forced to, or null when the model may answer in text. */
export function forcedTools(
  tools: readonly ChatTool[] | undefined,
  choice: ChatToolChoice | undefined,
): ChatTool[] | null {
  if (!choice || choice === "auto" || choice === "none") return null;
  if (!tools?.length) {
    throw new ToolRequestError("tool_choice forces a tool call but no tools were given", "tool_choice");
  }
  if (choice === "required") return [...tools];
  const named = tools.filter((t) => t.function.name === choice.function.name);
  if (named.length === 0) {
    throw new ToolRequestError(
      `tool_choice names ${JSON.stringify(choice.function.name)}, which is not among the tools`,
      "tool_choice",
    );
  }
  return named;
}

/** The JSON schema of one forced call: the function's name as a constant and its parameters' schema. */
export function forcedCallSchema(tools: readonly ChatTool[]): Record<string, unknown> {
  const one = (t: ChatTool) => ({
    type: "object",
    properties: {
      name: { const: t.function.name },
      arguments: t.function.parameters ?? { type: "object" },
    },
    required: ["name", "arguments"],
    additionalProperties: false,
  });
  return tools.length === 1 ? one(tools[0]) : { anyOf: tools.map(one) };
}

/**
 * Rewrites a chat request that forces a tool call: tools stay (the template shows them to the model),
 * the engine is told not to parse its own tool syntax, and its output is held to the call's schema.
 * Returns the request unchanged and `forced: false` when nothing is forced.
 */
export function forceToolCall<R extends Record<string, unknown>>(
  req: R & { tools?: ChatTool[]; tool_choice?: ChatToolChoice },
): { request: Record<string, unknown>; forced: boolean } {
  const tools = forcedTools(req.tools, req.tool_choice);
  if (!tools) return { request: req, forced: false };
  if (req.response_format !== undefined && req.response_format !== null) {
    throw new ToolRequestError(
      "response_format cannot be combined with a forced tool call (the call's arguments follow the tool's schema)",
      "response_format",
    );
  }
  return {
    request: {
      ...req,
      tool_choice: "none",
      parallel_tool_calls: false,
      response_format: {
        type: "json_schema",
        json_schema: { name: "tool_call", strict: true, schema: forcedCallSchema(tools) },
      },
    },
    forced: true,
  };
}

/** The tool call in a forced reply's text, or null when the text is not a whole call (cut by max_tokens). */
export function toolCallFromText(text: string, id: string): ToolCall | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const call = z.object({ name: z.string().min(1), arguments: z.unknown() }).safeParse(parsed);
  if (!call.success) return null;
  return {
    id,
    type: "function",
    function: { name: call.data.name, arguments: JSON.stringify(call.data.arguments ?? {}) },
  };
}

/** A fresh tool-call id in OpenAI's style. */
export function newToolCallId(): string {
  return `call_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

interface ChatChoice {
  message?: { content?: string | null; [k: string]: unknown };
  finish_reason?: string | null;
  [k: string]: unknown;
}

/** Turns a forced, non-streamed engine reply's JSON text into the tool call it encodes. */
export function forcedReply<T extends { choices?: ChatChoice[] }>(out: T): T {
  return {
    ...out,
    choices: (out.choices ?? []).map((c) => {
      const call = toolCallFromText(c.message?.content ?? "", newToolCallId());
      if (!call) return c;
      return {
        ...c,
        message: { ...c.message, content: null, tool_calls: [call] },
        finish_reason: "tool_calls",
      };
    }),
  };
}
