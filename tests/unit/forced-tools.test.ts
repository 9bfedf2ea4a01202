import { describe, expect, it } from "vitest";
import { ChatStreamTranslator } from "../../src/serving/chat-stream.ts";
import {
  type ChatTool,
  forcedCallSchema,
  forcedReply,
  forcedTools,
  forceToolCall,
  toolCallFromText,
  ToolRequestError,
} from "../../src/serving/forced-tools.ts";

const tool = (name: string, parameters?: Record<string, unknown>): ChatTool => ({
  type: "function",
  function: { name, ...(parameters ? { parameters } : {}) },
});
const A = tool("a", { type: "object", properties: { x: { type: "integer" } }, required: ["x"] });
const B = tool("b");

describe("forced tool calls", () => {
  it.each([
    [undefined, null],
    ["auto" as const, null],
    ["none" as const, null],
    ["required" as const, ["a", "b"]],
    [{ type: "function" as const, function: { name: "b" } }, ["b"]],
  ])("tool_choice %j forces %j", (choice, names) => {
    expect(forcedTools([A, B], choice)?.map((t) => t.function.name) ?? null).toEqual(names);
  });

  it.each([
    [[], "required" as const, /no tools were given/],
    [[A], { type: "function" as const, function: { name: "zz" } }, /"zz", which is not among the tools/],
  ])("refuses %j with %j", (tools, choice, re) => {
    expect(() => forcedTools(tools, choice)).toThrow(ToolRequestError);
    expect(() => forcedTools(tools, choice)).toThrow(re);
  });

  it("builds one schema per tool, the name a constant, and a choice between several", () => {
    expect(forcedCallSchema([A])).toEqual({
      type: "object",
      properties: { name: { const: "a" }, arguments: A.function.parameters },
      required: ["name", "arguments"],
      additionalProperties: false,
    });
    const both = forcedCallSchema([A, B]) as { anyOf: { properties: { arguments: unknown } }[] };
    expect(both.anyOf).toHaveLength(2);
    expect(both.anyOf[1].properties.arguments).toEqual({ type: "object" });
  });

  it("rewrites a forced request to a schema-held reply and keeps the tools in the prompt", () => {
    const { request, forced } = forceToolCall({ model: "m", tools: [A], tool_choice: "required" });
    expect(forced).toBe(true);
    expect(request.tools).toEqual([A]);
    expect(request.tool_choice).toBe("none");
    expect(request.response_format).toMatchObject({
      type: "json_schema",
      json_schema: { name: "tool_call" },
    });
    const plain = { model: "m", tools: [A], tool_choice: "auto" as const };
    expect(forceToolCall(plain)).toEqual({ request: plain, forced: false });
    expect(() =>
      forceToolCall({ ...plain, tool_choice: "required", response_format: { type: "json_object" } })
    )
      .toThrow(/response_format cannot be combined/);
  });

  it.each([
    ['{"name":"a","arguments":{"x":1}}', { name: "a", arguments: '{"x":1}' }],
    ['{"name":"b","arguments":{}}', { name: "b", arguments: "{}" }],
    ['{"name":"a","arguments":{"x":', null],
    ['{"arguments":{}}', null],
    ["hello", null],
  ])("reads %s as %j", (text, fn) => {
    const call = toolCallFromText(text, "call_1");
    expect(call ? call.function : null).toEqual(fn);
  });

  it("turns a non-streamed reply into a tool call, and leaves a cut-short one as text", () => {
    const out = forcedReply({
      choices: [{
        index: 0,
        message: { role: "assistant", content: '{"name":"a","arguments":{"x":2}}' },
        finish_reason: "stop",
      }],
    });
    expect(out.choices[0].finish_reason).toBe("tool_calls");
    expect(out.choices[0].message).toMatchObject({
      content: null,
      tool_calls: [{ type: "function", function: { name: "a", arguments: '{"x":2}' } }],
    });
    const cut = { choices: [{ message: { content: '{"name":"a","argu' }, finish_reason: "length" }] };
    expect(forcedReply(cut)).toEqual(cut);
  });

  it("holds a streamed forced reply's text and sends it as one whole tool call", () => {
    const t = new ChatStreamTranslator("cmd", "m", 1).holdContentAsToolCall();
    const delta = (content: string) =>
      JSON.stringify({
        choices: [{ finish_reason: null, index: 0, delta: { content } }],
        created: 1,
        id: "x",
        model: "m",
        system_fingerprint: "f",
        object: "chat.completion.chunk",
      });
    const sent = [delta('{"name":'), delta('"a","arguments":{"x"'), delta(":3}}")].map((p) => t.push(p)).join(
      "",
    );
    expect(sent).toBe("");
    const end = t.end();
    const chunks = end.split("\n\n").filter((l) => l.startsWith("data: {")).map((l) =>
      JSON.parse(l.slice(6))
    );
    expect(chunks).toHaveLength(1);
    expect(chunks[0].choices[0].finish_reason).toBe("tool_calls");
    expect(chunks[0].choices[0].delta.tool_calls[0].function).toMatchObject({
      name: "a",
      arguments: '{"x":3}',
    });

    const cut = new ChatStreamTranslator("cmd", "m", 1).holdContentAsToolCall();
    cut.push(delta('{"name":"a"'));
    const text = cut.end().split("\n\n").filter((l) => l.startsWith("data: {")).map((l) =>
      JSON.parse(l.slice(6))
    );
    expect(text[0].choices[0].delta.content).toBe('{"name":"a"');
  });
});
