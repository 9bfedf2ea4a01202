/**
 * The planner: a pure function of (cluster view, card, request) that picks one node when the model fits
 * one, else the smallest llama.cpp RPC pool, and says in one sentence with numbers why when it cannot.
 */
import { z } from "zod";
import {
  type Instance,
  type PlacementRecord,
  PlacementRecordSchema,
  type ShardMetadata,
} from "../cluster/instances.ts";
import { cardToWire, type ModelCard, type ModelCardWire } from "../models/card.ts";
import { computesOf, preferenceScore, resolveNodeBackend, servability } from "./capabilities.ts";
import {
  admissionTokens,
  contextTokenLimit,
  gb,
  kvBytesPerToken,
  MEMORY_OVERHEAD_FLOOR,
  proportionalNeed,
  shardFootprint,
} from "./estimate.ts";
import { available, type ClusterView, LINK_RANK, type NodeView } from "./view.ts";

export const ShardingSchema = z.enum(["Pipeline", "Tensor"]);
export const InstanceMetaSchema = z.enum(["MlxRing", "MlxJaccl", "LlamaRpc"]);
export type Sharding = z.infer<typeof ShardingSchema>;
export type InstanceMeta = z.infer<typeof InstanceMetaSchema>;

/** Upstream's `PlaceInstanceParams` (snake_case), plus `required_nodes` (previews' `node_ids`). */
export const PlaceInstanceParamsSchema = z.object({
  model_id: z.string().min(1),
  sharding: ShardingSchema.default("Pipeline"),
  instance_meta: InstanceMetaSchema.default("MlxRing"),
  min_nodes: z.number().int().positive().default(1),
  excluded_nodes: z.array(z.string()).default([]),
  required_nodes: z.array(z.string()).default([]),
  /** Not upstream: the most nodes the placement may use (recovery's "one node" retry sets 1). */
  max_nodes: z.number().int().positive().optional(),
});
export type PlacementRequest = z.infer<typeof PlaceInstanceParamsSchema>;

export function placementRequest(modelId: string, over: Partial<PlacementRequest> = {}): PlacementRequest {
  return PlaceInstanceParamsSchema.parse({ model_id: modelId, ...over });
}

/** True when a record asks for nothing beyond the planner's defaults (exclusions aside). */
export const isDefaultRecord = (r: PlacementRecord) =>
  r.sharding === "Pipeline" && r.instanceMeta === "MlxRing" && r.minNodes === 1;

/** What a placement request leaves in the log: nothing for the defaults, so upstream's shape is kept. */
export function recordFor(request: PlacementRequest, healAttempt = 0): PlacementRecord | undefined {
  const r = PlacementRecordSchema.parse({
    sharding: request.sharding,
    instanceMeta: request.instance_meta,
    minNodes: request.min_nodes,
    excludedNodes: request.excluded_nodes,
    healAttempt,
  });
  return isDefaultRecord(r) && r.excludedNodes.length === 0 && healAttempt === 0 ? undefined : r;
}

/** llama.cpp's RPC backend accepts at most this many servers (GGML_RPC_MAX_SERVERS in ggml-rpc.h). */
export const MAX_RPC_DONORS = 16;

/** The listener band (upstream #457): below every OS's ephemeral range. */
export const PLACEMENT_PORT_RANGE = [24000, 31999] as const;

export interface PlanDeps {
  /** Mints instance and runner ids (random UUIDs in production; a counter in tests). */
  newId: () => string;
}

/** Upstream measured a two-node pool decoding ~15% slower than one sufficient node; each hop compounds. */
export const POOL_DECODE_RATIO_PER_HOP = 0.85;

export interface Placement {
  instance: Instance;
  sharding: Sharding;
  instanceMeta: "MlxRing" | "LlamaRpc";
  /** Driver (or the single node) first. */
  nodes: string[];
  memoryDeltaByNode: Record<string, number>;
  contextTokenLimit: number | null;
  /** Expected decode speed relative to the best single node that can hold the model; null if none can. */
  decodeSpeedRatio: number | null;
  warnings: string[];
}

