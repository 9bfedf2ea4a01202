/**
 * The client APIs' conversation state on one real node with the tiny model, judged by the official SDKs:
 * Responses continued through previous_response_id, and image inputs refused by a model without a projector.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import type { Ollama } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { sdkClients, WEATHER_FN } from "../helpers/engine-probe.ts";
import { placeReady } from "../helpers/cluster.ts";

const MODEL = "skulk-test/tiny-session";
const LONG = 300_000;
/** A 1×1 PNG: the smallest image every API accepts as base64. */
const PNG_1PX =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

describe("client API sessions through a real engine", () => {
  let node: Daemon;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") } });
    ({ openai, anthropic, ollama } = sdkClients(node.url, LONG));
    await placeReady(node, MODEL, await tinyModel());
  }, LONG);
  afterAll(async () => {
    await node?.stop();
  });

  it("Responses: previous_response_id continues the conversation the first turn stored", async () => {
    const first = await openai.responses.create({
      model: MODEL,
      input: "My name is Ada.",
      max_output_tokens: 8,
    });
    expect((first as unknown as { store: boolean }).store).toBe(true);
    const second = await openai.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: "What is my name?",
      max_output_tokens: 8,
    });
    expect(second.previous_response_id).toBe(first.id);
    // The same conversation sent whole: the engine saw exactly this prompt, first turn and its answer included.
    const whole = await openai.responses.create({
      model: MODEL,
      input: [
        { role: "user", content: "My name is Ada." },
        { role: "assistant", content: first.output_text },
        { role: "user", content: "What is my name?" },
      ],
      max_output_tokens: 8,
    });
    const alone = await openai.responses.create({
      model: MODEL,
      input: "What is my name?",
      max_output_tokens: 1,
    });
    expect(second.usage!.input_tokens).toBe(whole.usage!.input_tokens);
    expect(second.usage!.input_tokens).toBeGreaterThan(
      alone.usage!.input_tokens + first.usage!.output_tokens,
    );

    // A third turn chains through the second, streamed: the prompt grows again by the second turn.
    const stream = openai.responses.stream({
      model: MODEL,
      previous_response_id: second.id,
      input: "Say it again.",
      max_output_tokens: 4,
    });
    const third = await stream.finalResponse();
    expect(third.previous_response_id).toBe(second.id);
    expect(third.usage!.input_tokens).toBeGreaterThan(
      second.usage!.input_tokens + second.usage!.output_tokens,
    );
    // The streamed response was kept too.
    const fourth = await openai.responses.create({
      model: MODEL,
      previous_response_id: third.id,
      input: "Once more.",
      max_output_tokens: 1,
    });
    expect(fourth.usage!.input_tokens).toBeGreaterThan(
      third.usage!.input_tokens + third.usage!.output_tokens,
    );
  }, LONG);

  it("Responses: a function call's output continues through previous_response_id", async () => {
    const call = await openai.responses.create({
      model: MODEL,
      input: "Weather in Paris?",
      tools: [WEATHER_FN],
      tool_choice: { type: "function", name: "get_weather" },
      max_output_tokens: 256,
    });
    const fc = call.output.find((o) => o.type === "function_call");
    if (fc?.type !== "function_call") throw new Error(`no function call in ${JSON.stringify(call.output)}`);
    const answer = await openai.responses.create({
      model: MODEL,
      previous_response_id: call.id,
      tools: [WEATHER_FN],
      input: [{ type: "function_call_output", call_id: fc.call_id, output: '{"temperature_c": 21}' }],
      max_output_tokens: 6,
    });
    expect(answer.output.some((o) => o.type === "function_call")).toBe(false);
    expect(answer.output_text.length).toBeGreaterThan(0);
    expect(answer.usage!.input_tokens).toBeGreaterThan(call.usage!.input_tokens);
  }, LONG);

  it(
    "Responses: store:false keeps nothing; unknown and malformed ids are refused in OpenAI's shape",
    async () => {
      const unstored = await openai.responses.create({
        model: MODEL,
        input: "Hello",
        store: false,
        max_output_tokens: 1,
      });
      expect((unstored as unknown as { store: boolean }).store).toBe(false);
      const gone = await openai.responses.create({
        model: MODEL,
        previous_response_id: unstored.id,
        input: "Again",
        max_output_tokens: 1,
      }).catch((e) => e);
      expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
      expect(gone.error).toEqual({
        message: `Previous response with id '${unstored.id}' not found.`,
        type: "invalid_request_error",
        param: "previous_response_id",
        code: "previous_response_not_found",
      });
      const bad = await openai.responses.create({
        model: MODEL,
        previous_response_id: "../etc/passwd",
        input: "x",
      }).catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.error.param).toBe("previous_response_id");
    },
    LONG,
  );

  const NO_IMAGES = new RegExp(`model ${MODEL} takes no images`);

  it("Chat Completions: an image_url to a model without a projector is a 400 naming the model", async () => {
    const err = await openai.chat.completions.create({
      model: MODEL,
      max_tokens: 4,
      messages: [{
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${PNG_1PX}` } },
        ],
      }],
    }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(NO_IMAGES);
  }, LONG);

  it("Messages: an image block to a model without a projector is a 400 in Anthropic's shape", async () => {
    const err = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 4,
      messages: [{
        role: "user",
        content: [
          { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1PX } },
          { type: "text", text: "What is this?" },
        ],
      }],
    }).catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect(err.error.type).toBe("error");
    expect(err.error.error.type).toBe("invalid_request_error");
    expect(err.error.error.message).toMatch(NO_IMAGES);
  }, LONG);

  it("Responses: an input_image to a model without a projector is a 400, streamed or not", async () => {
    const input = [{
      role: "user" as const,
      content: [
        { type: "input_text" as const, text: "What is this?" },
        {
          type: "input_image" as const,
          image_url: `data:image/png;base64,${PNG_1PX}`,
          detail: "auto" as const,
        },
      ],
    }];
    const err = await openai.responses.create({ model: MODEL, input, max_output_tokens: 4 }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(NO_IMAGES);
    const streamed = await openai.responses.create({
      model: MODEL,
      input,
      max_output_tokens: 4,
      stream: true,
    })
      .catch((e) => e);
    expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
  }, LONG);

  it("Ollama: images to a model without a projector are refused with Ollama's error", async () => {
    const err = await ollama.chat({
      model: MODEL,
      stream: false,
      options: { num_predict: 4 },
      messages: [{ role: "user", content: "What is this?", images: [PNG_1PX] }],
    }).catch((e) => e);
    expect(err.status_code).toBe(400);
    expect(err.error).toMatch(NO_IMAGES);
    const gen = await ollama.generate({
      model: MODEL,
      prompt: "What is this?",
      images: [PNG_1PX],
      stream: false,
    })
      .catch((e) => e);
    expect(gen.status_code).toBe(400);
    expect(gen.error).toMatch(NO_IMAGES);
  }, LONG);
});
