/**
 * A reasoning model through a real engine, judged by the official SDKs: the tiny model's thinking template opens
 * `<think>` in the reply, llama-server parses what follows as reasoning, and each API returns it in its own
 * form (Chat's reasoning_content, Messages' signed thinking blocks, a Responses reasoning item, Ollama's thinking).
 */
import type Anthropic from "@anthropic-ai/sdk";
import type { Ollama } from "ollama";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { sdkClients } from "../helpers/engine-probe.ts";
import { localCardWire, placeOnNode } from "../helpers/cluster.ts";

const MODEL = "skulk-test/tiny-thinking";
const LONG = 300_000;
/** Random weights never write `</think>`: a reply cut at a few tokens is all reasoning. */
const TOKENS = 8;

describe("a reasoning model through a real engine", () => {
  let node: Daemon;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") } });
    ({ openai, anthropic, ollama } = sdkClients(node.url, LONG));
    const card = localCardWire(MODEL, await tinyModel({ thinking: true }), {
      capabilities: ["text", "thinking"],
    });
    await placeOnNode(node, card, 2048, 180_000);
  }, LONG);
  afterAll(async () => {
    await node?.stop();
  });

  it("Chat Completions: reasoning_content, whole and streamed", async () => {
    const r = await openai.chat.completions.create({
      model: MODEL,
      max_tokens: TOKENS,
      messages: [{ role: "user", content: "Think first" }],
    });
    const m = r.choices[0].message as typeof r.choices[0]["message"] & { reasoning_content?: string };
    expect(m.reasoning_content?.length).toBeGreaterThan(0);
    expect(m.content ?? "").toBe("");
    expect(r.usage?.completion_tokens).toBe(TOKENS);

    const stream = await openai.chat.completions.create({
      model: MODEL,
      max_tokens: TOKENS,
      stream: true,
      messages: [{ role: "user", content: "Think first" }],
    });
    let reasoning = "";
    let text = "";
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as
        | { content?: string | null; reasoning_content?: string }
        | undefined;
      reasoning += d?.reasoning_content ?? "";
      text += d?.content ?? "";
    }
    expect(reasoning.length).toBeGreaterThan(0);
    expect(text).toBe("");
  }, LONG);

  it(
    "Messages: a signed thinking block, whole and streamed (thinking_delta, then signature_delta)",
    async () => {
      const params = {
        model: MODEL,
        max_tokens: TOKENS,
        thinking: { type: "enabled" as const, budget_tokens: 1024 },
        messages: [{ role: "user" as const, content: "Think first" }],
      };
      const m = await anthropic.messages.create(params);
      expect(m.content[0].type).toBe("thinking");
      const block = m.content[0] as Anthropic.ThinkingBlock;
      expect(block.thinking.length).toBeGreaterThan(0);
      expect(block.signature.length).toBeGreaterThan(0);
      expect(m.stop_reason).toBe("max_tokens");

      const stream = anthropic.messages.stream(params);
      const deltas: string[] = [];
      let thinking = "";
      let signature = "";
      stream.on("streamEvent", (e) => {
        if (e.type !== "content_block_delta") return;
        deltas.push(e.delta.type);
        if (e.delta.type === "thinking_delta") thinking += e.delta.thinking;
        if (e.delta.type === "signature_delta") signature = e.delta.signature;
      });
      const final = await stream.finalMessage();
      const streamed = final.content[0] as Anthropic.ThinkingBlock;
      expect(streamed.type).toBe("thinking");
      expect(streamed.thinking).toBe(thinking);
      expect(thinking.length).toBeGreaterThan(0);
      expect(streamed.signature).toBe(signature);
      expect(signature.length).toBeGreaterThan(0);
      expect(deltas.at(-1)).toBe("signature_delta");
      expect(deltas.filter((d) => d === "signature_delta")).toHaveLength(1);

      // The thinking sent back with its signature is accepted and read as part of the conversation.
      const next = await anthropic.messages.create({
        ...params,
        max_tokens: 1,
        messages: [...params.messages, { role: "assistant", content: [streamed] }, {
          role: "user",
          content: "And then?",
        }],
      });
      expect(next.usage.input_tokens).toBeGreaterThan(m.usage.input_tokens);
    },
    LONG,
  );

  it("Responses: a reasoning item with a summary, whole and streamed", async () => {
    const r = await openai.responses.create({
      model: MODEL,
      input: "Think first",
      max_output_tokens: TOKENS,
    });
    const item = r.output[0];
    if (item.type !== "reasoning") throw new Error(`no reasoning item first in ${JSON.stringify(r.output)}`);
    expect(item.summary[0].type).toBe("summary_text");
    expect(item.summary[0].text.length).toBeGreaterThan(0);
    expect(r.output_text).toBe("");

    const stream = openai.responses.stream({ model: MODEL, input: "Think first", max_output_tokens: TOKENS });
    let deltas = "";
    for await (const e of stream) if (e.type === "response.reasoning_summary_text.delta") deltas += e.delta;
    const final = await stream.finalResponse();
    const s = final.output[0];
    if (s.type !== "reasoning") throw new Error("no streamed reasoning item");
    expect(s.summary[0].text).toBe(deltas);
    expect(deltas.length).toBeGreaterThan(0);
  }, LONG);

  it("Ollama: thinking in chat and generate, whole and streamed; show names the capability", async () => {
    const r = await ollama.chat({
      model: MODEL,
      think: true,
      stream: false,
      options: { num_predict: TOKENS },
      messages: [{ role: "user", content: "Think first" }],
    });
    expect(r.message.thinking?.length).toBeGreaterThan(0);
    expect(r.message.content).toBe("");

    let thinking = "";
    for await (
      const part of await ollama.chat({
        model: MODEL,
        think: true,
        stream: true,
        options: { num_predict: TOKENS },
        messages: [{ role: "user", content: "Think first" }],
      })
    ) thinking += part.message.thinking ?? "";
    expect(thinking.length).toBeGreaterThan(0);

    const g = await ollama.generate({
      model: MODEL,
      prompt: "Think first",
      think: true,
      stream: false,
      options: { num_predict: TOKENS },
    });
    expect(g.thinking?.length).toBeGreaterThan(0);
    expect((await ollama.show({ model: MODEL })).capabilities).toContain("thinking");
  }, LONG);
});
