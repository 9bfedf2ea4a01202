import { describe, expect, it } from "vitest";
import { type Instance, instanceBody, InstanceSchema } from "../../src/cluster/instances.ts";
import type { ModelCard } from "../../src/models/card.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { resolveNodeBackend, servability } from "../../src/placement/capabilities.ts";
import {
  admissionTokens,
  MEMORY_OVERHEAD_FLOOR,
  proportionalNeed,
  shardFootprint,
} from "../../src/placement/estimate.ts";
import { type PlacementRequest, placementRequest, plan } from "../../src/placement/planner.ts";
import { available, type ClusterView } from "../../src/placement/view.ts";
import { applyEvent, emptyState } from "../../src/cluster/state.ts";
import { makeEvent } from "../../src/cluster/events.ts";
import { buildClusterView } from "../../src/placement/view.ts";
import {
  clusterView,
  counterIds,
  entries,
  GB,
  type NodeSpec,
  NOW,
  rng,
} from "../helpers/synthetic-cluster.ts";

const catalog = Catalog.bundled();
function card(id: string): ModelCard {
  const c = catalog.get(id);
  if (!c) throw new Error(`no bundled card ${id}`);
  return c;
}
const LLAMA_1B = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const LLAMA_70B = "bartowski/Llama-3.3-70B-Instruct-GGUF";
const DEEPSEEK_CPU_POOLABLE = "unsloth/DeepSeek-V4-Flash-0731-GGUF";

const gpu = (id: string, vramGb: number, extra: Partial<NodeSpec> = {}): NodeSpec => ({
  id,
  ram: 64 * GB,
  vram: vramGb * GB,
  ...extra,
});
const cpu = (id: string, ramGb: number, extra: Partial<NodeSpec> = {}): NodeSpec => ({
  id,
  ram: ramGb * GB,
  ...extra,
});

function nodesOf(i: Instance): string[] {
  return Object.keys(instanceBody(i).shardAssignments.nodeToRunner);
}

interface Case {
  name: string;
  nodes: NodeSpec[];
  model: string;
  request?: Partial<PlacementRequest>;
  expect:
    | { kind: "MlxRingInstance" | "LlamaRpcInstance"; nodes?: string[]; driver?: string; count?: number }
    | { error: RegExp };
}

