import { describe, expect, it } from "vitest";
import { applyEvent, emptyState } from "../../src/cluster/state.ts";
import { Catalog } from "../../src/models/catalog.ts";
import {
  contextTokenLimit,
  GPU_VRAM_WORKING_SET_FRACTION,
  GPU_WORKING_SET_FRACTION,
  kvBytesPerToken,
  MEMORY_OVERHEAD_FLOOR,
  shardFootprint,
  UMA_GPU_OS_HEADROOM,
} from "../../src/placement/estimate.ts";
import { placementRequest, plan } from "../../src/placement/planner.ts";
import { placementPreviews } from "../../src/placement/previews.ts";
import { buildClusterView } from "../../src/placement/view.ts";
import { clusterView, counterIds, entries, GB, type NodeSpec, NOW } from "../helpers/synthetic-cluster.ts";

const catalog = Catalog.bundled();
const LLAMA_70B = catalog.get("bartowski/Llama-3.3-70B-Instruct-GGUF")!;
const LLAMA_1B = catalog.get("unsloth/Llama-3.2-1B-Instruct-GGUF")!;

describe("usable memory per node", () => {
  const table: { name: string; spec: NodeSpec; expect: number; kind: string }[] = [
    {
      name: "CPU node: 75% of RAM",
      spec: { id: "c", ram: 64 * GB },
      expect: GPU_WORKING_SET_FRACTION * 64 * GB,
      kind: "system",
    },
    {
      name: "CPU node: available RAM when lower",
      spec: { id: "c", ram: 64 * GB, ramAvailable: 10 * GB },
      expect: 10 * GB,
      kind: "system",
    },
    {
      name: "discrete GPU: 90% of VRAM",
      spec: { id: "g", ram: 64 * GB, vram: 24 * GB },
      expect: GPU_VRAM_WORKING_SET_FRACTION * 24 * GB,
      kind: "discrete",
    },
    {
      name: "discrete GPU: free VRAM when lower",
      spec: { id: "g", ram: 64 * GB, vram: 24 * GB, vramUsed: 20 * GB },
      expect: 4 * GB,
      kind: "discrete",
    },
    {
      name: "GPU present but a CPU-only build: system RAM",
      spec: { id: "g", ram: 64 * GB, vram: 24 * GB, computes: ["cpu"] },
      expect: GPU_WORKING_SET_FRACTION * 64 * GB,
      kind: "system",
    },
    {
      name: "UMA APU: VRAM carve plus GTT spill above the OS headroom",
      spec: {
        id: "s",
        ram: 128 * GB,
        vram: 0.5 * GB,
        gtt: 124 * GB,
        unified: true,
        vendor: "amd",
        computes: ["vulkan"],
      },
      expect: 0.9 * 0.5 * GB + (128 * GB - UMA_GPU_OS_HEADROOM),
      kind: "unified",
    },
    {
      name: "Apple unified memory: Metal's working-set cap",
      spec: { id: "m", ram: 64 * GB, vram: 64 * GB, unified: true, vendor: "apple", computes: ["metal"] },
      expect: GPU_WORKING_SET_FRACTION * 64 * GB,
      kind: "unified",
    },
  ];
  for (const t of table) {
    it(t.name, () => {
      const [n] = clusterView([t.spec]).nodes;
      expect(n.usable).toBeCloseTo(t.expect, -3);
      expect(n.memoryKind).toBe(t.kind);
    });
  }

  it("a node unheard beyond the timeout is unreachable", () => {
    const v = clusterView([{ id: "a", ram: GB }, { id: "b", ram: GB, silentMs: 31_000 }]);
    expect(v.nodes.map((n) => n.reachable)).toEqual([true, false]);
  });

  it("an instance not yet loaded reserves memory and its ports", () => {
    const specs = [{ id: "a", ram: 32 * GB }];
    const r = plan(clusterView(specs), LLAMA_1B, placementRequest(LLAMA_1B.model_id), counterIds());
    if (!r.ok) throw new Error(r.error);
    const state = applyEvent(emptyState(), { InstanceCreated: { instance: r.placement.instance } } as never);
    const v = buildClusterView(state, entries(specs), NOW, { nodeTimeoutMs: 30_000 });
    expect(v.nodes[0].reserved).toBeCloseTo(r.placement.memoryDeltaByNode.a, -3);
    expect(v.portsInUse.length).toBe(1);
    // A second placement sees the reservation and is stamped a smaller context.
    const again = plan(v, LLAMA_1B, placementRequest(LLAMA_1B.model_id), counterIds());
    if (!again.ok) throw new Error(again.error);
    const body = Object.values(again.placement.instance)[0] as { ephemeralPort: number };
    expect(body.ephemeralPort).not.toBe(v.portsInUse[0]);
  });
});

