/**
 * Ollama's API under /ollama on one real node with the tiny model, judged by the official `ollama` npm client:
 * liveness, tags, ps, show, chat and generate (streamed and not), a forced tool call, errors, cancellation.
 */
import { Ollama } from "ollama";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { engineBusy, enginePort, WEATHER } from "../helpers/engine-probe.ts";
import {
  localCardWire,
  placeReady,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";

const MODEL = "skulk-test/tiny-tools";
const LONG = 300_000;

describe("Ollama API through a real engine", () => {
  let node: Daemon;
  let ollama: Ollama;

  beforeAll(async () => {
    // One stream slot: the slot test below fills it with one stream, and every streamed test after another
    // proves the slot came back.
    node = await startDaemon({
      env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), SKULK_MAX_CONCURRENT_STREAMS: "1" },
    });
    ollama = new Ollama({ host: `${node.url}/ollama` });
    await placeReady(node, MODEL, await tinyModel());
  }, LONG);
  afterAll(async () => {
    await node?.stop();
  });

  it("answers liveness probes, GET and HEAD, and its version", async () => {
    const get = await fetch(`${node.url}/ollama/`);
    expect(get.status).toBe(200);
    expect(await get.text()).toBe("Ollama is running");
    const head = await fetch(`${node.url}/ollama/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect((await ollama.version()).version).toMatch(/\d+\.\d+/);
  });

  it("lists the placed model in tags (and its aliases) and ps, and shows it", async () => {
    const tags = await ollama.list();
    const entry = tags.models.find((m) => m.name === MODEL);
    expect(entry?.model).toBe(MODEL);
    expect(entry?.size).toBeGreaterThan(0);
    expect(entry?.details.format).toBe("gguf");
    expect(entry?.digest).toMatch(/^[0-9a-f]{64}$/);
    // The tiny model's header: 32000 tokens × 64 wide, plus 4 blocks of 49 280 weights, plus the output norm.
    expect(entry?.details.parameter_size).toBe("2.25M");
    for (const alias of ["api/api/tags", "api/v1/tags"]) {
      const r = await (await fetch(`${node.url}/ollama/${alias}`)).json();
      expect(r.models.map((m: { name: string }) => m.name)).toContain(MODEL);
    }
    const ps = await ollama.ps();
    expect(ps.models.map((m) => m.name)).toEqual([MODEL]);
    const load = await ollama.generate({ model: "nobody/nothing", prompt: "" }).catch((e) => e);
    expect(load.status_code).toBe(404);
    expect((await ollama.generate({ model: MODEL, prompt: "" })).done_reason).toBe("load");
    const show = await ollama.show({ model: MODEL });
    expect(show.modelfile).toBe(`FROM ${MODEL}`);
    expect(show.capabilities).toContain("completion");
    expect(show.details.parameter_size).toBe("2.25M");
    expect((show.model_info as unknown as Record<string, unknown>)["general.parameter_count"]).toBe(
      2_245_184,
    );
    expect(ps.models[0].digest).toBe(entry?.digest);
  });

  it("chats, not streamed: a message, done_reason, counts and durations in nanoseconds", async () => {
    const r = await ollama.chat({
      model: MODEL,
      messages: [{ role: "user", content: "Say hello" }],
      options: { num_predict: 8, temperature: 0, seed: 1 },
    });
    expect(r.model).toBe(MODEL);
    expect(r.done).toBe(true);
    expect(r.message.role).toBe("assistant");
    expect(typeof r.message.content).toBe("string");
    expect(["stop", "length"]).toContain(r.done_reason);
    expect(r.eval_count).toBeGreaterThan(0);
    expect(r.eval_count).toBeLessThanOrEqual(8);
    expect(r.prompt_eval_count).toBeGreaterThan(0);
    // Nanoseconds: even a tiny model's whole answer takes well over a microsecond.
    expect(r.total_duration).toBeGreaterThan(1000);
    expect(r.total_duration).toBeGreaterThanOrEqual(r.eval_duration);
  }, LONG);

  it("chats streamed as NDJSON: deltas, then one done line; the same seed gives the same text", async () => {
    const raw = await fetch(`${node.url}/ollama/api/chat`, {
      method: "POST",
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "Count" }],
        options: { num_predict: 6, temperature: 0 },
      }),
    });
    expect(raw.headers.get("content-type")).toContain("application/x-ndjson");
    const lines = (await raw.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    expect(lines.at(-1).done).toBe(true);
    expect(lines.slice(0, -1).every((l) => l.done === false)).toBe(true);

    const stream = await ollama.chat({
      model: MODEL,
      messages: [{ role: "user", content: "Count" }],
      options: { num_predict: 6, temperature: 0 },
      stream: true,
    });
    let text = "";
    let last;
    for await (const part of stream) {
      text += part.message.content;
      last = part;
    }
    expect(last?.done).toBe(true);
    expect(last?.done_reason).toBe("length");
    expect(last?.eval_count).toBe(6);
    expect(text).toBe(lines.map((l) => l.message.content).join(""));
  }, LONG);

  it("generates, streamed and not; a JSON-schema format holds it to that schema", async () => {
    const r = await ollama.generate({
      model: MODEL,
      prompt: "Once",
      options: { num_predict: 5, temperature: 0 },
    });
    expect(r.done).toBe(true);
    expect(r.eval_count).toBeLessThanOrEqual(5);
    const stream = await ollama.generate({
      model: MODEL,
      prompt: "Once",
      options: { num_predict: 5, temperature: 0 },
      stream: true,
    });
    let text = "";
    for await (const part of stream) text += part.response;
    expect(text).toBe(r.response);

    const json = await ollama.generate({
      model: MODEL,
      prompt: "A JSON object please",
      format: {
        type: "object",
        properties: { n: { type: "integer", minimum: 0, maximum: 9 } },
        required: ["n"],
      },
      options: { num_predict: 64 },
    });
    const parsed = JSON.parse(json.response ?? "");
    expect(Number.isInteger(parsed.n)).toBe(true);
  }, LONG);

  it(
    "forces a tool call (Skulk's tool_choice): tool_calls with schema-valid arguments, streamed or not",
    async () => {
      // Ollama's API has no tool_choice; Skulk takes one so a random-weight model still calls the tool.
      const request = {
        model: MODEL,
        messages: [{ role: "user" as const, content: "What is the weather in Paris?" }],
        tools: [WEATHER],
        tool_choice: "required",
        options: { num_predict: 256 },
      };
      const r = await ollama.chat(request as Parameters<Ollama["chat"]>[0] & { stream?: false });
      const call = r.message.tool_calls?.[0];
      expect(call?.function.name).toBe("get_weather");
      expect(["Paris", "Oslo"]).toContain(call?.function.arguments.city);
      expect(r.done_reason).toBe("tool_call");

      const stream = await ollama.chat(
        { ...request, stream: true } as Parameters<Ollama["chat"]>[0] & { stream: true },
      );
      const calls = [];
      for await (const part of stream) calls.push(...part.message.tool_calls ?? []);
      expect(calls).toHaveLength(1);
      expect(Object.keys(calls[0].function.arguments).sort()).toEqual(["city", "days"]);

      // The call and its result sent back are answered with text.
      const answer = await ollama.chat({
        model: MODEL,
        messages: [
          request.messages[0],
          { role: "assistant", content: "", tool_calls: [call!] },
          { role: "tool", content: '{"temp_c": 12}', tool_name: "get_weather" },
        ],
        tools: [WEATHER],
        options: { num_predict: 8 },
      });
      expect(answer.done).toBe(true);
      expect(answer.eval_count).toBeGreaterThan(0);
    },
    LONG,
  );

  it("refuses an unknown model with 404 and bad input with 400, in Ollama's error shape", async () => {
    const err = await ollama.chat({ model: "nobody/nothing", messages: [{ role: "user", content: "hi" }] })
      .catch((e) => e);
    expect(err.status_code).toBe(404);
    expect(err.error).toMatch(/nobody\/nothing/);
    const r = await fetch(`${node.url}/ollama/api/chat`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL }),
    });
    expect(r.status).toBe(400);
    expect((await r.json()).error).toMatch(/messages/);
    const load = await ollama.generate({ model: "nobody/nothing", prompt: "" }).catch((e) => e);
    expect(load.status_code).toBe(404);
    expect((await ollama.generate({ model: MODEL, prompt: "" })).done_reason).toBe("load");
    const show = await ollama.show({ model: "nobody/nothing" }).catch((e) => e);
    expect(show.status_code).toBe(404);
    const embed = await ollama.embed({ model: MODEL, input: "x" }).catch((e) => e);
    expect(embed.status_code).toBe(400);
    expect(embed.error).toMatch(/not an embedding model/);
  });

  it(
    "a stream holds the node's stream slot: a second is refused (429, Ollama's shape) until the first goes",
    async () => {
      const first = await ollama.chat({
        model: MODEL,
        messages: [{ role: "user", content: "Go on" }],
        options: { num_predict: 1500 },
        stream: true,
      });
      const it1 = first[Symbol.asyncIterator]();
      expect((await it1.next()).done).toBe(false);
      const refused = await fetch(`${node.url}/ollama/api/generate`, {
        method: "POST",
        body: JSON.stringify({ model: MODEL, prompt: "x" }),
      });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      expect((await refused.json()).error).toMatch(/concurrent streams/);
      // Not streamed: no slot needed.
      expect((await ollama.generate({ model: MODEL, prompt: "x", options: { num_predict: 1 } })).done).toBe(
        true,
      );
      first.abort();
      // The slot comes back once the node sees the client gone.
      let status = 0;
      for (let i = 0; i < 200 && status !== 200; i++) {
        const r = await fetch(`${node.url}/ollama/api/generate`, {
          method: "POST",
          body: JSON.stringify({ model: MODEL, prompt: "x", options: { num_predict: 2 } }),
        });
        status = r.status;
        await r.body?.cancel();
        if (status !== 200) await new Promise((res) => setTimeout(res, 50));
      }
      expect(status).toBe(200);
    },
    LONG,
  );

  it("stops the engine's generation when a streaming client goes away", async () => {
    const port = await enginePort(node);
    expect(await engineBusy(port, false)).toBe(true);
    const stream = await ollama.chat({
      model: MODEL,
      messages: [{ role: "user", content: "Go on forever" }],
      options: { num_predict: 1500 },
      stream: true,
    });
    for await (const _part of stream) {
      stream.abort();
      break;
    }
    // Idle long before 1500 tokens (tens of seconds here) would be done.
    expect(await engineBusy(port, false)).toBe(true);
  }, LONG);

  it(
    "an engine that dies mid-stream ends the NDJSON with an error line, which the client raises",
    async () => {
      const stream = await ollama.chat({
        model: MODEL,
        messages: [{ role: "user", content: "Go on forever" }],
        options: { num_predict: 1500 },
        stream: true,
      });
      const parts = stream[Symbol.asyncIterator]();
      expect((await parts.next()).done).toBe(false);
      const r = await skulk([
        "sql",
        "--data-dir",
        node.dataDir,
        "--json",
        "SELECT pid FROM engine_processes WHERE kind = 'llama-server'",
      ]);
      const [{ pid }] = JSON.parse(r.stdout) as { pid: number }[];
      Deno.kill(pid, "SIGKILL");
      let raised: Error | undefined;
      try {
        while (!(await parts.next()).done) { /* the rest of what was generated */ }
      } catch (e) {
        raised = e as Error;
      }
      // The line says why (engine failure), so the client did not merely lose its connection.
      expect(raised?.message).toMatch(/the engine serving this model failed/);
    },
    LONG,
  );

  it("embeds with an embedding model: /api/embed in input order, legacy /api/embeddings", async () => {
    const card = localCardWire("skulk-test/tiny-embed", await tinyModel({ pooling: "mean" }), {
      tasks: ["TextEmbedding"],
      capabilities: ["embedding"],
    });
    const instance = singleNodeInstance(node.nodeId, card);
    const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
    expect((await postInstance(node, instance)).status).toBe(200);
    await waitForState(node.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the embedding runner");
    const r = await ollama.embed({ model: "skulk-test/tiny-embed", input: ["a fox", "a hound"] });
    expect(r.embeddings).toHaveLength(2);
    expect(r.embeddings[0]).toHaveLength(64);
    expect(r.embeddings[0]).not.toEqual(r.embeddings[1]);
    const one = await ollama.embeddings({ model: "skulk-test/tiny-embed", prompt: "a fox" });
    // The same text alone or in a batch: the same vector, up to float rounding.
    expect(one.embedding).toHaveLength(64);
    one.embedding.forEach((v, i) => expect(v).toBeCloseTo(r.embeddings[0][i], 4));
    const show = await ollama.show({ model: "skulk-test/tiny-embed" });
    expect(show.capabilities).toEqual(["embedding"]);
  }, LONG);
});