const cases: Case[] = [
  {
    name: "one CPU node holds a 1B model",
    nodes: [cpu("n1", 16)],
    model: LLAMA_1B,
    expect: { kind: "MlxRingInstance", nodes: ["n1"] },
  },
  {
    name: "the single node with the most memory wins among equals-by-preference",
    nodes: [cpu("n1", 16), cpu("n2", 32), cpu("n3", 8)],
    model: LLAMA_1B,
    expect: { kind: "MlxRingInstance", nodes: ["n2"] },
  },
  {
    name: "GPU beats CPU through the card's backend preference",
    nodes: [cpu("n1", 256), gpu("n2", 8, { computes: ["vulkan", "cpu"] })],
    model: LLAMA_1B,
    expect: { kind: "MlxRingInstance", nodes: ["n2"] },
  },
  {
    name: "70B on one 80 GB GPU next to three 24 GB ones stays on one node",
    nodes: [gpu("a", 24), gpu("b", 24), gpu("big", 80), gpu("c", 24)],
    model: LLAMA_70B,
    expect: { kind: "MlxRingInstance", nodes: ["big"] },
  },
  {
    name: "70B excluded from the big node pools the rest",
    nodes: [gpu("a", 24), gpu("b", 24), gpu("big", 80), gpu("c", 24)],
    model: LLAMA_70B,
    request: { excluded_nodes: ["big"] },
    expect: { kind: "LlamaRpcInstance", count: 3 },
  },
  {
    name: "70B on two 24 GB GPUs is refused with numbers",
    nodes: [gpu("a", 24), gpu("b", 24)],
    model: LLAMA_70B,
    expect: { error: /needs 49\.\d GB .*largest node \(a\) has 21\.6 GB; the best pool of 2 has 43\.2 GB/ },
  },
  {
    name: "an unreachable big node is not used",
    nodes: [gpu("a", 24), gpu("b", 24), gpu("big", 80, { silentMs: 120_000 }), gpu("c", 24)],
    model: LLAMA_70B,
    expect: { kind: "LlamaRpcInstance", count: 3 },
  },
  {
    name: "a non-worker big node is not used",
    nodes: [gpu("a", 24), gpu("b", 24), gpu("big", 80, { worker: false }), gpu("c", 24)],
    model: LLAMA_70B,
    expect: { kind: "LlamaRpcInstance", count: 3 },
  },
  {
    name: "the driver is the node with the most memory",
    nodes: [gpu("a", 24), gpu("b", 40), gpu("c", 24)],
    model: LLAMA_70B,
    expect: { kind: "LlamaRpcInstance", driver: "b", count: 2 },
  },
  {
    name: "a node without ggml-rpc-server cannot donate",
    nodes: [gpu("a", 40), gpu("b", 24, { rpc: false }), gpu("c", 24)],
    model: LLAMA_70B,
    expect: { kind: "LlamaRpcInstance", nodes: ["a", "c"] },
  },
  {
    name: "a donor needs a routable address",
    nodes: [gpu("a", 40), gpu("b", 24, { ip: "169.254.3.4" }), gpu("c", 24)],
    model: LLAMA_70B,
    expect: { kind: "LlamaRpcInstance", nodes: ["a", "c"] },
  },
  {
    name: "the fastest link wins among donors that close the gap",
    nodes: [
      gpu("a", 40),
      gpu("w", 30, { link: "wifi" }),
      gpu("e", 24, { link: "ethernet" }),
      gpu("t", 24, { link: "thunderbolt" }),
    ],
    model: LLAMA_70B,
    expect: { kind: "LlamaRpcInstance", nodes: ["a", "t"] },
  },
  {
    name: "CPU nodes cannot pool a card without llama_server-cpu",
    nodes: [cpu("a", 48), cpu("b", 48)],
    model: LLAMA_70B,
    expect: { error: /no pool is possible/ },
  },
  {
    name: "min_nodes 2 pools even when one node fits",
    nodes: [cpu("a", 16), cpu("b", 16)],
    model: "unsloth/Qwen3.5-0.8B-GGUF",
    request: { min_nodes: 2 },
    expect: { kind: "LlamaRpcInstance", count: 2 },
  },
  {
    name: "Tensor across nodes is refused: llama.cpp pools by layers",
    nodes: [cpu("a", 16), cpu("b", 16)],
    model: LLAMA_1B,
    request: { sharding: "Tensor", min_nodes: 2 },
    expect: { error: /Tensor sharding .* needs an MLX runner/ },
  },
  {
    name: "an MLX card is refused on Linux nodes",
    nodes: [gpu("a", 80)],
    model: "mlx-community/Llama-3.2-1B-Instruct-4bit",
    expect: { error: /MLX cards need an MLX runner, which Linux nodes lack/ },
  },
  {
    name: "a vision card without a projector is refused rather than served blind",
    nodes: [gpu("a", 80)],
    model: "bartowski/Qwen2-VL-2B-Instruct-GGUF",
    expect: { error: /advertises vision but names no projector/ },
  },
  {
    name: "image generation is refused",
    nodes: [gpu("a", 80)],
    model: "exolabs/FLUX.1-schnell",
    expect: { error: /generates images/ },
  },
  {
    name: "a card for GPUs only is refused on CPU nodes with the computes named",
    nodes: [cpu("a", 512)],
    model: "poolside/Laguna-S-2.1-GGUF",
    expect: { error: /offers cpu but .* needs vulkan\/rocm\/cuda/ },
  },
  {
    name: "every node excluded",
    nodes: [cpu("a", 16), cpu("b", 16)],
    model: LLAMA_1B,
    request: { excluded_nodes: ["a", "b"] },
    expect: { error: /no node can run .*a is excluded; b is excluded/ },
  },
  {
    name: "required nodes are honoured",
    nodes: [cpu("a", 16), cpu("b", 32)],
    model: LLAMA_1B,
    request: { required_nodes: ["a"] },
    expect: { kind: "MlxRingInstance", nodes: ["a"] },
  },
  {
    name: "a UMA APU lends system RAM through GTT",
    nodes: [
      gpu("strix", 0.5, {
        ram: 128 * GB,
        gtt: 124 * GB,
        unified: true,
        vendor: "amd",
        computes: ["vulkan", "cpu"],
      }),
    ],
    model: LLAMA_70B,
    expect: { kind: "MlxRingInstance", nodes: ["strix"] },
  },
  {
    name: "a pool never exceeds llama.cpp's 16 RPC servers",
    nodes: Array.from({ length: 24 }, (_, i) => cpu(`n${String(i).padStart(2, "0")}`, 8)),
    model: DEEPSEEK_CPU_POOLABLE,
    expect: { error: /the best pool of 17 has/ },
  },
  {
    name: "asking for more than 17 nodes is refused with the RPC limit",
    nodes: Array.from({ length: 24 }, (_, i) => cpu(`n${String(i).padStart(2, "0")}`, 16)),
    model: "unsloth/Qwen3.5-0.8B-GGUF",
    request: { min_nodes: 18 },
    expect: { error: /at most 16 donors \(GGML_RPC_MAX_SERVERS\)/ },
  },
  {
    name: "sixteen 16 GB CPU nodes pool a 97 GB model",
    nodes: Array.from({ length: 16 }, (_, i) => cpu(`n${String(i).padStart(2, "0")}`, 16)),
    model: DEEPSEEK_CPU_POOLABLE,
    expect: { kind: "LlamaRpcInstance" },
  },
];

