import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InstanceSchema } from "../../src/cluster/instances.ts";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";

const SMALL_GGUF = "unsloth/Llama-3.2-1B-Instruct-GGUF";

describe("placement routes on a real node", () => {
  let node: Daemon;
  beforeAll(async () => {
    node = await startDaemon();
  }, 60_000);
  afterAll(async () => {
    await node?.stop();
  });

  const get = async (path: string) => {
    const res = await fetch(`${node.url}${path}`);
    return { status: res.status, body: await res.json() };
  };

  it("previews a small GGUF on this node with a context limit and memory delta", async () => {
    const { status, body } = await get(`/instance/previews?model_id=${encodeURIComponent(SMALL_GGUF)}`);
    expect(status).toBe(200);
    const ok = body.previews.filter((p: { error: string | null }) => p.error === null);
    expect(ok.length).toBe(1);
    const row = ok[0];
    expect(row.instance_meta).toBe("MlxRing");
    expect(row.sharding).toBe("Pipeline");
    expect(Object.keys(row.memory_delta_by_node)).toEqual([node.nodeId]);
    expect(row.context_token_limit).toBeGreaterThan(0);
    const inst = InstanceSchema.parse(row.instance);
    expect(Object.keys(inst)[0]).toBe("MlxRingInstance");
    // The pooled and tensor combinations answer with their reasons, not silence.
    const errors = body.previews.filter((p: { error: string | null }) => p.error !== null);
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) expect(e.error.length).toBeGreaterThan(10);
  });

  it("excluding the only node leaves an explained refusal", async () => {
    const { body } = await get(
      `/instance/previews?model_id=${encodeURIComponent(SMALL_GGUF)}&excluded_node_ids=${node.nodeId}`,
    );
    expect(body.previews.every((p: { error: string | null }) => p.error !== null)).toBe(true);
    expect(body.previews[0].error).toContain("is excluded");
  });

  it("GET /instance/placement returns the tagged instance the planner picks", async () => {
    const { status, body } = await get(
      `/instance/placement?model_id=${
        encodeURIComponent(SMALL_GGUF)
      }&sharding=Pipeline&instance_meta=MlxRing&min_nodes=1`,
    );
    expect(status).toBe(200);
    const inst = InstanceSchema.parse(body);
    const ring = (inst as {
      MlxRingInstance: {
        shardAssignments: { nodeToRunner: Record<string, string> };
        contextTokenLimit: number;
      };
    })
      .MlxRingInstance;
    expect(Object.keys(ring.shardAssignments.nodeToRunner)).toEqual([node.nodeId]);
    expect(ring.contextTokenLimit).toBeGreaterThan(0);
  });

  it("an MLX card is refused with the reason, in the upstream envelope", async () => {
    const { status, body } = await get(
      `/instance/placement?model_id=${encodeURIComponent("mlx-community/Llama-3.2-1B-Instruct-4bit")}`,
    );
    expect(status).toBe(400);
    expect(body.error.message).toMatch(/MLX runner/);
  });

  it("bad input is a 400 naming the field", async () => {
    const unknown = await get(`/instance/placement?model_id=nobody/nothing`);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.param).toBe("model_id");
    const bad = await get(`/instance/placement?model_id=${encodeURIComponent(SMALL_GGUF)}&min_nodes=zero`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe("min_nodes");
    const missing = await get(`/instance/previews`);
    expect(missing.status).toBe(400);
  });

  it("POST /place_instance places a local GGUF with a context limit, and refuses an impossible pool with the reason", async () => {
    const path = await tinyModel();
    const add = await fetch(`${node.url}/models/add`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_id: "local/tiny-placement", gguf_path: path }),
    });
    expect(add.status, await add.clone().text()).toBe(200);
    const post = (body: unknown) =>
      fetch(`${node.url}/place_instance`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const res = await post({ model_id: "local/tiny-placement" });
    const placed = await res.json();
    expect(res.status, JSON.stringify(placed)).toBe(200);
    const { status, body } = await get(`/instance/${placed.instance_id}`);
    expect(status).toBe(200);
    const ring = InstanceSchema.parse(body) as {
      MlxRingInstance: {
        contextTokenLimit: number;
        shardAssignments: { nodeToRunner: Record<string, string> };
      };
    };
    expect(Object.keys(ring.MlxRingInstance.shardAssignments.nodeToRunner)).toEqual([node.nodeId]);
    expect(ring.MlxRingInstance.contextTokenLimit).toBeGreaterThan(0);

    const pool = await post({ model_id: "local/tiny-placement", min_nodes: 2 });
    expect(pool.status).toBe(400);
    // A local GGUF may be pooled, but one node cannot make a pool of two.
    expect((await pool.json()).error.message).toMatch(
      /no pool is possible: [01] node\(s\) can join an RPC pool/,
    );
    const bad = await post({ model_id: "local/tiny-placement", sharding: "Diagonal" });
    expect(bad.status).toBe(400);

    const del = await fetch(`${node.url}/instance/${placed.instance_id}`, { method: "DELETE" });
    expect(del.status).toBe(200);
    await del.body?.cancel();
  });
});