describe("memory estimate", () => {
  it("KV per token is layers × KV heads × head dim × 2 (K,V) × 2 bytes", () => {
    // Llama 3.3 70B: 80 layers, 8 KV heads, head dim 128 (hidden 8192 / 64 heads; fallback 128).
    expect(kvBytesPerToken(LLAMA_70B)).toBe(80 * 8 * 128 * 2 * 2);
  });
  it("a footprint is weights × 1.10 (GGUF) + KV + 256 MiB", () => {
    const s = LLAMA_70B.storage_size!.in_bytes;
    expect(shardFootprint(LLAMA_70B, s, 1, 8192)).toBeCloseTo(
      s * 1.1 + 8192 * kvBytesPerToken(LLAMA_70B) + MEMORY_OVERHEAD_FLOOR,
      0,
    );
  });
  it("the context limit is the smaller of the card's context and what fits next to the weights", () => {
    const s = LLAMA_1B.storage_size!.in_bytes;
    expect(contextTokenLimit(LLAMA_1B, s, [{ fraction: 1, available: 500 * GB }])).toBe(
      LLAMA_1B.context_length,
    );
    const tight = s * 1.1 + MEMORY_OVERHEAD_FLOOR + 10_000 * kvBytesPerToken(LLAMA_1B);
    expect(contextTokenLimit(LLAMA_1B, s, [{ fraction: 1, available: tight }])).toBe(10_000);
  });
});

describe("previews", () => {
  it("rows derive their shape from the minted instance; one row per node count; reasons for the rest", () => {
    const specs: NodeSpec[] = [
      { id: "a", ram: 64 * GB, vram: 40 * GB },
      { id: "b", ram: 64 * GB, vram: 24 * GB },
      { id: "c", ram: 64 * GB, vram: 24 * GB },
      { id: "d", ram: 64 * GB, vram: 24 * GB },
    ];
    const rows = placementPreviews(
      clusterView(specs),
      LLAMA_70B,
      { excludedNodeIds: [], nodeIds: [] },
      counterIds(),
    );
    const ok = rows.filter((r) => r.error === null);
    expect(ok.map((r) => `${r.instance_meta}/${r.node_count}`)).toEqual([
      "LlamaRpc/2",
      "LlamaRpc/3",
      "LlamaRpc/4",
    ]);
    for (const r of ok) {
      expect(Object.keys(r.instance!)[0]).toBe("LlamaRpcInstance");
      expect(Object.keys(r.memory_delta_by_node!).length).toBe(r.node_count);
      expect(r.context_token_limit).toBeGreaterThan(0);
      // No single node holds 70B here, so there is no single-node speed to compare with.
      expect(r.expected_decode_speed_ratio).toBeNull();
    }
    const errors = rows.filter((r) => r.error !== null);
    expect(errors.some((r) => r.sharding === "Tensor" && /needs an MLX runner/.test(r.error!))).toBe(true);
    expect(errors.some((r) => r.instance_meta === "MlxJaccl")).toBe(true);
  });

  it("a model that fits one node previews it first, and pools carry the slower-decode warning", () => {
    const specs: NodeSpec[] = [{ id: "a", ram: 16 * GB }, { id: "b", ram: 16 * GB }];
    const card = catalog.get("unsloth/Qwen3.5-0.8B-GGUF")!;
    const rows = placementPreviews(
      clusterView(specs),
      card,
      { excludedNodeIds: [], nodeIds: [] },
      counterIds(),
    );
    const ok = rows.filter((r) => r.error === null);
    expect(ok[0].instance_meta).toBe("MlxRing");
    expect(ok[0].expected_decode_speed_ratio).toBe(1);
    const pool = ok.find((r) => r.instance_meta === "LlamaRpc")!;
    expect(pool.expected_decode_speed_ratio).toBeLessThan(1);
    expect(pool.warnings[0]).toMatch(/can hold .* alone/);
  });

  it("an empty cluster previews nothing", () => {
    expect(placementPreviews(clusterView([]), LLAMA_1B, { excludedNodeIds: [], nodeIds: [] }, counterIds()))
      .toEqual([]);
  });
});