describe("planner: table over synthetic clusters", () => {
  for (const c of cases) {
    it(c.name, () => {
      const view = clusterView(c.nodes);
      const r = plan(view, card(c.model), placementRequest(c.model, c.request), counterIds());
      if ("error" in c.expect) {
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.error).toMatch(c.expect.error);
        return;
      }
      if (!r.ok) throw new Error(`expected a placement, got: ${r.error}`);
      const inst = r.placement.instance;
      InstanceSchema.parse(inst);
      expect(Object.keys(inst)[0]).toBe(c.expect.kind);
      if (c.expect.nodes) expect(nodesOf(inst).sort()).toEqual([...c.expect.nodes].sort());
      if (c.expect.count) expect(nodesOf(inst).length).toBe(c.expect.count);
      if (c.expect.driver) {
        expect((inst as { LlamaRpcInstance: { driverNode: string } }).LlamaRpcInstance.driverNode).toBe(
          c.expect.driver,
        );
      }
      expect(r.placement.contextTokenLimit).not.toBeNull();
      expect(instanceBody(inst).contextTokenLimit).toBe(r.placement.contextTokenLimit);
    });
  }
});

describe("planner: pooled instance shape", () => {
  it("driver is rank 0 with the full range; donors have RpcDonor shards and endpoints on their addresses", () => {
    const view = clusterView([
      gpu("a", 24, { ip: "10.9.0.1" }),
      gpu("b", 40, { ip: "10.9.0.2" }),
      gpu("c", 24, { ip: "10.9.0.3" }),
    ]);
    const r = plan(view, card(LLAMA_70B), placementRequest(LLAMA_70B), counterIds());
    if (!r.ok) throw new Error(r.error);
    const inst = (r.placement.instance as {
      LlamaRpcInstance: Extract<Instance, { LlamaRpcInstance: unknown }>["LlamaRpcInstance"];
    }).LlamaRpcInstance;
    expect(inst.driverNode).toBe("b");
    const driverShard = inst.shardAssignments.runnerToShard[inst.shardAssignments.nodeToRunner.b];
    expect(driverShard).toHaveProperty("PipelineShardMetadata");
    const ds = (driverShard as {
      PipelineShardMetadata: {
        deviceRank: number;
        startLayer: number;
        endLayer: number;
        worldSize: number;
      };
    }).PipelineShardMetadata;
    expect([ds.deviceRank, ds.startLayer, ds.endLayer, ds.worldSize]).toEqual([0, 0, 80, 2]);
    const donor = Object.keys(inst.donorEndpoints)[0];
    const donorShard = inst.shardAssignments.runnerToShard[inst.shardAssignments.nodeToRunner[donor]] as {
      RpcDonorShardMetadata: {
        rpcHost: string;
        rpcPort: number;
        driverNode: string;
        startLayer: number;
        endLayer: number;
      };
    };
    expect(donorShard.RpcDonorShardMetadata.driverNode).toBe("b");
    expect(inst.donorEndpoints[donor]).toBe(
      `${donorShard.RpcDonorShardMetadata.rpcHost}:${donorShard.RpcDonorShardMetadata.rpcPort}`,
    );
    expect(donorShard.RpcDonorShardMetadata.rpcPort).toBeGreaterThanOrEqual(24000);
    expect(donorShard.RpcDonorShardMetadata.rpcPort).toBeLessThanOrEqual(31999);
    expect([donorShard.RpcDonorShardMetadata.startLayer, donorShard.RpcDonorShardMetadata.endLayer]).toEqual([
      0,
      0,
    ]);
  });

  it("a pool warns when one node could hold the model, and reports a decode ratio below 1", () => {
    const view = clusterView([cpu("a", 16), cpu("b", 16)]);
    const id = "unsloth/Qwen3.5-0.8B-GGUF";
    const r = plan(view, card(id), placementRequest(id, { min_nodes: 2 }), counterIds());
    if (!r.ok) throw new Error(r.error);
    expect(r.placement.decodeSpeedRatio).toBeLessThan(1);
    expect(r.placement.warnings.join(" ")).toMatch(/can hold .* alone/);
  });

  it("the memory split follows what each node lends", () => {
    const view = clusterView([gpu("a", 24), gpu("b", 40), gpu("c", 24)]);
    const r = plan(view, card(LLAMA_70B), placementRequest(LLAMA_70B), counterIds());
    if (!r.ok) throw new Error(r.error);
    const d = r.placement.memoryDeltaByNode;
    const [big, small] = [d.b, d[r.placement.nodes[1]]];
    const lends = [36 * GB - MEMORY_OVERHEAD_FLOOR, 21.6 * GB - MEMORY_OVERHEAD_FLOOR];
    // Subtracting the fixed overhead leaves shares in the lenders' proportion.
    expect((big - MEMORY_OVERHEAD_FLOOR) / (small - MEMORY_OVERHEAD_FLOOR)).toBeCloseTo(
      lends[0] / lends[1],
      3,
    );
  });

  it("downloaded file breaks a driver tie", () => {
    const view = clusterView([gpu("a", 30), gpu("b", 30)]);
    view.downloads.b = { [LLAMA_70B]: 1 };
    const r = plan(view, card(LLAMA_70B), placementRequest(LLAMA_70B), counterIds());
    if (!r.ok) throw new Error(r.error);
    expect((r.placement.instance as { LlamaRpcInstance: { driverNode: string } }).LlamaRpcInstance.driverNode)
      .toBe("b");
  });
});

