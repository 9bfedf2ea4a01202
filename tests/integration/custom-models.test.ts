/** Local GGUF files as custom cards on a real daemon: add, list, survive a restart, refuse bad input, delete; CLI both ways. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";

const dir = tempDir("custom-models-");
const daemons: Daemon[] = [];
let model: string;

beforeAll(async () => {
  model = await tinyModel({ layers: 2, seed: 33 });
});
afterAll(async () => {
  for (const d of daemons) await d.kill();
  Deno.removeSync(dir, { recursive: true });
});

async function start(dataDir: string): Promise<Daemon> {
  const d = await startDaemon({ dataDir });
  daemons.push(d);
  return d;
}

const post = (d: Daemon, path: string, body: unknown) =>
  fetch(`${d.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

type Entry = {
  id: string;
  is_custom: boolean;
  context_length: number;
  family: string;
  quantization: string;
  tasks: string[];
  storage_size_megabytes: number;
};
const listed = async (d: Daemon, query = ""): Promise<Entry[]> =>
  (await (await fetch(`${d.url}/models${query}`)).json()).data;

describe("custom GGUF cards", () => {
  it("adds a local GGUF through the API, lists it, keeps it across a restart, and deletes it", async () => {
    const dataDir = `${dir}/node-a`;
    let d = await start(dataDir);
    const res = await post(d, "/models/add", { model_id: "test/tiny-two", gguf_path: model });
    const entry = await res.json();
    expect(res.status, JSON.stringify(entry)).toBe(200);
    expect(entry).toMatchObject({
      id: "test/tiny-two",
      is_custom: true,
      context_length: 4096,
      family: "llama",
      quantization: "F16",
      tasks: ["TextGeneration"],
    });
    expect(entry.storage_size_megabytes).toBe(Math.round(Deno.statSync(model).size / 1e6));

    expect((await listed(d)).find((m) => m.id === "test/tiny-two")).toMatchObject({ is_custom: true });
    // A local file needs no download: it counts as downloaded.
    expect((await listed(d, "?status=downloaded")).map((m) => m.id)).toContain("test/tiny-two");
    const events = await (await fetch(`${d.url}/events`)).json();
    const added = events.find((e: { event: Record<string, unknown> }) => "CustomModelCardAdded" in e.event);
    expect(added.event.CustomModelCardAdded.modelCard).toMatchObject({
      modelId: "test/tiny-two",
      nLayers: 2,
      hiddenSize: 64,
      ggufPath: model,
    });
    expect(added.event.CustomModelCardAdded.modelCard.placement.compatibleBackends).toContain(
      "llama_cpp-cpu",
    );

    expect(await d.stop()).toBe(0);
    d = await start(dataDir);
    expect((await listed(d)).find((m) => m.id === "test/tiny-two")).toMatchObject({
      is_custom: true,
      context_length: 4096,
    });

    const del = await fetch(`${d.url}/models/custom/test/tiny-two`, { method: "DELETE" });
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ message: "Model card deleted", model_id: "test/tiny-two" });
    expect((await listed(d)).map((m) => m.id)).not.toContain("test/tiny-two");
    expect((await fetch(`${d.url}/models/custom/test/tiny-two`, { method: "DELETE" })).status).toBe(404);
    const bundled = (await listed(d)).find((m) => !m.is_custom)!.id;
    const refused = await fetch(`${d.url}/models/custom/${bundled}`, { method: "DELETE" });
    expect(refused.status).toBe(404);
    expect((await refused.json()).error.message).toContain("is a bundled card");

    expect(await d.stop()).toBe(0);
    d = await start(dataDir);
    expect((await listed(d)).map((m) => m.id)).not.toContain("test/tiny-two");
  });

  it("refuses bad input with a 400 that names the problem", async () => {
    const d = await start(`${dir}/node-b`);
    Deno.writeTextFileSync(`${dir}/notes.gguf`, "this is not a model, just text\n".repeat(64));
    const bundled = (await listed(d)).find((m) => !m.is_custom)!.id;
    const cases: [unknown, number, RegExp][] = [
      [{ gguf_path: `${dir}/missing.gguf` }, 400, new RegExp(`no file at ${dir}/missing\\.gguf`)],
      [{ gguf_path: `${dir}/notes.gguf` }, 400, /notes\.gguf is not a readable GGUF file/],
      [{ gguf_path: "relative/model.gguf" }, 400, /gguf_path must be an absolute path/],
      [{ gguf_path: dir }, 400, /is not a file/],
      [{ model_id: "has space", gguf_path: model }, 400, /model_id: may use only letters/],
      // A model_id alone is a hub add (tests/integration/hub-models.test.ts, against a loopback hub).
      [{ model_id: "org/some-hub-model", quant: "Q4 K M" }, 400, /quant: must be a quantisation name/],
      [{}, 400, /send model_id \(a hub id\) or gguf_path/],
      [{ gguf_path: model, extra: 1 }, 400, /invalid request/],
      [{ model_id: bundled, gguf_path: model }, 409, /is a bundled card/],
    ];
    for (const [body, status, message] of cases) {
      const res = await post(d, "/models/add", body);
      const out = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(out.error.message).toMatch(message);
    }
    expect((await listed(d)).filter((m) => m.is_custom)).toEqual([]);
  });

  it("skulk models add goes through the running daemon, and writes SQLite when none runs", async () => {
    const dataDir = `${dir}/node-c`;
    // No daemon: written to the data dir, listed once a node starts there.
    const offline = await skulk([
      "models",
      "add",
      "--path",
      model,
      "--id",
      "test/offline",
      "--data-dir",
      dataDir,
    ]);
    expect(offline.code, offline.stderr).toBe(0);
    expect(offline.stdout).toContain("no node runs there");
    const d = await start(dataDir);
    expect((await listed(d)).find((m) => m.id === "test/offline")).toMatchObject({ is_custom: true });

    // With the daemon up, the CLI asks it, so the running node lists the card at once.
    const online = await skulk(["models", "add", "--path", model, "--data-dir", dataDir]);
    expect(online.code, online.stderr).toBe(0);
    expect(online.stdout).toContain(`on the node at ${d.url}`);
    const id = `local/${model.split("/").at(-1)!.replace(/\.gguf$/, "")}`;
    expect((await listed(d)).map((m) => m.id)).toContain(id);
    const cli = await skulk(["models", "--data-dir", dataDir, "--search", "offline"]);
    expect(cli.stdout).toMatch(/test\/offline \*/);

    const bad = await skulk(["models", "add", "--path", `${dir}/nope.gguf`, "--data-dir", dataDir]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain(`no file at ${dir}/nope.gguf`);

    const rm = await skulk(["models", "remove", id, "--data-dir", dataDir]);
    expect(rm.code, rm.stderr).toBe(0);
    expect((await listed(d)).map((m) => m.id)).not.toContain(id);
    // Five CLI processes and a daemon: a busy machine takes minutes, an idle one under 20 s.
  }, 240_000);

  it("a registered local GGUF is served by this node's worker through /v1/chat/completions", async () => {
    const d = await startDaemon({
      dataDir: `${dir}/node-d`,
      env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") },
    });
    daemons.push(d);
    expect((await post(d, "/models/add", { model_id: "test/served", gguf_path: model })).status).toBe(200);
    const events = await (await fetch(`${d.url}/events`)).json();
    const card =
      events.find((e: { event: Record<string, unknown> }) => "CustomModelCardAdded" in e.event).event
        .CustomModelCardAdded.modelCard;
    const shard = {
      PipelineShardMetadata: {
        modelCard: card,
        deviceRank: 0,
        worldSize: 1,
        resolvedBackend: "llama_cpp-cpu",
        startLayer: 0,
        endLayer: 2,
        nLayers: 2,
      },
    };
    const instance = {
      LlamaRpcInstance: {
        instanceId: "served-1",
        shardAssignments: {
          modelId: "test/served",
          runnerToShard: { "runner-1": shard },
          nodeToRunner: { [d.nodeId]: "runner-1" },
        },
        driverNode: d.nodeId,
        donorEndpoints: {},
      },
    };
    expect((await post(d, "/instance", { instance })).status).toBe(200);
    let status: Record<string, unknown> | undefined;
    for (let i = 0; i < 300 && !(status && ("RunnerReady" in status || "RunnerFailed" in status)); i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await (await fetch(`${d.url}/state`)).json()).runners?.["runner-1"];
    }
    expect(status, JSON.stringify(status)).toHaveProperty("RunnerReady");
    const chat = await post(d, "/v1/chat/completions", {
      model: "test/served",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 12,
    });
    const out = await chat.json();
    expect(chat.status, JSON.stringify(out)).toBe(200);
    expect(out.choices[0].message.content.length).toBeGreaterThan(0);
    expect(out.usage.completion_tokens).toBe(12);
    // A clean stop ends the runner's llama-server too (afterAll's SIGKILL would orphan it).
    expect(await d.stop()).toBe(0);
  });
});
