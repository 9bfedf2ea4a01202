/**
 * The whole reply assembled from llama-server's streamed chat chunks: the shape of its non-streamed answer
 * (joined text and reasoning, tool calls, finish reason, usage, timings, verbose record), and error chunks.
 */
import { describe, expect, it } from "vitest";
import { ChatReplyAssembler, StreamedEngineError } from "../../src/serving/chat-reply.ts";

const head = { id: "chatcmpl-x", created: 1700000000, model: "m", system_fingerprint: "b1-abc" };
const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({ ...head, object: "chat.completion.chunk", choices, ...extra });

function assemble(payloads: string[]) {
  const a = new ChatReplyAssembler();
  for (const p of payloads) a.push(p);
  return a;
}

describe("ChatReplyAssembler", () => {
  it("joins text and reasoning into one message with usage and timings, keys in the engine's order", () => {
    const usage = { completion_tokens: 3, prompt_tokens: 5, total_tokens: 8 };
    const timings = { predicted_n: 3, prompt_n: 5 };
    const a = assemble([
      chunk([{ index: 0, delta: { role: "assistant", content: null }, finish_reason: null }]),
      chunk([{ index: 0, delta: { reasoning_content: "hm" }, finish_reason: null }]),
      chunk([{ index: 0, delta: { content: "Hel" }, finish_reason: null }]),
      chunk([{ index: 0, delta: { content: "lo" }, finish_reason: null }]),
      chunk([{ index: 0, delta: {}, finish_reason: "length" }]),
      chunk([], { usage, timings, __verbose: { stopping_word: "" } }),
      "[DONE]",
    ]);
    expect(a.done).toBe(true);
    const reply = a.reply();
    expect(JSON.stringify(reply)).toBe(JSON.stringify({
      __verbose: { stopping_word: "" },
      choices: [{
        finish_reason: "length",
        index: 0,
        message: { content: "Hello", reasoning_content: "hm", role: "assistant" },
      }],
      created: head.created,
      id: head.id,
      model: "m",
      object: "chat.completion",
      system_fingerprint: "b1-abc",
      timings,
      usage,
    }));
  });

  it("assembles tool calls from their deltas; an empty text is an empty string, as unstreamed", () => {
    const a = assemble([
      chunk([{
        index: 0,
        delta: {
          tool_calls: [{
            index: 0,
            id: "call_1",
            type: "function",
            function: { name: "get_", arguments: "" },
          }],
        },
      }]),
      chunk([{
        index: 0,
        delta: { tool_calls: [{ index: 0, function: { name: "weather", arguments: '{"a"' } }] },
      }]),
      chunk([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: ":1}" } }] } }]),
      chunk([{ index: 0, delta: {}, finish_reason: "tool_calls" }]),
      "[DONE]",
    ]);
    const choice = (a.reply().choices as Record<string, unknown>[])[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message).toEqual({
      content: "",
      role: "assistant",
      tool_calls: [{
        function: { arguments: '{"a":1}', name: "get_weather" },
        id: "call_1",
        type: "function",
      }],
    });
  });

  it("is not done without [DONE], and an error chunk throws the engine's error", () => {
    expect(assemble([chunk([{ index: 0, delta: { content: "x" } }])]).done).toBe(false);
    const a = new ChatReplyAssembler();
    expect(() => a.push(JSON.stringify({ error: { code: 500, message: "boom", type: "server_error" } })))
      .toThrow(StreamedEngineError);
  });
});
