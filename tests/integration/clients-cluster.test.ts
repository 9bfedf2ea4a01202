/**
 * The official SDKs against a node that does not drive the model: node A forwards every client API to node B,
 * whose engine generates, and the answers (forced tool calls included, streamed and not) come back in each
 * API's own shape; a Responses conversation continues through A because B, which generated it, keeps it.
 */
import type Anthropic from "@anthropic-ai/sdk";
import type { Ollama } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Daemon } from "../helpers/daemon.ts";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { tinyModel } from "../helpers/models.ts";
import { expectWeatherArgs, sdkClients, WEATHER, WEATHER_FN } from "../helpers/engine-probe.ts";
import {
  llamaNodes,
  localCardWire,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";

const MODEL = "skulk-test/tiny-forwarded";
const LONG = 300_000;
const nodes = llamaNodes();

describe("client APIs forwarded to the node that drives the model", () => {
  let a: Daemon;
  let b: Daemon;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;

  beforeAll(async () => {
    a = await nodes.start(["--force-master"]);
    b = await nodes.start(["--peer", `127.0.0.1:${a.port}`]);
    expect(await oneMaster([a.url, b.url])).toBe(a.nodeId);
    await waitFor("both nodes seeing each other", async () => {
      for (const u of [a.url, b.url]) {
        const s = await json<{ lastSeen: Record<string, string> }>(`${u}/state`);
        if (Object.keys(s.lastSeen).length !== 2) return false;
      }
      return true;
    });
    // The model runs on B only; the clients talk to A.
    const instance = singleNodeInstance(b.nodeId, localCardWire(MODEL, await tinyModel()));
    const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
    expect((await postInstance(a, instance, [a, b])).status).toBe(200);
    for (const u of [a.url, b.url]) {
      await waitForState(
        u,
        (s) => runnerTag(s, runnerId) === "RunnerReady",
        `the runner ready on ${u}`,
        180_000,
      );
    }
    ({ openai, anthropic, ollama } = sdkClients(a.url, LONG));
  }, LONG);
  afterAll(nodes.killAll);

  it("Chat Completions: a forced call, whole and streamed", async () => {
    const params = {
      model: MODEL,
      messages: [{ role: "user" as const, content: "Weather in Paris?" }],
      tools: [WEATHER],
      tool_choice: { type: "function" as const, function: { name: "get_weather" } },
      max_tokens: 256,
    };
    const r = await openai.chat.completions.create(params);
    expect(r.choices[0].finish_reason).toBe("tool_calls");
    const call = r.choices[0].message.tool_calls?.[0];
    if (call?.type !== "function") throw new Error("no function call");
    expectWeatherArgs(call.function.arguments);

    let args = "";
    let finish: string | null = null;
    for await (const chunk of await openai.chat.completions.create({ ...params, stream: true })) {
      for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) args += tc.function?.arguments ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(finish).toBe("tool_calls");
    expectWeatherArgs(args);
  }, LONG);

  it("Responses: a forced call, whole and streamed, and a conversation continued through A", async () => {
    const params = {
      model: MODEL,
      input: "Weather in Paris?",
      tools: [WEATHER_FN],
      tool_choice: { type: "function" as const, name: "get_weather" },
      max_output_tokens: 256,
    };
    const r = await openai.responses.create(params);
    const fc = r.output.find((o) => o.type === "function_call");
    if (fc?.type !== "function_call") throw new Error(`no function call in ${JSON.stringify(r.output)}`);
    expectWeatherArgs(fc.arguments);

    const stream = openai.responses.stream({ ...params, tool_choice: "required" });
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    const streamed = (await stream.finalResponse()).output.find((o) => o.type === "function_call");
    if (streamed?.type !== "function_call") throw new Error("no streamed function call");
    expectWeatherArgs(streamed.arguments);
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.function_call_arguments.delta");

    // B generated and kept r; the follow-up sent to A is forwarded to B, which continues it.
    const answer = await openai.responses.create({
      model: MODEL,
      previous_response_id: r.id,
      tools: [WEATHER_FN],
      input: [{ type: "function_call_output", call_id: fc.call_id, output: '{"temperature_c": 21}' }],
      max_output_tokens: 4,
    });
    expect(answer.previous_response_id).toBe(r.id);
    expect(answer.usage!.input_tokens).toBeGreaterThan(r.usage!.input_tokens);
  }, LONG);

  it("Messages: a forced tool_use, whole and streamed", async () => {
    const params = {
      model: MODEL,
      max_tokens: 256,
      tools: [{
        name: WEATHER.function.name,
        description: WEATHER.function.description,
        input_schema: WEATHER.function.parameters as Anthropic.Tool.InputSchema,
      }],
      tool_choice: { type: "tool" as const, name: "get_weather" },
      messages: [{ role: "user" as const, content: "Weather in Paris?" }],
    };
    const m = await anthropic.messages.create(params);
    expect(m.stop_reason).toBe("tool_use");
    const use = m.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    expectWeatherArgs(use.input as Record<string, unknown>);

    const streamed = await anthropic.messages.stream({ ...params, tool_choice: { type: "any" } })
      .finalMessage();
    expect(streamed.stop_reason).toBe("tool_use");
    const s = streamed.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock;
    expectWeatherArgs(s.input as Record<string, unknown>);
  }, LONG);

  it("Ollama: chat with a forced call, whole and streamed, and generate", async () => {
    const request = {
      model: MODEL,
      messages: [{ role: "user" as const, content: "What is the weather in Paris?" }],
      tools: [WEATHER],
      tool_choice: "required",
      options: { num_predict: 256 },
    };
    const r = await ollama.chat(request as Parameters<Ollama["chat"]>[0] & { stream?: false });
    expect(r.done_reason).toBe("tool_call");
    expectWeatherArgs(r.message.tool_calls![0].function.arguments);

    const calls = [];
    for await (
      const part of await ollama.chat(
        { ...request, stream: true } as Parameters<Ollama["chat"]>[0] & { stream: true },
      )
    ) calls.push(...part.message.tool_calls ?? []);
    expect(calls).toHaveLength(1);
    expectWeatherArgs(calls[0].function.arguments);

    let text = "";
    for await (
      const part of await ollama.generate({
        model: MODEL,
        prompt: "Hi",
        stream: true,
        options: { num_predict: 6 },
      })
    ) text += part.response;
    expect(text.length).toBeGreaterThan(0);
    expect((await ollama.list()).models.map((m) => m.name)).toContain(MODEL);
  }, LONG);
});