export type PlanResult =
  | { ok: true; placement: Placement }
  /** `pending`: the cluster has not told us enough yet (retry shortly), as opposed to a hard refusal. */
  | { ok: false; error: string; pending: boolean };

interface Candidate {
  node: NodeView;
  tag: string;
  avail: number;
  downloaded: number;
  /** Instances of this model already on the node: a replica goes where there are fewest. */
  serving: number;
}

const fail = (error: string, pending = false): PlanResult => ({ ok: false, error, pending });

function byId(a: NodeView, b: NodeView): number {
  return a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0;
}

function pickPort(inUse: Set<number>): number {
  for (let p = PLACEMENT_PORT_RANGE[0]; p <= PLACEMENT_PORT_RANGE[1]; p++) {
    if (!inUse.has(p)) {
      inUse.add(p);
      return p;
    }
  }
  throw new Error(`no free placement listener port in ${PLACEMENT_PORT_RANGE.join("-")}`);
}

const lend = (c: Candidate) => Math.max(0, c.avail - MEMORY_OVERHEAD_FLOOR);
const linkRank = (n: NodeView) => n.addresses.length ? LINK_RANK[n.addresses[0].type] : 99;

/**
 * The single node to use: preference score, then fewest instances of the model already there (a replica
 * spreads load over machines before it doubles up on one), then most of the file on disk, then most memory,
 * then id.
 */
function bestSingle(fits: Candidate[], preference: string[]): Candidate {
  return [...fits].sort((a, b) =>
    preferenceScore(preference, b.tag) - preferenceScore(preference, a.tag) ||
    a.serving - b.serving || b.downloaded - a.downloaded || b.avail - a.avail || byId(a.node, b.node)
  )[0];
}

/** Fewest donors (by what they lend) that close the gap, drawn from the fastest link tier that suffices. */
function chooseDonors(pool: Candidate[], gap: number, atLeast: number, atMost: number): Candidate[] | null {
  const byLend = [...pool].sort((a, b) => lend(b) - lend(a) || byId(a.node, b.node));
  let k = 0;
  let sum = 0;
  while ((sum < gap || k < atLeast) && k < byLend.length && k < atMost) sum += lend(byLend[k++]);
  if (sum < gap || k < atLeast) return null;
  if (k === 0) return [];
  for (const tier of [...new Set(byLend.map((c) => linkRank(c.node)))].sort((a, b) => a - b)) {
    const within = byLend.filter((c) => linkRank(c.node) <= tier);
    if (within.length < k) continue;
    const chosen = within.slice(0, k);
    if (chosen.reduce((s, c) => s + lend(c), 0) >= gap) return chosen;
  }
  return byLend.slice(0, k);
}

/** Wire cards are immutable once built; previews mint thousands of shards of one card. */
const wireCache = new WeakMap<ModelCard, ModelCardWire>();
function wireCard(card: ModelCard): ModelCardWire {
  let w = wireCache.get(card);
  if (!w) wireCache.set(card, w = cardToWire(card));
  return w;
}

function shard(
  card: ModelCard,
  kind: "PipelineShardMetadata" | "RpcDonorShardMetadata",
  body: Record<string, unknown>,
): ShardMetadata {
  return {
    [kind]: {
      modelCard: wireCard(card),
      immediateException: false,
      shouldTimeout: null,
      nLayers: card.n_layers,
      ...body,
    },
  } as ShardMetadata;
}

