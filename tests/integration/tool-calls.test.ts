/**
 * Tool calls end to end on one real node: the tiny model's template declares tools, a forced call comes back
 * from the real llama-server as valid JSON arguments, and a tool result sent back is answered; official SDKs.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { placeReady } from "../helpers/cluster.ts";

const MODEL = "skulk-test/tiny-tools";
const LONG = 300_000;

/** Arguments a random-weight model can only fill in validly when the grammar holds it to the schema. */
const WEATHER = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", enum: ["Paris", "Oslo"] }, days: { type: "integer" } },
      required: ["city", "days"],
      additionalProperties: false,
    },
  },
};
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

function expectWeatherArgs(json: string) {
  const args = JSON.parse(json);
  expect(["Paris", "Oslo"]).toContain(args.city);
  expect(Number.isInteger(args.days)).toBe(true);
  expect(Object.keys(args).sort()).toEqual(["city", "days"]);
}

describe("tool calls through a real engine", () => {
  let node: Daemon;
  let openai: OpenAI;

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") } });
    openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: LONG });
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
      max_tokens: 64,
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
      max_tokens: 64,
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
      max_tokens: 64,
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
});
