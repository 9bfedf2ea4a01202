/**
 * The client APIs on one real node with the tiny model, judged by the official SDKs: tool calls end to end
 * through Chat Completions (a forced call is schema-valid JSON even with random weights) and Anthropic Messages.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import {
  engineBusy,
  enginePort,
  expectWeatherArgs,
  sdkClients,
  WEATHER,
  WEATHER_FN,
} from "../helpers/engine-probe.ts";
import { placeReady } from "../helpers/cluster.ts";

const MODEL = "skulk-test/tiny-tools";
const LONG = 300_000;

/**
 * Arguments a random-weight model can only fill in validly when the grammar holds it to the schema. Bounded
 * values keep a forced call short (the grammar still allows some whitespace), well inside max_tokens.
 */
const TIME = {
  type: "function" as const,
  function: {
    name: "get_time",
    description: "Current time in a zone",
    parameters: {
      type: "object",
      properties: { zone: { type: "string", enum: ["UTC", "CET"] } },
      required: ["zone"],
      additionalProperties: false,
    },
  },
};

describe("client APIs through a real engine", () => {
  let node: Daemon;
  let openai: OpenAI;
  let anthropic: Anthropic;

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") } });
    ({ openai, anthropic } = sdkClients(node.url, LONG));
    await placeReady(node, MODEL, await tinyModel());
  }, LONG);
  afterAll(async () => {
    await node?.stop();
  });

  it("forces a named function: a tool call with schema-valid JSON arguments", async () => {
    const r = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "What is the weather in Paris?" }],
      tools: [WEATHER, TIME],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 256,
    });
    const choice = r.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls?.[0];
    expect(call?.type).toBe("function");
    if (call?.type !== "function") throw new Error("no function call");
    expect(call.id).toMatch(/^call_/);
    expect(call.function.name).toBe("get_weather");
    expectWeatherArgs(call.function.arguments);
  }, LONG);

  it("forces some call (required), streamed: the SDK assembles one call from the chunks", async () => {
    const stream = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Weather or time, please" }],
      tools: [WEATHER, TIME],
      tool_choice: "required",
      max_tokens: 256,
      stream: true,
    });
    const calls = new Map<number, { name: string; args: string }>();
    let finish: string | null = null;
    let text = "";
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      text += c?.delta?.content ?? "";
      for (const tc of c?.delta?.tool_calls ?? []) {
        const acc = calls.get(tc.index) ?? { name: "", args: "" };
        acc.name += tc.function?.name ?? "";
        acc.args += tc.function?.arguments ?? "";
        calls.set(tc.index, acc);
      }
      finish = c?.finish_reason ?? finish;
    }
    expect(text).toBe("");
    expect(finish).toBe("tool_calls");
    expect(calls.size).toBe(1);
    const call = calls.get(0)!;
    expect(["get_weather", "get_time"]).toContain(call.name);
    const args = JSON.parse(call.args);
    if (call.name === "get_weather") expectWeatherArgs(call.args);
    else expect(["UTC", "CET"]).toContain(args.zone);
  }, LONG);

  it("answers a tool result sent back with text", async () => {
    const first = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      tools: [WEATHER],
      tool_choice: "required",
      max_tokens: 256,
    });
    const call = first.choices[0].message.tool_calls![0];
    const second = await openai.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: '{"temperature_c": 3, "sky": "snow"}' },
      ],
      tools: [WEATHER],
      max_tokens: 12,
    });
    expect(second.choices[0].message.tool_calls ?? []).toEqual([]);
    expect((second.choices[0].message.content ?? "").length).toBeGreaterThan(0);
    // The tool result reached the prompt: it is longer than the question alone.
    expect(second.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens);
  }, LONG);

  it("refuses a forced call to a function that is not among the tools", async () => {
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "x" }],
        tools: [WEATHER],
        tool_choice: { type: "function", function: { name: "launch" } },
      }),
    });
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.error.param).toBe("tool_choice");
    expect(body.error.message).toMatch(/"launch", which is not among the tools/);
  }, LONG);

  const WEATHER_TOOL: Anthropic.Tool = {
    name: WEATHER.function.name,
    description: WEATHER.function.description,
    input_schema: WEATHER.function.parameters as Anthropic.Tool.InputSchema,
  };

  it("Messages: a plain message", async () => {
    const m = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 12,
      system: "You are terse.",
      messages: [{ role: "user", content: "Hello there" }],
    });
    expect(m.type).toBe("message");
    expect(m.id).toMatch(/^msg_/);
    expect(m.model).toBe(MODEL);
    expect(m.role).toBe("assistant");
    expect(m.content[0].type).toBe("text");
    expect((m.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    // Random weights never pick end-of-text: the reply runs to max_tokens.
    expect(m.stop_reason).toBe("max_tokens");
    expect(m.usage.output_tokens).toBe(12);
    expect(m.usage.input_tokens).toBeGreaterThan(0);
  }, LONG);

  it("Messages: a stop sequence ends the reply and is named", async () => {
    // The tiny model's nonsense words are separated by spaces, so a space comes within a few tokens.
    const m = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 60,
      stop_sequences: [" "],
      messages: [{ role: "user", content: "Hello there" }],
    });
    expect(m.stop_reason).toBe("stop_sequence");
    expect(m.stop_sequence).toBe(" ");
    expect(m.usage.output_tokens).toBeLessThan(60);
  }, LONG);

  it("Messages: streamed, the SDK's finalMessage assembles the events", async () => {
    const stream = anthropic.messages.stream({
      model: MODEL,
      max_tokens: 10,
      messages: [
        { role: "user", content: "Tell me a story" },
        { role: "assistant", content: "Once" },
        { role: "user", content: [{ type: "text", text: "Go on" }] },
      ],
    });
    const seen: string[] = [];
    let deltas = "";
    stream.on("streamEvent", (e) => seen.push(e.type));
    stream.on("text", (t) => (deltas += t));
    const m = await stream.finalMessage();
    expect(seen[0]).toBe("message_start");
    expect(seen.at(-1)).toBe("message_stop");
    expect(seen).toContain("content_block_delta");
    const text = (m.content[0] as Anthropic.TextBlock).text;
    expect(text.length).toBeGreaterThan(0);
    expect(text).toBe(deltas);
    expect(m.stop_reason).toBe("max_tokens");
    expect(m.usage.output_tokens).toBe(10);
    expect(m.usage.input_tokens).toBeGreaterThan(0);
  }, LONG);

  it(
    "Messages: a forced tool call is a tool_use block with schema-valid input, streamed or not",
    async () => {
      const params = {
        model: MODEL,
        max_tokens: 256,
        tools: [WEATHER_TOOL],
        tool_choice: { type: "tool" as const, name: "get_weather" },
        messages: [{ role: "user" as const, content: "Weather in Paris?" }],
      };
      const m = await anthropic.messages.create(params);
      expect(m.stop_reason).toBe("tool_use");
      const use = m.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
      expect(use.id).toMatch(/^toolu_/);
      expect(use.name).toBe("get_weather");
      expectWeatherArgs(JSON.stringify(use.input));

      const streamed = await anthropic.messages.stream({ ...params, tool_choice: { type: "any" } })
        .finalMessage();
      expect(streamed.stop_reason).toBe("tool_use");
      const s = streamed.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
      expect(s.name).toBe("get_weather");
      expectWeatherArgs(JSON.stringify(s.input));
    },
    LONG,
  );

  it("Messages: a tool_result sent back is answered with text", async () => {
    const question = { role: "user" as const, content: "Weather in Oslo?" };
    const first = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 256,
      tools: [WEATHER_TOOL],
      tool_choice: { type: "any" },
      messages: [question],
    });
    const use = first.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    const second = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 12,
      tools: [WEATHER_TOOL],
      messages: [
        question,
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{
            type: "tool_result",
            tool_use_id: use.id,
            content: '{"temperature_c": 3, "sky": "snow"}',
          }],
        },
      ],
    });
    expect(second.content.some((b) => b.type === "tool_use")).toBe(false);
    expect((second.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    expect(second.usage.input_tokens).toBeGreaterThan(first.usage.input_tokens);
  }, LONG);

  it("Messages: count_tokens counts the prompt as the engine will see it, tools included", async () => {
    const messages = [{ role: "user" as const, content: "Weather in Oslo?" }];
    const plain = await anthropic.messages.countTokens({ model: MODEL, messages });
    const withTools = await anthropic.messages.countTokens({ model: MODEL, messages, tools: [WEATHER_TOOL] });
    expect(plain.input_tokens).toBeGreaterThan(3);
    expect(withTools.input_tokens).toBeGreaterThan(plain.input_tokens + 20);
    const generated = await anthropic.messages.create({ model: MODEL, max_tokens: 1, messages });
    expect(generated.usage.input_tokens).toBe(plain.input_tokens);
  }, LONG);

  it(
    "Messages: errors in Anthropic's shape (unknown model 404, bad request 400)",
    async () => {
      const err = await anthropic.messages.create({
        model: "no/such-model",
        max_tokens: 5,
        messages: [{ role: "user", content: "x" }],
      }).catch((e) => e);
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
      expect(err.status).toBe(404);
      expect(err.error).toEqual({
        type: "error",
        error: { type: "not_found_error", message: "No instance found for model no/such-model" },
      });
      const res = await fetch(`${node.url}/v1/messages`, {
        method: "POST",
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x" }] }),
      });
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.type).toBe("error");
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toMatch(/max_tokens/);
    },
    LONG,
  );

  it("Messages: a streaming client that goes away stops the generation at the engine", async () => {
    const port = await enginePort(node);
    expect(await engineBusy(port, false)).toBe(true);
    const abort = new AbortController();
    const res = await fetch(`${node.url}/v1/messages`, {
      method: "POST",
      body: JSON.stringify({
        model: MODEL,
        max_tokens: 1500,
        stream: true,
        messages: [{ role: "user", content: "Go on forever" }],
      }),
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    let got = "";
    while (!got.includes("content_block_delta")) got += new TextDecoder().decode((await reader.read()).value);
    abort.abort();
    // Idle long before 1500 tokens (tens of seconds here) would be done.
    expect(await engineBusy(port, false)).toBe(true);
  }, LONG);

  it("Responses: string input with instructions, not streamed", async () => {
    const r = await openai.responses.create({
      model: MODEL,
      instructions: "Be terse.",
      input: "Hello there",
      max_output_tokens: 12,
    });
    expect(r.object).toBe("response");
    expect(r.id).toMatch(/^resp_/);
    expect(r.model).toBe(MODEL);
    // Random weights never end the text themselves: the reply runs to max_output_tokens.
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details?.reason).toBe("max_output_tokens");
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.output[0].type).toBe("message");
    expect(r.usage?.output_tokens).toBe(12);
    expect(r.usage?.input_tokens).toBeGreaterThan(0);
  }, LONG);

  it("Responses: streamed, the SDK's finalResponse assembles the events", async () => {
    const stream = openai.responses.stream({
      model: MODEL,
      input: [{ role: "user", content: [{ type: "input_text", text: "Tell me a story" }] }],
      max_output_tokens: 10,
    });
    const types: string[] = [];
    let deltas = "";
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === "response.output_text.delta") deltas += e.delta;
    }
    const r = await stream.finalResponse();
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_item.added");
    expect(types.at(-1)).toBe("response.incomplete");
    expect(r.output_text).toBe(deltas);
    expect(deltas.length).toBeGreaterThan(0);
    expect(r.usage?.output_tokens).toBe(10);
  }, LONG);

  it("Responses: a forced function call, streamed or not, and its output sent back is answered", async () => {
    const params = {
      model: MODEL,
      input: "Weather in Paris?",
      tools: [WEATHER_FN],
      tool_choice: { type: "function" as const, name: "get_weather" },
      max_output_tokens: 256,
    };
    const r = await openai.responses.create(params);
    const call = r.output.find((o) => o.type === "function_call");
    if (call?.type !== "function_call") throw new Error(`no function call in ${JSON.stringify(r.output)}`);
    expect(call.name).toBe("get_weather");
    expectWeatherArgs(call.arguments);

    const stream = openai.responses.stream({ ...params, tool_choice: "required" });
    let args = "";
    for await (const e of stream) if (e.type === "response.function_call_arguments.delta") args += e.delta;
    const streamed = await stream.finalResponse();
    const s = streamed.output.find((o) => o.type === "function_call");
    if (s?.type !== "function_call") throw new Error("no streamed function call");
    expect(s.arguments).toBe(args);
    expectWeatherArgs(s.arguments);

    const answer = await openai.responses.create({
      model: MODEL,
      tools: [WEATHER_FN],
      max_output_tokens: 12,
      input: [
        { role: "user", content: "Weather in Paris?" },
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.call_id, output: '{"temperature_c": 21}' },
      ],
    });
    expect(answer.output.some((o) => o.type === "function_call")).toBe(false);
    expect(answer.output_text.length).toBeGreaterThan(0);
    expect(answer.usage!.input_tokens).toBeGreaterThan(r.usage!.input_tokens);
  }, LONG);

  it("Responses: refuses an unknown model clearly", async () => {
    const missing = await openai.responses.create({ model: "no/such-model", input: "x" }).catch((e) => e);
    expect(missing.status).toBe(404);
  }, LONG);
});

