import { describe, expect, it } from "vitest";
import { ModelCardSchema } from "../../src/models/card.ts";
import {
  chatToEngine,
  doneFields,
  fromChatReply,
  generateToEngine,
  humanCount,
  manifestDigest,
  OllamaChatRequest,
  OllamaGenerateRequest,
  OllamaStreamTranslator,
  tagEntry,
  toChatMessages,
} from "../../src/serving/ollama.ts";

const chat = (extra: Record<string, unknown>) =>
  OllamaChatRequest.parse({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });
const chunk = (delta: Record<string, unknown>, finish: string | null = null, extra = {}) =>
  JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }], ...extra });
const lines = (text: string) => text.split("\n").filter(Boolean).map((l) => JSON.parse(l));

describe("Ollama requests → Chat Completions", () => {
  it("streams unless stream:false, and asks for usage when it streams", () => {
    expect(chatToEngine(chat({}), 100)).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(chatToEngine(chat({ stream: false }), 100).stream).toBeUndefined();
  });

  it("maps options: num_predict (the node's bound when -1), sampling, a single stop word, seed", () => {
    const out = chatToEngine(
      chat({
        options: { num_predict: 7, temperature: 0.2, top_p: 0.9, top_k: 5, seed: 3, stop: "END", num_ctx: 9 },
      }),
      100,
    );
    expect(out).toMatchObject({
      max_tokens: 7,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 5,
      seed: 3,
      stop: ["END"],
    });
    expect(out).not.toHaveProperty("num_ctx");
    expect(chatToEngine(chat({ options: { num_predict: -1 } }), 100).max_tokens).toBe(100);
    expect(chatToEngine(chat({}), 100).max_tokens).toBe(100);
  });

  it("turns format json and a JSON schema into response_format", () => {
    expect(chatToEngine(chat({ format: "json" }), 1).response_format).toEqual({ type: "json_object" });
    const schema = { type: "object", properties: { a: { type: "integer" } } };
    expect(chatToEngine(chat({ format: schema }), 1).response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "format", schema },
    });
    expect(chatToEngine(chat({ format: "" }), 1)).not.toHaveProperty("response_format");
    expect(OllamaChatRequest.safeParse({ model: "m", messages: [], format: 3 }).success).toBe(false);
  });

  it("passes tools, and think as enable_thinking", () => {
    const tool = { type: "function", function: { name: "f", parameters: { type: "object" } } };
    const out = chatToEngine(chat({ tools: [tool], think: false }), 1);
    expect(out.tools).toEqual([tool]);
    expect(out.chat_template_kwargs).toEqual({ enable_thinking: false });
    expect(out).not.toHaveProperty("tool_choice");
  });

  it("gives tool calls ids and answers each tool result to its call, by tool name", () => {
    const msgs = toChatMessages(
      OllamaChatRequest.parse({
        model: "m",
        messages: [
          { role: "user", content: "q", images: ["/9j/AAAA"] },
          {
            role: "assistant",
            content: "",
            tool_calls: [
              { function: { name: "a", arguments: { x: 1 } } },
              { function: { name: "b", arguments: {} } },
            ],
          },
          { role: "tool", content: "rb", tool_name: "b" },
          { role: "tool", content: "ra", tool_name: "a" },
        ],
      }).messages,
    );
    expect(msgs[0]).toEqual({
      role: "user",
      content: [{ type: "text", text: "q" }, {
        type: "image_url",
        image_url: { url: "data:image/jpeg;base64,/9j/AAAA" },
      }],
    });
    const calls = msgs[1].tool_calls as { id: string; function: { name: string; arguments: string } }[];
    expect(msgs[1].content).toBeNull();
    expect(calls[0].function).toEqual({ name: "a", arguments: '{"x":1}' });
    expect(msgs[2]).toEqual({ role: "tool", tool_call_id: calls[1].id, content: "rb" });
    expect(msgs[3]).toEqual({ role: "tool", tool_call_id: calls[0].id, content: "ra" });
  });

  it("makes generate a one-turn chat with its system prompt", () => {
    const out = generateToEngine(
      OllamaGenerateRequest.parse({ model: "m", prompt: "p", system: "s", stream: false }),
      9,
    );
    expect(out.messages).toEqual([{ role: "system", content: "s" }, { role: "user", content: "p" }]);
    expect(out.stream).toBeUndefined();
  });
});

describe("Chat Completions replies → Ollama", () => {
  const reply = {
    choices: [{
      message: {
        content: "",
        reasoning_content: "hmm",
        tool_calls: [{ id: "call_1", function: { name: "f", arguments: '{"a":2}' } }],
      },
      finish_reason: "tool_calls",
    }],
    usage: { prompt_tokens: 4, completion_tokens: 6 },
    timings: { prompt_n: 4, prompt_ms: 1.5, predicted_n: 6, predicted_ms: 20 },
  };

  it("a chat reply: message with thinking and tool_calls (arguments an object), counts, nanoseconds", () => {
    expect(fromChatReply(reply, "chat", "m", "T", 30)).toEqual({
      model: "m",
      created_at: "T",
      message: {
        role: "assistant",
        content: "",
        thinking: "hmm",
        tool_calls: [{ function: { name: "f", arguments: { a: 2 } } }],
      },
      done: true,
      done_reason: "tool_call",
      total_duration: 30_000_000,
      load_duration: 0,
      prompt_eval_count: 4,
      prompt_eval_duration: 1_500_000,
      eval_count: 6,
      eval_duration: 20_000_000,
    });
  });

  it("a generate reply: response text and done_reason length", () => {
    const r = fromChatReply(
      { choices: [{ message: { content: "abc" }, finish_reason: "length" }] },
      "generate",
      "m",
      "T",
      1,
    );
    expect(r).toMatchObject({ response: "abc", done: true, done_reason: "length", eval_count: 0 });
    expect(r).not.toHaveProperty("message");
  });

  it("done fields fall back to the engine's timings for counts", () => {
    expect(doneFields("stop", null, { prompt_n: 3, predicted_n: 2 }, 0)).toMatchObject({
      done_reason: "stop",
      prompt_eval_count: 3,
      eval_count: 2,
    });
  });
});