/** Plans one placement. Pure: the same view, card, request and id sequence give the same instance. */
export function plan(
  view: ClusterView,
  card: ModelCard,
  request: PlacementRequest,
  deps: PlanDeps,
): PlanResult {
  const id = card.model_id;
  const serv = servability(card);
  if (!serv.ok) return fail(serv.reason);
  // A card with no weights (espeak-ng) needs no storage; any other card needs its size known.
  const weightless = serv.runner === "espeak-ng";
  const storage = card.storage_size?.in_bytes ?? (weightless ? 0 : undefined);
  if (storage === undefined || (!storage && !weightless)) {
    return fail(
      `the size of ${id} is not known yet; it is resolved from the hub on first contact, then placement can run`,
    );
  }
  const minNodes = request.instance_meta === "LlamaRpc" ? Math.max(2, request.min_nodes) : request.min_nodes;
  if (minNodes > 1 && request.sharding === "Tensor") {
    return fail(
      `Tensor sharding across ${minNodes} nodes needs an MLX runner; a llama.cpp pool splits ${id} by layers (use Pipeline)`,
    );
  }
  if (minNodes > 1 && request.instance_meta === "MlxJaccl") {
    return fail(
      `MlxJaccl needs MLX over RDMA, which this cluster lacks; a multi-node ${id} runs as a LlamaRpc pool`,
    );
  }
  const excluded = new Set(request.excluded_nodes);
  const required = new Set(request.required_nodes);
  const known = new Set(view.nodes.map((n) => n.nodeId));
  for (const r of required) {
    if (!known.has(r)) {
      return fail(`node ${r} is not in the cluster (node ids change when a cluster session restarts)`);
    }
    if (excluded.has(r)) return fail(`node ${r} is both required and excluded`);
  }
  if (view.nodes.length === 0) return fail("no node has reported telemetry yet; retry shortly", true);

  const skipped: string[] = [];
  const pendingNodes: string[] = [];
  const candidates: Candidate[] = [];
  for (const n of view.nodes) {
    if (excluded.has(n.nodeId)) skipped.push(`${n.name} is excluded`);
    else if (!n.reachable) skipped.push(`${n.name} is unreachable`);
    else if (!n.worker) skipped.push(`${n.name} is not a worker`);
    else if (!n.hasMemory) pendingNodes.push(n.name);
    else if (serv.nodeTag && !(n.backends ?? []).includes(serv.nodeTag)) {
      skipped.push(`${n.name} has no ${serv.runner} engine (it does not advertise ${serv.nodeTag})`);
    } else {
      const tag = resolveNodeBackend(serv.tags, card.placement.backend_preference, n.computes);
      if (tag === null) {
        skipped.push(
          `${n.name} offers ${n.computes.join("/")} but ${id} needs ${computesOf(serv.tags).join("/")}`,
        );
      } else {candidates.push({
          node: n,
          tag,
          avail: available(n),
          downloaded: view.downloads[n.nodeId]?.[id] ?? 0,
          serving: view.serving?.[n.nodeId]?.filter((m) => m === id).length ?? 0,
        });}
    }
  }
  const why = () => (skipped.length ? ` (${skipped.join("; ")})` : "");
  if (candidates.length === 0) {
    if (pendingNodes.length) {
      return fail(`no node has reported its memory yet (${pendingNodes.join(", ")}); retry shortly`, true);
    }
    return fail(`no node can run ${id}${why()}`);
  }

  const tokens = admissionTokens(card);
  const single = shardFootprint(card, storage, 1, tokens);
  const singleFits = candidates.filter((c) => single <= c.avail);
  const bestAlone = singleFits.length ? bestSingle(singleFits, card.placement.backend_preference) : null;
  if (minNodes <= 1 && required.size <= 1) {
    const fits = singleFits.filter((c) => required.size === 0 || required.has(c.node.nodeId));
    if (fits.length) {
      return {
        ok: true,
        placement: singleNode(view, card, storage, bestSingle(fits, card.placement.backend_preference), deps),
      };
    }
  }

  if (request.max_nodes !== undefined && request.max_nodes < Math.max(2, minNodes)) {
    const alone = `the largest node (${
      [...candidates].sort((a, b) => b.avail - a.avail || byId(a.node, b.node))[0].node.name
    }) has ` +
      gb(Math.max(...candidates.map((c) =>
        c.avail
      )));
    return fail(`${id} needs ${gb(single)} on one node; ${alone}${why()}`);
  }
  // A pool: one driver holding the file plus ggml-rpc-server donors.
  const largest = [...candidates].sort((a, b) => b.avail - a.avail || byId(a.node, b.node))[0];
  const headline = `${id} needs ${gb(single)} (${gb(storage)} of weights, KV for ${tokens} tokens)`;
  const largestText = `the largest node (${largest.node.name}) has ${gb(largest.avail)}`;
  if (serv.poolTags.length === 0) {
    const reason = minNodes > 1 ? "" : `; ${largestText}`;
    return fail(
      `${headline}${reason}; it cannot be pooled: its card allows no llama_server backend${
        singleReason(card)
      }${why()}`,
    );
  }
  const poolable: (Candidate & { poolTag: string })[] = [];
  for (const c of candidates) {
    const poolTag = resolveNodeBackend(serv.poolTags, card.placement.backend_preference, c.node.computes);
    if (c.node.rpcProtocol === null) skipped.push(`${c.node.name} has no ggml-rpc-server`);
    else if (c.node.addresses.length === 0) skipped.push(`${c.node.name} has no routable IPv4 address`);
    else if (poolTag === null) skipped.push(`${c.node.name} offers no pooled backend for ${id}`);
    else poolable.push({ ...c, tag: poolTag, poolTag });
  }
  const needSingleOnly = minNodes <= 1 && required.size <= 1;
  const refuse = (poolText: string) =>
    fail(`${headline}; ${needSingleOnly ? largestText + "; " : ""}${poolText}${why()}`);
  if (poolable.length < 2) {
    return refuse(`no pool is possible: ${poolable.length} node(s) can join an RPC pool`);
  }

  // llama.cpp refuses a pool whose RPC protocols differ, at load; refuse here instead, with the versions.
  const protocol = poolProtocol(poolable, required);
  if ("error" in protocol) return fail(`${protocol.error}${why()}`);
  for (const c of poolable) {
    if (c.node.rpcProtocol !== protocol.version) {
      skipped.push(
        `${c.node.name} speaks ggml RPC protocol ${c.node.rpcProtocol}, the pool ${protocol.version}`,
      );
    }
  }
  const speakers = poolable.filter((c) => c.node.rpcProtocol === protocol.version);
  if (speakers.length < 2) {
    return refuse(
      `no pool is possible: ${speakers.length} node(s) speak ggml RPC protocol ${protocol.version}`,
    );
  }
  const driver =
    [...speakers].sort((a, b) => b.avail - a.avail || b.downloaded - a.downloaded || byId(a.node, b.node))[0];
  const peers: Candidate[] = [];
  for (const c of speakers) {
    if (c === driver) continue;
    if (donorAddress(driver.node, c.node)) peers.push(c);
    else {skipped.push(
        `${c.node.name} has no address ${driver.node.name} can reach (only a direct link to another node)`,
      );}
  }
  const forced = peers.filter((c) => required.has(c.node.nodeId));
  for (const r of required) {
    if (r !== driver.node.nodeId && !forced.some((c) => c.node.nodeId === r)) {
      return fail(`node ${r} cannot join a pool for ${id}${why()}`);
    }
  }
  const need = proportionalNeed(card, storage, tokens);
  const gap = need - lend(driver) - forced.reduce((s, c) => s + lend(c), 0);
  const rest = peers.filter((c) => !forced.includes(c));
  if (minNodes - 1 > MAX_RPC_DONORS || forced.length > MAX_RPC_DONORS) {
    return fail(
      `a llama.cpp pool takes at most ${MAX_RPC_DONORS} donors (GGML_RPC_MAX_SERVERS), so at most ${
        MAX_RPC_DONORS + 1
      } nodes`,
    );
  }
  const extra = chooseDonors(
    rest,
    gap,
    Math.max(0, minNodes - 1 - forced.length),
    MAX_RPC_DONORS - forced.length,
  );
  if (extra === null) {
    const biggest = [...forced, ...[...rest].sort((a, b) => lend(b) - lend(a) || byId(a.node, b.node))]
      .slice(0, MAX_RPC_DONORS);
    const all = [driver, ...biggest];
    const total = all.reduce((s, c) => s + c.avail, 0);
    const poolNeed = need + all.length * MEMORY_OVERHEAD_FLOOR;
    if (all.length < minNodes) {
      return refuse(`only ${all.length} node(s) can pool, fewer than the ${minNodes} asked for`);
    }
    return refuse(`the best pool of ${all.length} has ${gb(total)} and needs ${gb(poolNeed)}`);
  }
  const members = [driver, ...forced, ...extra];
  if (request.max_nodes !== undefined && members.length > request.max_nodes) {
    return refuse(
      `the smallest pool that fits has ${members.length} nodes, more than the ${request.max_nodes} allowed`,
    );
  }
  return { ok: true, placement: pooled(view, card, storage, members, bestAlone, deps) };
}

