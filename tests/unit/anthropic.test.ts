import { describe, expect, it } from "vitest";
import {
  anthropicError,
  AnthropicStreamTranslator,
  fromChatReply,
  MessagesRequest,
  stopReason,
  thinkingSignature,
  toChatRequest,
} from "../../src/serving/anthropic.ts";

const req = (extra: Record<string, unknown>) =>
  MessagesRequest.parse({
    model: "m",
    max_tokens: 10,
    messages: [{ role: "user", content: "hi" }],
    ...extra,
  });

/** Parses SSE text into [event, data] pairs. */
function events(text: string): [string, Record<string, unknown>][] {
  return text.split("\n\n").filter(Boolean).map((e) => {
    const [ev, data] = e.split("\n");
    return [ev.slice("event: ".length), JSON.parse(data.slice("data: ".length))];
  });
}
const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra = {}) =>
  JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }], ...extra });

describe("Anthropic Messages → Chat Completions", () => {
  it.each([
    ["a string system", { system: "be brief" }, [{ role: "system", content: "be brief" }, {
      role: "user",
      content: "hi",
    }]],
    [
      "system blocks",
      { system: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
      [{ role: "system", content: "a\nb" }, { role: "user", content: "hi" }],
    ],
    [
      "multi-turn with text blocks",
      {
        messages: [
          { role: "user", content: [{ type: "text", text: "x" }, { type: "text", text: "y" }] },
          { role: "assistant", content: "ok" },
          { role: "user", content: "z" },
        ],
      },
      [{ role: "user", content: "xy" }, { role: "assistant", content: "ok" }, { role: "user", content: "z" }],
    ],
    [
      "an image",
      {
        messages: [{
          role: "user",
          content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAA" } }, {
            type: "text",
            text: "what?",
          }],
        }],
      },
      [{
        role: "user",
        content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAA" } }, {
          type: "text",
          text: "what?",
        }],
      }],
    ],
    [
      "tool_use then tool_result",
      {
        messages: [
          { role: "user", content: "weather?" },
          {
            role: "assistant",
            content: [{ type: "text", text: "let me look" }, {
              type: "tool_use",
              id: "toolu_1",
              name: "w",
              input: { c: "P" },
            }],
          },
          {
            role: "user",
            content: [{
              type: "tool_result",
              tool_use_id: "toolu_1",
              content: [{ type: "text", text: "3C" }],
            }, {
              type: "text",
              text: "and?",
            }],
          },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_2", name: "w", input: {} }] },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "toolu_2", content: "boom", is_error: true }],
          },
        ],
      },
      [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: "let me look",
          tool_calls: [{ id: "toolu_1", type: "function", function: { name: "w", arguments: '{"c":"P"}' } }],
        },
        { role: "tool", tool_call_id: "toolu_1", content: "3C" },
        { role: "user", content: "and?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "toolu_2", type: "function", function: { name: "w", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "toolu_2", content: "Error: boom" },
      ],
    ],
  ])("translates %s", (_what, extra, messages) => {
    expect(toChatRequest(req(extra)).messages).toEqual(messages);
  });

  it.each([
    [{ type: "auto" }, "auto", undefined],
    [{ type: "any" }, "required", undefined],
    [{ type: "tool", name: "w" }, { type: "function", function: { name: "w" } }, undefined],
    [{ type: "none" }, "none", undefined],
    [{ type: "any", disable_parallel_tool_use: true }, "required", false],
  ])("maps tool_choice %j to %j", (choice, mapped, parallel) => {
    const r = toChatRequest(
      req({ tools: [{ name: "w", input_schema: { type: "object" } }], tool_choice: choice }),
    );
    expect(r.tool_choice).toEqual(mapped);
    expect(r.parallel_tool_calls).toBe(parallel);
    expect(r.tools).toEqual([{ type: "function", function: { name: "w", parameters: { type: "object" } } }]);
  });

  it("carries sampling, stop sequences (asking the engine which one hit) and streaming", () => {
    const r = toChatRequest(
      req({ stop_sequences: ["END"], temperature: 0.5, top_p: 0.9, top_k: 3, stream: true }),
    );
    expect(r).toMatchObject({
      max_tokens: 10,
      stop: ["END"],
      verbose: true,
      temperature: 0.5,
      top_p: 0.9,
      top_k: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(toChatRequest(req({})).verbose).toBeUndefined();
  });

  it.each([
    [{ max_tokens: undefined }, /max_tokens/],
    [{ messages: [] }, /messages/],
    [{ messages: [{ role: "system", content: "x" }] }, /role/],
    [{ tool_choice: { type: "tool" } }, /name/],
    [{ messages: [{ role: "user", content: [{ type: "video" }] }] }, /type/],
  ])("refuses %j", (extra, re) => {
    const r = MessagesRequest.safeParse({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi" }],
      ...extra,
    });
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toMatch(re);
  });
});