describe("Anthropic clients on a node with an API key", () => {
  const KEY = "clients-test-key-0123456789";
  let node: Daemon;
  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_API_KEY: KEY } });
  }, LONG);
  afterAll(async () => {
    await node?.stop();
  });

  it(
    "accepts the key as x-api-key (Anthropic's wire convention) or a bearer token, refuses a wrong one",
    async () => {
      const post = (headers: Record<string, string>) =>
        fetch(`${node.url}/v1/messages`, {
          method: "POST",
          headers,
          body: JSON.stringify({
            model: "no/such-model",
            max_tokens: 5,
            messages: [{ role: "user", content: "x" }],
          }),
        }).then(async (r) => (await r.body?.cancel(), r.status));
      // Past the key check, the request reaches the model lookup: 404.
      expect(await post({ "x-api-key": KEY, "anthropic-version": "2023-06-01" })).toBe(404);
      expect(await post({ "x-api-key": "wrong-key-0123456789abcdef" })).toBe(401);
      expect(await post({})).toBe(401);
      // The SDK itself sends its apiKey as a bearer token.
      const sdk = await new Anthropic({ baseURL: node.url, apiKey: KEY, maxRetries: 0 }).messages.create({
        model: "no/such-model",
        max_tokens: 5,
        messages: [{ role: "user", content: "x" }],
      }).catch((e) => e);
      expect(sdk).toBeInstanceOf(Anthropic.NotFoundError);
    },
    LONG,
  );
});