/** Same /24: telemetry carries no prefix length, and direct links and home LANs are /24 or narrower. */
function sameSubnet(a: string, b: string): boolean {
  return a.split(".").slice(0, 3).join(".") === b.split(".").slice(0, 3).join(".");
}

/**
 * The address the driver reaches a donor by: the best link (USB4/Thunderbolt, Ethernet, Wi-Fi, other,
 * VPN last) on a subnet the driver shares, else the best routed one. A Thunderbolt address the driver
 * has no leg on is a cable to some other node, so it never counts as routed. Null: no usable route.
 */
export function donorAddress(driver: NodeView, donor: NodeView): NodeView["addresses"][number] | null {
  const shared = donor.addresses.find((a) => driver.addresses.some((d) => sameSubnet(a.ip, d.ip)));
  return shared ?? donor.addresses.find((a) => a.type !== "thunderbolt") ?? null;
}

/**
 * The RPC protocol a pool speaks: the required nodes' (they must agree), else the version with the most
 * memory to lend, so one odd node never drags the pool to its version.
 */
function poolProtocol(poolable: Candidate[], required: Set<string>): { version: string } | { error: string } {
  const forced = poolable.filter((c) => required.has(c.node.nodeId));
  const versions = [...new Set(forced.map((c) => c.node.rpcProtocol!))];
  if (versions.length > 1) {
    return {
      error: `the nodes asked for speak different ggml RPC protocols (${
        forced.map((c) => `${c.node.name} ${c.node.rpcProtocol}`).join(", ")
      }); llama.cpp refuses such a pool: run the same engine build on every node`,
    };
  }
  if (versions.length === 1) return { version: versions[0] };
  const lent = new Map<string, number>();
  for (const c of poolable) lent.set(c.node.rpcProtocol!, (lent.get(c.node.rpcProtocol!) ?? 0) + lend(c));
  const best = [...lent.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0];
  return { version: best[0] };
}

