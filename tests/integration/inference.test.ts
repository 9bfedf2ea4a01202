/**
 * Real inference on one node: a tiny GGUF placed on a real daemon, served by the real llama-server,
 * talked to with the official `openai` client; engine death, crash reaping and bad requests included.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import {
  localCardWire,
  pidAlive,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
  type WireState,
} from "../helpers/cluster.ts";

/** The model, runner and nodes of an instance in a wire state (single-node instances here). */
// deno-lint-ignore no-explicit-any
const bodyOf = (st: WireState, id: string): any => Object.values(st.instances[id])[0];
const instanceModel = (st: WireState, id: string): string => bodyOf(st, id).shardAssignments.modelId;
const instanceRunner = (st: WireState, id: string): string =>
  Object.keys(bodyOf(st, id).shardAssignments.runnerToShard)[0];
const instanceNodes = (st: WireState, id: string): string[] =>
  Object.keys(bodyOf(st, id).shardAssignments.nodeToRunner);

const MODEL = "skulk-test/tiny-llama";

async function enginePids(dataDir: string, instanceId?: string): Promise<number[]> {
  const of = instanceId ? ` AND instance_id = '${instanceId}'` : "";
  const r = await skulk([
    "sql",
    "--data-dir",
    dataDir,
    "--json",
    `SELECT pid FROM engine_processes WHERE kind = 'llama-server'${of}`,
  ]);
  return (JSON.parse(r.stdout) as { pid: number }[]).map((x) => x.pid);
}