describe("the NDJSON stream translator", () => {
  const translator = (mode: "chat" | "generate") =>
    new OllamaStreamTranslator(mode, "m", 0, () => 5, () => "T");

  it("one line per delta, then a done line with usage and timings", () => {
    const t = translator("chat");
    let out = t.head();
    out += t.push(chunk({ role: "assistant" }));
    out += t.push(chunk({ reasoning_content: "r" }));
    out += t.push(chunk({ content: "He" }));
    out += t.push(chunk({ content: "y" }, "stop", { timings: { prompt_ms: 2, predicted_ms: 3 } }));
    out += t.push(JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } }));
    out += t.push("[DONE]");
    expect(t.done).toBe(true);
    expect(lines(out)).toEqual([
      {
        model: "m",
        created_at: "T",
        message: { role: "assistant", content: "", thinking: "r" },
        done: false,
      },
      { model: "m", created_at: "T", message: { role: "assistant", content: "He" }, done: false },
      { model: "m", created_at: "T", message: { role: "assistant", content: "y" }, done: false },
      {
        model: "m",
        created_at: "T",
        message: { role: "assistant", content: "" },
        done: true,
        done_reason: "stop",
        total_duration: 5_000_000,
        load_duration: 0,
        prompt_eval_count: 3,
        prompt_eval_duration: 2_000_000,
        eval_count: 2,
        eval_duration: 3_000_000,
      },
    ]);
  });

  it("tool call arguments are gathered and sent whole before the done line", () => {
    const t = translator("chat");
    let out = t.push(
      chunk({ tool_calls: [{ index: 0, id: "c", function: { name: "f", arguments: '{"a"' } }] }),
    );
    out += t.push(chunk({ tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }, "tool_calls"));
    expect(out).toBe("");
    const [call, done] = lines(t.end());
    expect(call.message.tool_calls).toEqual([{ function: { name: "f", arguments: { a: 1 } } }]);
    expect(done).toMatchObject({ done: true, done_reason: "tool_call" });
  });

  it("a forced call's held JSON text becomes the tool call", () => {
    const t = translator("chat").holdContentAsToolCall();
    expect(t.push(chunk({ content: '{"name":"f","arguments":{"a":1}}' }, "stop"))).toBe("");
    const [call, done] = lines(t.end());
    expect(call.message.tool_calls).toEqual([{ function: { name: "f", arguments: { a: 1 } } }]);
    expect(done.done_reason).toBe("tool_call");
  });

  it("generate lines carry response; an error ends the stream with an error line and nothing after", () => {
    const t = translator("generate");
    expect(lines(t.push(chunk({ content: "x" })))).toEqual([{
      model: "m",
      created_at: "T",
      response: "x",
      done: false,
    }]);
    expect(lines(t.push(JSON.stringify({ error: { message: "engine died" } })))).toEqual([{
      error: "engine died",
    }]);
    expect(t.push(chunk({ content: "y" }))).toBe("");
    expect(t.end()).toBe("");
  });
});

describe("catalogue shapes", () => {
  it("a tag entry names the model and its size", () => {
    const card = ModelCardSchema.parse({
      model_id: "org/a",
      storage_size: { in_bytes: 42 },
      n_layers: 1,
      hidden_size: 1,
      supports_tensor: false,
      tasks: ["TextGeneration"],
      family: "llama",
      quantization: "Q4_K_M",
    });
    const entry = tagEntry("org/a", card, new Date(0), { parameterCount: 8_030_261_248 });
    expect(entry).toEqual({
      name: "org/a",
      model: "org/a",
      modified_at: "1970-01-01T00:00:00.000Z",
      size: 42,
      digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      details: {
        parent_model: "",
        format: "gguf",
        family: "llama",
        families: ["llama"],
        parameter_size: "8.0B",
        quantization_level: "Q4_K_M",
      },
    });
    // The digest is the manifest's: stable, and changed by another revision or size.
    expect(tagEntry("org/a", card, new Date(5)).digest).toBe(entry.digest);
    expect(manifestDigest("org/a", { ...card, source_revision: "abc" })).not.toBe(entry.digest);
    expect(manifestDigest("org/a", { ...card, storage_size: { in_bytes: 43 } })).not.toBe(entry.digest);
  });

  it("writes parameter counts as Ollama does", () => {
    expect(humanCount(8_000_000_000)).toBe("8B");
    expect(humanCount(3_212_749_824)).toBe("3.2B");
    expect(humanCount(494_032_768)).toBe("494.03M");
    expect(humanCount(2_245_184)).toBe("2.25M");
    expect(humanCount(137_000)).toBe("137K");
    expect(humanCount(999)).toBe("999");
  });
});