function singleReason(card: ModelCard): string {
  return card.capabilities.includes("vision") || card.vision ? " (vision models are not pooled)" : "";
}

function singleNode(
  view: ClusterView,
  card: ModelCard,
  storage: number,
  c: Candidate,
  deps: PlanDeps,
): Placement {
  const instanceId = deps.newId();
  const runnerId = deps.newId();
  const port = pickPort(new Set(view.portsInUse));
  const ctx = contextTokenLimit(card, storage, [{ fraction: 1, available: c.avail }]);
  const nodeId = c.node.nodeId;
  const instance: Instance = {
    MlxRingInstance: {
      instanceId,
      shardAssignments: {
        modelId: card.model_id,
        runnerToShard: {
          [runnerId]: shard(card, "PipelineShardMetadata", {
            deviceRank: 0,
            worldSize: 1,
            resolvedBackend: c.tag,
            startLayer: 0,
            endLayer: card.n_layers,
          }),
        },
        nodeToRunner: { [nodeId]: runnerId },
      },
      contextTokenLimit: ctx,
      hostsByNode: { [nodeId]: [{ ip: "0.0.0.0", port }] },
      ephemeralPort: port,
    },
  };
  return {
    instance,
    sharding: "Pipeline",
    instanceMeta: "MlxRing",
    nodes: [nodeId],
    memoryDeltaByNode: {
      [nodeId]: Math.round(shardFootprint(card, storage, 1, ctx ?? admissionTokens(card))),
    },
    contextTokenLimit: ctx,
    decodeSpeedRatio: 1,
    warnings: [],
  };
}

