/**
 * Models from the hub on a real node against a loopback hub serving real GGUF files from the dev writer: search,
 * add by id (quantisation choice, split shards, projector, MLX config), refusals (missing, private, hostile,
 * offline), the card surviving a restart, the CLI both ways, and an added model placed, downloaded and chatting.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { runnerTag, waitForState } from "../helpers/cluster.ts";

const dir = tempDir("hub-models-");
const BGE = "CompendiumLabs/bge-small-en-v1.5-gguf";
const TOKEN = "hub-secret-token";
let hub: FakeHub;
let node: Daemon;
let small: string;
let other: string;

function repo(name: string, files: Record<string, string | Uint8Array>): string {
  const root = `${dir}/repos/${name.replace("/", "--")}`;
  Deno.mkdirSync(root, { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    const target = `${root}/${path}`;
    Deno.mkdirSync(target.split("/").slice(0, -1).join("/"), { recursive: true });
    if (typeof content === "string" && content.startsWith("/")) Deno.copyFileSync(content, target);
    else if (typeof content === "string") Deno.writeTextFileSync(target, content);
    else Deno.writeFileSync(target, content);
  }
  return root;
}

const post = (path: string, body: unknown, d = node) =>
  fetch(`${d.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const size = (p: string) => Deno.statSync(p).size;

beforeAll(async () => {
  small = await tinyModel({ layers: 2, seed: 9 });
  other = await tinyModel({ layers: 3, seed: 21 });
  const repos = {
    "acme/Tiny-GGUF": repo("acme/Tiny-GGUF", {
      "README.md": "# tiny\n",
      "Tiny-F16.gguf": other,
      "Tiny-Q8_0.gguf": other,
      "Tiny-Q4_K_M.gguf": small,
    }),
    "acme/Split-GGUF": repo("acme/Split-GGUF", {
      "Q4_K_M/Split-Q4_K_M-00001-of-00003.gguf": small,
      "Q4_K_M/Split-Q4_K_M-00002-of-00003.gguf": new Uint8Array(1000),
      "Q4_K_M/Split-Q4_K_M-00003-of-00003.gguf": new Uint8Array(2000),
      "mmproj-Split-f16.gguf": new Uint8Array(500),
    }),
    "acme/Broken-GGUF": repo("acme/Broken-GGUF", {
      "Broken-Q4_K_M-00001-of-00003.gguf": small,
      "Broken-Q4_K_M-00003-of-00003.gguf": new Uint8Array(10),
    }),
    "acme/Tiny-MLX": repo("acme/Tiny-MLX", {
      "config.json": JSON.stringify({
        model_type: "qwen3",
        num_hidden_layers: 28,
        hidden_size: 1024,
        num_attention_heads: 16,
        num_key_value_heads: 8,
        head_dim: 128,
        max_position_embeddings: 40960,
        quantization: { group_size: 64, bits: 4 },
      }),
      "model.safetensors": new Uint8Array(4096),
      "tokenizer.json": "{}",
    }),
    "acme/Private-GGUF": repo("acme/Private-GGUF", { "Private-Q4_K_M.gguf": small }),
    "acme/Hostile-GGUF": repo("acme/Hostile-GGUF", { "Hostile-Q4_K_M.gguf": small }),
    "acme/Readme-Only": repo("acme/Readme-Only", { "README.md": "nothing here\n" }),
  };
  hub = await startFakeHub({
    repos,
    private: { "acme/Private-GGUF": TOKEN },
    hostile: { "acme/Hostile-GGUF": [{ path: "../../escape.gguf", file: small }] },
    listed: {
      "acme/Tiny-GGUF": { downloads: 500, likes: 9, tags: ["gguf", "llama"] },
      "acme/Split-GGUF": { downloads: 1200, likes: 3, tags: ["gguf"] },
      "acme/Tiny-MLX": { downloads: 40, tags: ["mlx"] },
      "mlx-community/Tiny-4bit": { downloads: 7000, tags: ["mlx"] },
      "other/tiny-notes": { downloads: 10 },
    },
  });
  node = await startDaemon({
    dataDir: `${dir}/node`,
    env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), HF_ENDPOINT: hub.url },
  });
}, 120_000);

afterAll(async () => {
  await node?.kill();
  await hub?.close();
  Deno.removeSync(dir, { recursive: true });
});

describe("GET /models/search", () => {
  it("lists the hub's matches, most downloaded first, limited, and mlx-community only when asked", async () => {
    const res = await fetch(`${node.url}/models/search?query=TINY&limit=3`);
    const found = await res.json();
    expect(res.status, JSON.stringify(found)).toBe(200);
    expect(found.map((m: { id: string }) => m.id)).toEqual([
      "mlx-community/Tiny-4bit",
      "acme/Tiny-GGUF",
      "acme/Tiny-MLX",
    ]);
    expect(found[1]).toEqual({
      id: "acme/Tiny-GGUF",
      author: "acme",
      downloads: 500,
      likes: 9,
      last_modified: "2026-01-01T00:00:00.000Z",
      tags: ["gguf", "llama"],
    });
    // The private repo is not listed to a node without its token.
    const all = await (await fetch(`${node.url}/models/search?limit=100`)).json();
    expect(all.map((m: { id: string }) => m.id)).not.toContain("acme/Private-GGUF");
    expect(all).toHaveLength(8);
    const mlx = await (await fetch(`${node.url}/models/search?query=tiny&mlx_only=true`)).json();
    expect(mlx.map((m: { id: string }) => m.id)).toEqual(["mlx-community/Tiny-4bit"]);
    const listing = hub.requests.filter((r) => r.path === "/api/models");
    expect(listing.length).toBeGreaterThanOrEqual(3);
  });

  it("refuses a bad limit or query with a 400 naming it", async () => {
    for (const q of ["limit=0", "limit=101", "limit=ten", "mlx_only=yes", `query=${"x".repeat(201)}`]) {
      const res = await fetch(`${node.url}/models/search?${q}`);
      const body = await res.json();
      expect(res.status, q).toBe(400);
      expect(body.error.param).toBe(q.split("=")[0]);
    }
  });
});

describe("POST /models/add from the hub", () => {
  it("adds a GGUF repo with the preferred quantisation, its facts read from the header through HTTP Range", async () => {
    const before = hub.requests.length;
    const res = await post("/models/add", { model_id: "acme/Tiny-GGUF" });
    const entry = await res.json();
    expect(res.status, JSON.stringify(entry)).toBe(200);
    expect(entry).toMatchObject({
      id: "acme/Tiny-GGUF",
      is_custom: true,
      family: "llama",
      context_length: 4096,
      gguf_file: "Tiny-Q4_K_M.gguf",
      mmproj_file: null,
      storage_size_bytes: size(small),
      available_quants: ["Q4_K_M", "Q8_0", "F16"],
      servable: { ok: true, reason: null },
    });
    const ranged = hub.requests.slice(before).filter((r) => r.path.endsWith("/Tiny-Q4_K_M.gguf"));
    expect(ranged.length).toBeGreaterThan(0);
    expect(ranged.every((r) => r.method === "GET" && r.range?.startsWith("bytes=") && r.status === 206)).toBe(
      true,
    );
    // No other model file was touched: the listing said which one to read.
    expect(hub.requests.slice(before).some((r) => /Tiny-(Q8_0|F16)\.gguf$/.test(r.path))).toBe(false);
    console.log(
      `header of a ${
        size(small)
      }-byte tiny GGUF: ${entry.header_bytes_read} bytes in ${ranged.length} range(s)`,
    );
    expect(entry.header_bytes_read).toBeGreaterThan(0);

    const events = await (await fetch(`${node.url}/events`)).json();
    const added = events.filter((e: { event: Record<string, unknown> }) => "CustomModelCardAdded" in e.event)
      .map((e: { event: { CustomModelCardAdded: { modelCard: Record<string, unknown> } } }) =>
        e.event.CustomModelCardAdded.modelCard
      ).find((c: { modelId: string }) => c.modelId === "acme/Tiny-GGUF");
    expect(added).toMatchObject({ nLayers: 2, hiddenSize: 64, numKeyValueHeads: 2, numAttentionHeads: 4 });
    expect(added.ggufPath).toBeUndefined();
  });

  it("takes the asked quantisation, or names the ones there are", async () => {
    const res = await post("/models/add", { model_id: "acme/Tiny-GGUF", quant: "q8_0" });
    const entry = await res.json();
    expect(res.status, JSON.stringify(entry)).toBe(200);
    expect(entry).toMatchObject({ gguf_file: "Tiny-Q8_0.gguf", storage_size_bytes: size(other) });
    const missing = await post("/models/add", { model_id: "acme/Tiny-GGUF", quant: "Q3_K_S" });
    const err = await missing.json();
    expect(missing.status).toBe(400);
    expect(err.error.param).toBe("quant");
    expect(err.error.message).toBe('acme/Tiny-GGUF has no "Q3_K_S" quantisation; it has Q4_K_M, Q8_0, F16');
    const bad = await post("/models/add", { model_id: "acme/Tiny-GGUF", quant: "../x" });
    expect(bad.status).toBe(400);
    // Put the preferred one back for the serving test.
    expect((await post("/models/add", { model_id: "acme/Tiny-GGUF" })).status).toBe(200);
  });

  it("groups split shards into one model with the summed size and notes the projector", async () => {
    const res = await post("/models/add", { model_id: "acme/Split-GGUF" });
    const entry = await res.json();
    expect(res.status, JSON.stringify(entry)).toBe(200);
    expect(entry).toMatchObject({
      gguf_file: "Q4_K_M/Split-Q4_K_M-00001-of-00003.gguf",
      mmproj_file: "mmproj-Split-f16.gguf",
      storage_size_bytes: size(small) + 1000 + 2000 + 500,
      tags: expect.arrayContaining(["vision"]),
    });
    const broken = await post("/models/add", { model_id: "acme/Broken-GGUF" });
    const err = await broken.json();
    expect(broken.status).toBe(400);
    expect(err.error.message).toContain(
      "acme/Broken-GGUF: every split GGUF is incomplete: Broken-Q4_K_M (2 of 3",
    );
  });

  it("adds an MLX repo from config.json, which placement then refuses with the reason", async () => {
    const res = await post("/models/add", { model_id: "acme/Tiny-MLX" });
    const entry = await res.json();
    expect(res.status, JSON.stringify(entry)).toBe(200);
    expect(entry).toMatchObject({
      id: "acme/Tiny-MLX",
      family: "qwen3",
      quantization: "4bit",
      context_length: 40960,
      storage_size_bytes: 4096,
      gguf_file: null,
      servable: { ok: false },
    });
    expect(entry.servable.reason).toContain("MLX runner, which Linux nodes lack");
    const place = await post("/place_instance", { model_id: "acme/Tiny-MLX" });
    expect(place.status).toBe(400);
    expect((await place.json()).error.message).toContain("MLX");
  });

  it("refuses a missing, private, hostile or empty repo with a 4xx naming it", async () => {
    const cases: [string, number, RegExp][] = [
      ["acme/Nope-GGUF", 404, /acme\/Nope-GGUF.*not found on the hub \(404\)/],
      ["acme/Private-GGUF", 403, /acme\/Private-GGUF.*refused with 401.*set HF_TOKEN/],
      [
        "acme/Hostile-GGUF",
        400,
        /acme\/Hostile-GGUF: the hub lists a file "..\/..\/escape.gguf" that has a '.' or '..' part/,
      ],
      ["acme/Readme-Only", 400, /acme\/Readme-Only has neither GGUF files nor a config.json/],
      ["bad..id/x", 400, /model_id/],
    ];
    for (const [id, status, message] of cases) {
      const res = await post("/models/add", { model_id: id });
      const body = await res.json();
      expect(res.status, `${id}: ${JSON.stringify(body)}`).toBe(status);
      expect(body.error.message, id).toMatch(message);
    }
    const models = (await (await fetch(`${node.url}/models`)).json()).data.map((m: { id: string }) => m.id);
    expect(models).not.toContain("acme/Hostile-GGUF");
    expect(models).not.toContain("acme/Private-GGUF");
  });
});

describe("the CLI", () => {
  it(
    "searches and adds through the running node, and straight from the hub (with a token) without one",
    async () => {
      const found = await skulk(["models", "search", "split", "--url", node.url]);
      expect(found.code, found.stderr).toBe(0);
      expect(found.stdout).toMatch(/acme\/Split-GGUF\s+1200 downloads\s+3 likes\s+gguf/);
      const added = await skulk(["models", "add", "acme/Tiny-GGUF", "--quant", "Q8_0", "--url", node.url]);
      expect(added.code, added.stderr).toBe(0);
      expect(added.stdout).toContain("added acme/Tiny-GGUF (");
      expect(added.stdout).toContain("Tiny-Q8_0.gguf");
      // Back to the preferred quantisation, from the CLI too: this card is the one the serving test below places
      // and chats with, so search, add and a served answer all go through the CLI's card.
      const back = await skulk(["models", "add", "acme/Tiny-GGUF", "--url", node.url]);
      expect(back.code, back.stderr).toBe(0);
      expect(back.stdout).toContain("Tiny-Q4_K_M.gguf");

      const offline = tempDir("hub-cli-");
      const env = { HF_ENDPOINT: hub.url, SKULK_DATA_DIR: offline };
      const refused = await skulk(["models", "add", "acme/Private-GGUF"], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("acme/Private-GGUF: listing files refused with 401");
      const ok = await skulk(["models", "add", "acme/Private-GGUF", "--json"], { ...env, HF_TOKEN: TOKEN });
      expect(ok.code, ok.stderr).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({
        model_id: "acme/Private-GGUF",
        gguf_file: "Private-Q4_K_M.gguf",
      });
      const listed = await skulk(["models", "--json", "--search", "private"], env);
      expect(listed.stdout).toContain("acme/Private-GGUF");
      const search = await skulk(["models", "search", "tiny", "--json", "--limit", "2"], env);
      expect(JSON.parse(search.stdout).map((m: { id: string }) => m.id)).toEqual([
        "mlx-community/Tiny-4bit",
        "acme/Tiny-GGUF",
      ]);
      Deno.removeSync(offline, { recursive: true });
    },
    120_000,
  );
});

describe("an added hub model on a real node", () => {
  it(
    "is placed (by the CLI), downloaded from the hub, serves a chat, and its card survives a restart",
    async () => {
      const unknown = await skulk(["models", "launch", "acme/Nope-GGUF", "--url", node.url]);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toContain("unknown model acme/Nope-GGUF");
      // The card the CLI searched for and added (above) is placed by the CLI, which waits until it serves.
      const launched = await skulk([
        "models",
        "launch",
        "acme/Tiny-GGUF",
        "--url",
        node.url,
        "--timeout",
        "180",
      ]);
      expect(launched.code, launched.stderr).toBe(0);
      expect(launched.stdout).toMatch(/^placing acme\/Tiny-GGUF as instance /);
      expect(launched.stdout).toContain("acme/Tiny-GGUF is ready");
      const s = await waitForState(
        node.url,
        (st) =>
          Object.values(st.instances).some((i) => {
            const body = Object.values(i as Record<string, { shardAssignments: Record<string, unknown> }>)[0];
            if (body.shardAssignments.modelId !== "acme/Tiny-GGUF") return false;
            const runner = Object.values(body.shardAssignments.nodeToRunner as Record<string, string>)[0];
            return runnerTag(st, runner) === "RunnerReady";
          }),
        "the added hub model to serve",
        180_000,
      );
      expect(
        (s.downloads[node.nodeId] ?? []).some((p: Record<string, { shardMetadata?: unknown }>) =>
          "DownloadCompleted" in p && JSON.stringify(p).includes("acme/Tiny-GGUF")
        ),
      ).toBe(true);
      expect(size(`${node.dataDir}/models/acme--Tiny-GGUF/Tiny-Q4_K_M.gguf`)).toBe(size(small));
      const chat = await post("/v1/chat/completions", {
        model: "acme/Tiny-GGUF",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 6,
      });
      const answer = await chat.json();
      expect(chat.status, JSON.stringify(answer)).toBe(200);
      expect(answer.choices[0].message.content.length).toBeGreaterThan(0);

      for (const id of Object.keys(s.instances)) {
        await fetch(`${node.url}/instance/${id}`, { method: "DELETE" });
      }
      await waitForState(node.url, (st) => Object.keys(st.instances).length === 0, "the instances to go");
      expect(await node.stop()).toBe(0);
      node = await startDaemon({
        dataDir: `${dir}/node`,
        env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), HF_ENDPOINT: hub.url },
      });
      const models = (await (await fetch(`${node.url}/models`)).json()).data;
      expect(models.find((m: { id: string }) => m.id === "acme/Tiny-GGUF")).toMatchObject({
        is_custom: true,
        storage_size_bytes: size(small),
      });
      expect(models.find((m: { id: string }) => m.id === "acme/Split-GGUF")).toMatchObject({
        is_custom: true,
      });
    },
    300_000,
  );
});

describe("an unreachable or offline hub", () => {
  it("answers 503 naming the hub", async () => {
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const deadUrl = `http://127.0.0.1:${(closed.addr as Deno.NetAddr).port}`;
    closed.close();
    const dead = await startDaemon({ dataDir: `${dir}/dead`, env: { HF_ENDPOINT: deadUrl } });
    const off = await startDaemon({
      dataDir: `${dir}/off`,
      env: { HF_ENDPOINT: hub.url, SKULK_OFFLINE: "1" },
    });
    try {
      for (
        const [d, url, what] of [[dead, deadUrl, "unreachable"], [off, hub.url, "offline mode"]] as const
      ) {
        for (
          const res of [
            await fetch(`${d.url}/models/search?query=tiny`),
            await post("/models/add", { model_id: "acme/Tiny-GGUF" }, d),
          ]
        ) {
          const body = await res.json();
          expect(res.status, JSON.stringify(body)).toBe(503);
          expect(body.error.message).toContain(url);
          expect(body.error.message).toContain(what);
        }
      }
    } finally {
      await dead.kill();
      await off.kill();
    }
  }, 120_000);

  it(
    "a hub refusing the node (401 everywhere) is a 502 for a search and a 403 naming the repo for an add",
    async () => {
      const locked = await startFakeHub({
        repos: {
          "acme/Tiny-GGUF": `${dir}/repos/acme--Tiny-GGUF`,
          // A bundled card whose size is open, served (as a tiny model) only to a node with the token.
          [BGE]: repo(BGE, { "bge-small-en-v1.5-f16.gguf": small }),
        },
        token: "tok-7c1e9f0a55",
      });
      const d = await startDaemon({ dataDir: `${dir}/locked`, env: { HF_ENDPOINT: locked.url } });
      const withToken = await startDaemon({
        dataDir: `${dir}/with-token`,
        env: { HF_ENDPOINT: locked.url, HF_TOKEN: "tok-7c1e9f0a55" },
      });
      try {
        const search = await fetch(`${d.url}/models/search?query=tiny`);
        const s = await search.json();
        expect(search.status, JSON.stringify(s)).toBe(502);
        expect(s.error.message).toContain(
          `the model hub at ${locked.url} gave an answer this node cannot use`,
        );
        const add = await post("/models/add", { model_id: "acme/Tiny-GGUF" }, d);
        const a = await add.json();
        expect(add.status, JSON.stringify(a)).toBe(403);
        expect(a.error.message).toContain("acme/Tiny-GGUF: listing files refused with 401");

        // With the token the node searches and adds; the token stays on this node, out of the card and the log.
        expect((await fetch(`${withToken.url}/models/search?query=tiny`)).status).toBe(200);
        const ok = await post("/models/add", { model_id: "acme/Tiny-GGUF" }, withToken);
        expect(ok.status, await ok.clone().text()).toBe(200);
        expect(await ok.text()).not.toContain("tok-7c1e9f0a55");
        const events = await (await fetch(`${withToken.url}/events`)).text();
        expect(events).toContain("CustomModelCardAdded");
        expect(events).not.toContain("tok-7c1e9f0a55");
        expect(locked.requests.filter((r) => r.authorization === "Bearer tok-7c1e9f0a55").length)
          .toBeGreaterThan(0);

        // An open size is resolved (HEAD, and the header through Range) with the token on first need, then listed.
        const bge = async () =>
          (await (await fetch(`${withToken.url}/models`)).json()).data.find((m: { id: string }) =>
            m.id === BGE
          );
        expect(await bge()).toMatchObject({ storage_size_bytes: null });
        const previews = await (await fetch(`${withToken.url}/instance/previews?model_id=${BGE}`)).json();
        expect(
          previews.previews.some((p: { error: string | null }) => p.error === null),
          JSON.stringify(previews),
        )
          .toBe(true);
        expect(await bge()).toMatchObject({ storage_size_bytes: size(small) });
        const file = `/${BGE}/resolve/main/bge-small-en-v1.5-f16.gguf`;
        const reads = locked.requests.filter((r) => r.path === file);
        expect(reads.map((r) => `${r.method} ${r.status} ${r.authorization}`)).toEqual([
          "HEAD 200 Bearer tok-7c1e9f0a55",
          "GET 206 Bearer tok-7c1e9f0a55",
        ]);
      } finally {
        await d.kill();
        await withToken.kill();
        await locked.close();
      }
    },
    120_000,
  );
});