describe("Chat Completions → Anthropic Messages", () => {
  it.each([
    ["stop", null, "end_turn"],
    ["stop", "END", "stop_sequence"],
    ["length", null, "max_tokens"],
    ["tool_calls", null, "tool_use"],
    [null, null, "end_turn"],
  ])("finish %s (stop word %s) is %s", (finish, word, reason) => {
    expect(stopReason(finish, word)).toBe(reason);
  });

  it("turns a reply with reasoning, text and a tool call into blocks in that order", () => {
    const m = fromChatReply(
      {
        choices: [{
          message: {
            content: "hi",
            reasoning_content: "hmm",
            tool_calls: [{ id: "call_9", function: { name: "w", arguments: '{"c":1}' } }],
          },
          finish_reason: "tool_calls",
        }],
        usage: { prompt_tokens: 5, completion_tokens: 7 },
      },
      "msg_1",
      "m",
    );
    expect(m).toEqual({
      id: "msg_1",
      type: "message",
      role: "assistant",
      model: "m",
      content: [
        { type: "thinking", thinking: "hmm", signature: thinkingSignature("hmm") },
        { type: "text", text: "hi" },
        { type: "tool_use", id: "toolu_9", name: "w", input: { c: 1 } },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 5, output_tokens: 7 },
    });
  });

  it("names the stop sequence the engine reports, and an empty reply still has one text block", () => {
    const m = fromChatReply(
      {
        choices: [{ message: { content: "" }, finish_reason: "stop" }],
        __verbose: { stopping_word: "END" },
      },
      "msg_1",
      "m",
    );
    expect(m.content).toEqual([{ type: "text", text: "" }]);
    expect(m.stop_reason).toBe("stop_sequence");
    expect(m.stop_sequence).toBe("END");
  });

  it("streams text in Anthropic's event sequence with usage at the end", () => {
    const t = new AnthropicStreamTranslator("msg_1", "m");
    const text = t.head() + t.push(chunk({ role: "assistant", content: "" })) +
      t.push(chunk({ content: "He" })) +
      t.push(chunk({ content: "llo" })) + t.push(chunk({}, "length")) +
      t.push(JSON.stringify({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } })) +
      t.push("[DONE]");
    const evs = events(text);
    expect(evs.map(([e]) => e)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(evs.every(([e, d]) => d.type === e)).toBe(true);
    expect(evs[2][1]).toEqual({
      type: "content_block_start",
      index: 0,
      content_block: { type: "text", text: "" },
    });
    expect(evs[4][1]).toEqual({
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: "llo" },
    });
    expect(evs[6][1]).toEqual({
      type: "message_delta",
      delta: { stop_reason: "max_tokens", stop_sequence: null },
      usage: { input_tokens: 4, output_tokens: 2 },
    });
    expect(t.done).toBe(true);
    expect(t.push(chunk({ content: "late" }))).toBe("");
  });

  it("streams thinking, then text, then a tool call with input_json_delta, each its own block", () => {
    const t = new AnthropicStreamTranslator("msg_1", "m");
    const text = t.push(chunk({ reasoning_content: "think" })) + t.push(chunk({ content: "ok" })) +
      t.push(
        chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "w", arguments: '{"c"' } }] }),
      ) +
      t.push(chunk({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] })) +
      t.push(chunk({}, "tool_calls")) + t.end();
    const evs = events(text);
    const starts = evs.filter(([e]) => e === "content_block_start").map(([, d]) => d);
    expect(starts.map((s) => [s.index, (s.content_block as { type: string }).type])).toEqual([
      [0, "thinking"],
      [1, "text"],
      [2, "tool_use"],
    ]);
    expect(starts[2].content_block).toEqual({ type: "tool_use", id: "toolu_1", name: "w", input: {} });
    const json = evs.filter(([, d]) => (d.delta as { type?: string })?.type === "input_json_delta")
      .map(([, d]) => (d.delta as { partial_json: string }).partial_json).join("");
    expect(JSON.parse(json)).toEqual({ c: 1 });
    expect(evs.filter(([e]) => e === "content_block_stop").map(([, d]) => d.index)).toEqual([0, 1, 2]);
    expect((evs.at(-2)![1].delta as { stop_reason: string }).stop_reason).toBe("tool_use");
  });

  it("sends a held forced call as one tool_use block, an empty reply as one empty text block", () => {
    const t = new AnthropicStreamTranslator("msg_1", "m").holdContentAsToolCall();
    const text = t.push(chunk({ content: '{"name":"w",' })) +
      t.push(chunk({ content: '"arguments":{"c":2}}' })) +
      t.push(chunk({}, "stop")) + t.end();
    const evs = events(text);
    expect(evs.map(([e]) => e)).toEqual([
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect((evs[0][1].content_block as { type: string; name: string }).name).toBe("w");
    expect(evs[1][1].delta).toEqual({ type: "input_json_delta", partial_json: '{"c":2}' });
    expect((evs[3][1].delta as { stop_reason: string }).stop_reason).toBe("tool_use");

    const empty = events(new AnthropicStreamTranslator("msg_2", "m").end());
    expect(empty.map(([e]) => e)).toEqual([
      "content_block_start",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  });

  it("ends a failed stream with Anthropic's error event", () => {
    const t = new AnthropicStreamTranslator("msg_1", "m");
    expect(events(t.fail("engine died"))).toEqual([[
      "error",
      { type: "error", error: { type: "overloaded_error", message: "engine died" } },
    ]]);
    expect(t.end()).toBe("");
    expect(anthropicError(404, "x").error.type).toBe("not_found_error");
    expect(anthropicError(400, "x").error.type).toBe("invalid_request_error");
  });
});