async function place(node: Daemon, model = MODEL, ctx = 2048) {
  const card = localCardWire(model, await tinyModel());
  const instance = singleNodeInstance(node.nodeId, card, ctx);
  const res = await postInstance(node, instance);
  expect(res.status).toBe(200);
  const body = instance.MlxRingInstance;
  const runnerId = Object.keys(body.shardAssignments.runnerToShard)[0];
  await waitForState(node.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the runner to be ready");
  return { instanceId: body.instanceId, runnerId };
}

describe("serving a tiny model on one node", () => {
  let node: Daemon;
  let client: OpenAI;
  let placed: { instanceId: string; runnerId: string };

  beforeAll(async () => {
    const env = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") };
    node = await startDaemon({ env });
    client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0 });
    placed = await place(node);
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("answers a chat completion through the openai client", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello there" }],
      max_tokens: 12,
    });
    expect(r.model).toBe(MODEL);
    expect(r.choices[0].message.role).toBe("assistant");
    expect((r.choices[0].message.content ?? "").length).toBeGreaterThan(0);
    expect(r.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it("streams a chat completion in upstream's SSE framing", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Tell me a story" }],
      max_tokens: 16,
      stream: true,
    });
    let text = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(finish).toMatch(/stop|length/);

    const raw = await (await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 8,
        stream: true,
      }),
    })).text();
    const events = raw.split("\n\n").filter(Boolean);
    expect(events[1]).toMatch(/^: command_id [0-9a-f-]{36}$/);
    const id = events[1].slice(": command_id ".length);
    const chunks = events.filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.every((c) => c.id === id && c.object === "chat.completion")).toBe(true);
    expect(chunks.at(-1).usage.completion_tokens).toBeGreaterThan(0);
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  it("serves several streams at once", async () => {
    const runs = await Promise.all([0, 1, 2].map(async (i) => {
      const s = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: `Count ${i}` }],
        max_tokens: 10,
        stream: true,
      });
      let n = 0;
      for await (const c of s) if (c.choices[0]?.delta?.content) n++;
      return n;
    }));
    expect(runs.every((n) => n > 0)).toBe(true);
  });

  it("serves legacy completions", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 8 });
    expect(r.choices[0].text.length).toBeGreaterThan(0);
  });

  it("refuses bad requests with a 4xx that says what is wrong", async () => {
    const post = (body: unknown) =>
      fetch(`${node.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body) });
    const cases: [unknown, number, RegExp][] = [
      [{ model: MODEL, messages: [] }, 400, /messages: must not be empty/],
      [
        { model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 0 },
        400,
        /max_tokens: must be a positive integer/,
      ],
      [
        { model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 5000 },
        400,
        /^context_length_exceeded: max_tokens \(5000\)/,
      ],
      [{ model: MODEL, messages: [{ role: "user", content: "" }] }, 400, /every message is empty/],
      [
        { model: "nobody/placed-this", messages: [{ role: "user", content: "x" }] },
        404,
        /^No instance found for model nobody\/placed-this$/,
      ],
      [{ messages: [{ role: "user", content: "x" }] }, 400, /model/],
    ];
    for (const [body, status, msg] of cases) {
      const res = await post(body);
      const env = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(env.error.message, JSON.stringify(body)).toMatch(msg);
    }
    await expect(
      client.chat.completions.create({
        model: "nobody/placed-this",
        messages: [{ role: "user", content: "x" }],
      }),
    ).rejects.toThrow(/No instance found/);
  });

  it("stops generation at the engine when the client disconnects", async () => {
    const [pid] = await enginePids(node.dataDir);
    const port = Number(
      JSON.parse(
        (await skulk([
          "sql",
          "--data-dir",
          node.dataDir,
          "--json",
          `SELECT port FROM engine_processes WHERE pid = ${pid}`,
        ])).stdout,
      )[0].port,
    );
    const abort = new AbortController();
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "Go on forever" }],
        max_tokens: 1500,
        stream: true,
      }),
      signal: abort.signal,
    });
    const reader = res.body!.getReader();
    let got = "";
    while (!got.includes("data: {")) got += new TextDecoder().decode((await reader.read()).value);
    abort.abort();
    // The engine's slot becomes idle well before 1500 tokens would be done.
    let busy = true;
    for (let i = 0; i < 100 && busy; i++) {
      const slots = await (await fetch(`http://127.0.0.1:${port}/slots`)).json() as {
        is_processing: boolean;
        next_token?: { n_decoded?: number }[];
      }[];
      busy = slots.some((s) => s.is_processing);
      if (busy) await new Promise((r) => setTimeout(r, 50));
    }
    expect(busy).toBe(false);
  });

  it("fails the runner with the engine's log tail when the engine is killed, and the next request gets a clear error until the master relaunches it on the node", async () => {
    const [pid] = await enginePids(node.dataDir);
    expect(pidAlive(pid)).toBe(true);
    Deno.kill(pid, "SIGKILL");
    const killedAt = Date.now();
    const s = await waitForState(
      node.url,
      (st) => runnerTag(st, placed.runnerId) === "RunnerFailed",
      "the runner to fail",
      10_000,
    );
    const msg: string = s.runners[placed.runnerId].RunnerFailed.errorMessage;
    expect(msg).toMatch(/llama-server was killed by SIGKILL/);
    expect(msg).toMatch(/last lines of the engine's log/);
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x" }] }),
    });
    expect(res.status).toBe(503);
    expect((await res.json()).error.message).toMatch(/killed by SIGKILL/);
    // The failed instance stays visible (and its 503 names the failure) until its relaunch serves.
    const relaunchedBy = (st: WireState) =>
      Object.keys(st.instances).find((id) => id !== placed.instanceId && instanceModel(st, id) === MODEL);
    const up = await waitForState(
      node.url,
      (st) => {
        const id = relaunchedBy(st);
        return id !== undefined && !st.instances[placed.instanceId] &&
          runnerTag(st, instanceRunner(st, id)) === "RunnerReady";
      },
      "the relaunch to serve and the failed instance to retire",
      60_000,
    );
    const again = relaunchedBy(up)!;
    console.log(`kill -9 of the engine to its relaunch serving: ${Date.now() - killedAt} ms`);
    expect(instanceNodes(up, again)).toEqual([node.nodeId]);
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Back?" }],
      max_tokens: 4,
    });
    expect(r.choices[0].message.content?.length).toBeGreaterThan(0);
    const hist = JSON.parse(
      (await skulk([
        "sql",
        "--data-dir",
        node.dataDir,
        "--json",
        `SELECT id, outcome, reason FROM instances WHERE model_id = '${MODEL}' ORDER BY created_at`,
      ])).stdout,
    );
    const n = node.nodeId;
    expect(hist).toEqual([
      {
        id: placed.instanceId,
        outcome: "replaced",
        reason: `the engine on node ${n} failed: llama-server was killed by SIGKILL; replaced by ${again}, ` +
          `relaunched on node ${n}, which serves`,
      },
      {
        id: again,
        outcome: "running",
        reason: `relaunches ${placed.instanceId} on node ${n} after the engine on node ${n} failed: ` +
          "llama-server was killed by SIGKILL, relaunch 1/2",
      },
    ]);
  });

  it("deletes the instance, stops its engine and keeps the history", async () => {
    const fresh = await place(node, "skulk-test/tiny-second");
    const [pid] = await enginePids(node.dataDir, fresh.instanceId);
    const del = await fetch(`${node.url}/instance/${fresh.instanceId}`, { method: "DELETE" });
    expect(del.status).toBe(200);
    await waitForState(
      node.url,
      (s) => !s.instances[fresh.instanceId] && !s.runners[fresh.runnerId],
      "the instance to go",
    );
    for (let i = 0; i < 100 && pidAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    expect(pidAlive(pid)).toBe(false);
    const hist = JSON.parse(
      (await skulk([
        "sql",
        "--data-dir",
        node.dataDir,
        "--json",
        `SELECT outcome, deleted_at FROM instances WHERE id = '${fresh.instanceId}'`,
      ])).stdout,
    );
    expect(hist).toEqual([{ outcome: "deleted", deleted_at: expect.any(String) }]);
    expect((await fetch(`${node.url}/instance/${fresh.instanceId}`)).status).toBe(404);
    expect((await fetch(`${node.url}/instance/${fresh.instanceId}`, { method: "DELETE" })).status).toBe(404);
  });
});