function pooled(
  view: ClusterView,
  card: ModelCard,
  storage: number,
  members: Candidate[],
  bestAlone: Candidate | null,
  deps: PlanDeps,
): Placement {
  const totalLend = members.reduce((s, c) => s + lend(c), 0);
  const shares = members.map((c) => ({ c, fraction: lend(c) / totalLend }));
  const ctx = contextTokenLimit(
    card,
    storage,
    shares.map((s) => ({ fraction: s.fraction, available: s.c.avail })),
  );
  const instanceId = deps.newId();
  const ports = new Set(view.portsInUse);
  const driver = members[0].node;
  const runnerToShard: Record<string, ShardMetadata> = {};
  const nodeToRunner: Record<string, string> = {};
  const donorEndpoints: Record<string, string> = {};
  const memoryDeltaByNode: Record<string, number> = {};
  const world = members.length;
  members.forEach((c, rank) => {
    const runnerId = deps.newId();
    nodeToRunner[c.node.nodeId] = runnerId;
    const common = { deviceRank: rank, worldSize: world, resolvedBackend: c.tag };
    if (rank === 0) {
      // The driver's full range is bookkeeping: llama.cpp splits layers across devices by free memory.
      runnerToShard[runnerId] = shard(card, "PipelineShardMetadata", {
        ...common,
        startLayer: 0,
        endLayer: card.n_layers,
      });
    } else {
      const host = donorAddress(driver, c.node)!.ip;
      const port = pickPort(ports);
      donorEndpoints[c.node.nodeId] = `${host}:${port}`;
      runnerToShard[runnerId] = shard(card, "RpcDonorShardMetadata", {
        ...common,
        startLayer: 0,
        endLayer: 0,
        driverNode: driver.nodeId,
        rpcHost: host,
        rpcPort: port,
      });
    }
  });
  for (const s of shares) {
    memoryDeltaByNode[s.c.node.nodeId] = Math.round(
      shardFootprint(card, storage, s.fraction, ctx ?? admissionTokens(card)),
    );
  }
  const warnings: string[] = [];
  let ratio: number | null = null;
  if (bestAlone) {
    ratio = Math.round(POOL_DECODE_RATIO_PER_HOP ** (world - 1) * 100) / 100;
    warnings.push(
      `a pool of ${world} is expected to decode at about ${
        Math.round(ratio * 100)
      }% of the speed of ${bestAlone.node.name}, which can hold ${card.model_id} alone`,
    );
  }
  const slowest = Math.max(...members.slice(1).map((c) => linkRank(c.node)));
  if (slowest >= LINK_RANK.wifi) {
    warnings.push("a donor is reached over wifi, VPN or an unknown link; every token crosses it");
  }
  if (kvBytesPerToken(card) === 0) {
    warnings.push(`${card.model_id} does not state its KV heads; the KV cache is not estimated`);
  }
  return {
    instance: {
      LlamaRpcInstance: {
        instanceId,
        shardAssignments: { modelId: card.model_id, runnerToShard, nodeToRunner },
        contextTokenLimit: ctx,
        driverNode: driver.nodeId,
        donorEndpoints,
      },
    },
    sharding: "Pipeline",
    instanceMeta: "LlamaRpc",
    nodes: members.map((c) => c.node.nodeId),
    memoryDeltaByNode,
    contextTokenLimit: ctx,
    decodeSpeedRatio: ratio,
    warnings,
  };
}

/** The entry POST /place_instance calls: the planned instance, or the reason it cannot be placed. */
export function placeInstance(
  view: ClusterView,
  card: ModelCard,
  request: PlacementRequest,
  deps: PlanDeps = { newId: () => crypto.randomUUID() },
): { instance: Instance; placement: Placement } | { error: string; pending: boolean } {
  const r = plan(view, card, request, deps);
  return r.ok
    ? { instance: r.placement.instance, placement: r.placement }
    : { error: r.error, pending: r.pending };
}