describe("planner: properties over random clusters (1..16 nodes)", () => {
  const ggufCards = catalog.all().filter((c) => c.gguf_file && c.storage_size);
  function randomCluster(r: () => number): NodeSpec[] {
    const n = 1 + Math.floor(r() * 16);
    return Array.from({ length: n }, (_, i) => {
      const id = `node-${i}`;
      const kind = r();
      const extra: Partial<NodeSpec> = { silentMs: r() < 0.1 ? 60_000 : 0, rpc: r() > 0.1 };
      if (kind < 0.4) return cpu(id, 4 + Math.floor(r() * 124), extra);
      if (kind < 0.8) {
        return gpu(id, 6 + Math.floor(r() * 90), { ...extra, vramUsed: Math.floor(r() * 4) * GB });
      }
      return gpu(id, 0.5, {
        ...extra,
        ram: (32 + Math.floor(r() * 96)) * GB,
        gtt: 120 * GB,
        unified: true,
        vendor: "amd",
        computes: ["vulkan", "cpu"],
      });
    });
  }

  function check(view: ClusterView, c: ModelCard, req: PlacementRequest, seed: number) {
    const r = plan(view, c, req, counterIds());
    const again = plan(view, c, req, counterIds());
    expect(again, `seed ${seed}: same input, same plan`).toEqual(r);
    const serv = servability(c);
    const eligible = view.nodes.filter((n) =>
      n.reachable && n.worker && !req.excluded_nodes.includes(n.nodeId) &&
      serv.ok && resolveNodeBackend(serv.tags, [], n.computes) !== null
    );
    const single = shardFootprint(c, c.storage_size!.in_bytes, 1, admissionTokens(c));
    if (!r.ok) return;
    const p = r.placement;
    InstanceSchema.parse(p.instance);
    const nodes = nodesOf(p.instance);
    expect(new Set(nodes).size, `seed ${seed}: no node twice`).toBe(nodes.length);
    for (const id of nodes) {
      const n = view.nodes.find((x) => x.nodeId === id)!;
      expect(req.excluded_nodes, `seed ${seed}: excluded honoured`).not.toContain(id);
      expect(n.reachable, `seed ${seed}: reachable`).toBe(true);
      expect(p.memoryDeltaByNode[id], `seed ${seed}: ${id} not over-committed`).toBeLessThanOrEqual(
        available(n) + 1,
      );
    }
    const fitsOne = eligible.some((n) => single <= available(n));
    if (fitsOne && req.min_nodes === 1) expect(nodes.length, `seed ${seed}: prefers one node`).toBe(1);
    if (nodes.length > 1) {
      // Fewest donors: dropping the smallest donor leaves the pool short.
      const lends = nodes.map((id) =>
        available(view.nodes.find((x) => x.nodeId === id)!) - MEMORY_OVERHEAD_FLOOR
      );
      const need = proportionalNeed(c, c.storage_size!.in_bytes, admissionTokens(c));
      const withoutSmallest = lends.reduce((a, b) => a + b, 0) - Math.min(...lends.slice(1));
      if (req.min_nodes <= 1 && nodes.length > 2) {
        expect(withoutSmallest, `seed ${seed}: no spare donor`).toBeLessThan(need);
      }
    }
  }

  it("never over-commits, prefers one node, is deterministic, honours exclusions (500 random cases)", () => {
    let placed = 0;
    let pooledCount = 0;
    for (let seed = 1; seed <= 500; seed++) {
      const r = rng(seed);
      const specs = randomCluster(r);
      const view = clusterView(specs);
      const c = ggufCards[Math.floor(r() * ggufCards.length)];
      const excluded = specs.filter(() => r() < 0.15).map((s) => s.id);
      const req = placementRequest(c.model_id, { excluded_nodes: excluded });
      check(view, c, req, seed);
      const res = plan(view, c, req, counterIds());
      if (res.ok) {
        placed++;
        if (res.placement.nodes.length > 1) pooledCount++;
      }
    }
    // The generator must exercise both shapes, or the properties above prove little.
    expect(placed).toBeGreaterThan(50);
    expect(pooledCount).toBeGreaterThan(5);
  });
});

