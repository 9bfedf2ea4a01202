import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Catalog } from "../../src/models/catalog.ts";
import { applyResolvedFacts, resolveFromHub, shardFiles } from "../../src/models/facts.ts";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";

/** A stand-in hub on loopback: answers HEAD for the files it knows with an LFS-style size. */
function fakeHub(sizes: Record<string, number>) {
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const path = decodeURIComponent(new URL(req.url).pathname);
    seen.push(`${req.method} ${path}`);
    const size = sizes[path];
    if (size === undefined) return new Response("not found", { status: 404 });
    return new Response(null, { status: 200, headers: { "x-linked-size": String(size) } });
  });
  return { server, seen, url: `http://127.0.0.1:${server.addr.port}` };
}

const BGE = "CompendiumLabs/bge-small-en-v1.5-gguf";
const BGE_PATH = `/${BGE}/resolve/main/bge-small-en-v1.5-f16.gguf`;

describe("facts resolved on first contact", () => {
  it("a sharded GGUF's size is the sum of its shards plus the projector", async () => {
    expect(shardFiles("a/m-00001-of-00003.gguf")).toEqual([
      "a/m-00001-of-00003.gguf",
      "a/m-00002-of-00003.gguf",
      "a/m-00003-of-00003.gguf",
    ]);
    const card = { ...Catalog.bundled().get("ggml-org/gemma-3-4b-it-GGUF")! };
    const hub = fakeHub({
      "/ggml-org/gemma-3-4b-it-GGUF/resolve/main/gemma-3-4b-it-Q4_K_M.gguf": 2_000,
      "/ggml-org/gemma-3-4b-it-GGUF/resolve/main/mmproj-model-f16.gguf": 300,
    });
    try {
      const facts = await resolveFromHub(card, { endpoint: hub.url, fetch });
      expect(facts.storageBytes).toBe(2_300);
      expect(applyResolvedFacts(card, facts).storage_size).toEqual({ in_bytes: 2_300 });
    } finally {
      await hub.server.shutdown();
    }
  });

  it("a missing file is reported with the URL and status", async () => {
    const hub = fakeHub({});
    try {
      await expect(resolveFromHub(Catalog.bundled().get(BGE)!, { endpoint: hub.url, fetch })).rejects.toThrow(
        /404/,
      );
    } finally {
      await hub.server.shutdown();
    }
  });

  describe("on a real node", () => {
    let node: Daemon;
    let hub: ReturnType<typeof fakeHub>;
    beforeAll(async () => {
      hub = fakeHub({ [BGE_PATH]: 67_000_000 });
      node = await startDaemon({ env: { HF_ENDPOINT: hub.url } });
    }, 60_000);
    afterAll(async () => {
      await node?.stop();
      await hub?.server.shutdown().catch(() => {});
    });

    it("previews a card whose size was open, records it, and reuses it without the hub", async () => {
      const q = `/instance/previews?model_id=${encodeURIComponent(BGE)}`;
      const entry = async () =>
        (await (await fetch(`${node.url}/models`)).json()).data.find((m: { id: string }) => m.id === BGE);
      // Open until first needed: listed as unknown (null), never as 0.
      expect(await entry()).toMatchObject({ storage_size_megabytes: null, storage_size_bytes: null });
      const first = await (await fetch(`${node.url}${q}`)).json();
      const ok = first.previews.find((p: { error: string | null }) => p.error === null);
      expect(ok, JSON.stringify(first)).toBeDefined();
      expect(Object.values(ok.memory_delta_by_node)[0]).toBeGreaterThan(67_000_000);
      expect(hub.seen).toContain(`HEAD ${BGE_PATH}`);
      await hub.server.shutdown();
      const again = await (await fetch(`${node.url}${q}`)).json();
      expect(again.previews.some((p: { error: string | null }) => p.error === null)).toBe(true);
      // Recorded, so the catalogue lists it from then on without asking the hub again.
      expect(await entry()).toMatchObject({ storage_size_megabytes: 67, storage_size_bytes: 67_000_000 });
      const sql = await skulk([
        "sql",
        "--data-dir",
        node.dataDir,
        "--json",
        `SELECT model_id, storage_bytes FROM resolved_model_facts`,
      ]);
      expect(sql.stdout).toContain("67000000");
    });
  });
});