describe("an embedding model", () => {
  it("serves /v1/embeddings, and a text model refuses them", async () => {
    const env = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") };
    const node = await startDaemon({ env });
    try {
      const card = localCardWire("skulk-test/tiny-embed", await tinyModel({ pooling: "mean" }), {
        tasks: ["TextEmbedding"],
        capabilities: ["embedding"],
      });
      const instance = singleNodeInstance(node.nodeId, card);
      const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
      expect(
        (await postInstance(node, instance)).status,
      ).toBe(200);
      await waitForState(node.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the embedding runner");
      const client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const r = await client.embeddings.create({
        model: "skulk-test/tiny-embed",
        input: ["a fox", "a hound"],
      });
      expect(r.data).toHaveLength(2);
      expect(r.data[0].embedding).toHaveLength(64);
      expect(r.data[0].embedding).not.toEqual(r.data[1].embedding);
      const wrong = await fetch(`${node.url}/v1/embeddings`, {
        method: "POST",
        body: JSON.stringify({ model: "unsloth/Llama-3.2-1B-Instruct-GGUF", input: "x" }),
      });
      expect(wrong.status).toBe(400);
      expect((await wrong.json()).error.message).toMatch(/not an embedding model/);
    } finally {
      await node.stop();
    }
  });
});

describe("a crashed daemon", () => {
  it("has its orphaned engine reaped on restart, and the placement serves again", async () => {
    const env = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") };
    const dataDir = tempDir();
    // Launched bare, as a daemon whose lifeline failed (or one from before lifelines) would leave it.
    const first = await startDaemon({ dataDir, env: { ...env, SKULK_ENGINE_LIFELINE: "off" } });
    const { runnerId } = await place(first);
    const [orphan] = await enginePids(dataDir);
    await first.kill({ orphanEngines: true });
    expect(pidAlive(orphan)).toBe(true);
    const second = await startDaemon({ dataDir, env });
    try {
      expect(pidAlive(orphan)).toBe(false);
      await waitForState(
        second.url,
        (s) => runnerTag(s, runnerId) === "RunnerReady",
        "the placement to serve again",
      );
      const [fresh] = await enginePids(dataDir);
      expect(fresh).not.toBe(orphan);
      const r = await fetch(`${second.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
      });
      expect(r.status).toBe(200);
    } finally {
      await second.stop();
    }
  });
});