describe("planner: replicas", () => {
  const placedOn = (specs: NodeSpec[], placements: number) => {
    let state = emptyState();
    const ids = counterIds("r");
    const nodes: string[][] = [];
    for (let k = 0; k < placements; k++) {
      const view = buildClusterView(state, entries(specs), NOW, { nodeTimeoutMs: 30_000 });
      // The first node fetched the file for the first instance: a replica must still go elsewhere.
      view.downloads = k > 0 ? { [nodesOf(Object.values(state.instances)[0])[0]]: { [LLAMA_1B]: 1 } } : {};
      const r = plan(view, card(LLAMA_1B), placementRequest(LLAMA_1B), ids);
      if (!r.ok) throw new Error(r.error);
      state = applyEvent(state, makeEvent("InstanceCreated", { instance: r.placement.instance }));
      nodes.push(nodesOf(r.placement.instance));
    }
    return nodes;
  };

  it("a model placed again goes to a node not yet serving it, though the first holds its file", () => {
    const [first, second] = placedOn([cpu("n1", 16), cpu("n2", 16)], 2);
    expect(second).not.toEqual(first);
  });

  it("with every node serving it, a replica shares a node that still fits it", () => {
    const placed = placedOn([cpu("n1", 16)], 2);
    expect(placed).toEqual([["n1"], ["n1"]]);
  });
});
