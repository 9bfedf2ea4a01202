/**
 * Instances, shards and runner statuses in upstream's wire shapes (camelCase, tagged). An instance is
 * one placed model: which runner on which node serves which shard, and how the engines reach each other.
 */
import { z } from "zod";
import { tagged, type Untagged } from "./tagged.ts";

const ModelCardWireSchema = z.looseObject({ modelId: z.string() });

const ShardBase = {
  modelCard: ModelCardWireSchema,
  deviceRank: z.number().int().nonnegative(),
  worldSize: z.number().int().positive(),
  resolvedBackend: z.string().nullable(),
  immediateException: z.boolean().default(false),
  shouldTimeout: z.number().nullable().default(null),
  startLayer: z.number().int().nonnegative(),
  endLayer: z.number().int().nonnegative(),
  nLayers: z.number().int().positive(),
};

export const ShardMetadataSchema = z.union([
  tagged("PipelineShardMetadata", z.object(ShardBase).strict()),
  tagged("TensorShardMetadata", z.object(ShardBase).strict()),
  /** A donor of a pooled GGUF instance: lends memory through ggml-rpc-server, holds no file. */
  tagged(
    "RpcDonorShardMetadata",
    z.object({ ...ShardBase, driverNode: z.string(), rpcHost: z.string(), rpcPort: z.number().int() })
      .strict(),
  ),
]);
export type ShardMetadata = z.infer<typeof ShardMetadataSchema>;

export const ShardAssignmentsSchema = z.object({
  modelId: z.string(),
  runnerToShard: z.record(z.string(), ShardMetadataSchema),
  nodeToRunner: z.record(z.string(), z.string()),
}).strict();

const HostSchema = z.object({ ip: z.string(), port: z.number().int() }).strict();

const InstanceBase = {
  instanceId: z.string(),
  shardAssignments: ShardAssignmentsSchema,
  contextTokenLimit: z.number().int().positive().nullable().default(null),
};

export const InstanceSchema = z.union([
  tagged(
    "MlxRingInstance",
    z.object({
      ...InstanceBase,
      hostsByNode: z.record(z.string(), z.array(HostSchema)).default({}),
      ephemeralPort: z.number().int().default(0),
    }).strict(),
  ),
  tagged(
    "MlxJacclInstance",
    z.object({
      ...InstanceBase,
      jacclDevices: z.array(z.array(z.string().nullable())),
      jacclCoordinators: z.record(z.string(), z.string()),
    }).strict(),
  ),
  /** 1.4: one llama-server driver plus ggml-rpc-server donors pooling their memory. */
  tagged(
    "LlamaRpcInstance",
    z.object({
      ...InstanceBase,
      driverNode: z.string(),
      donorEndpoints: z.record(z.string(), z.string()),
    }).strict(),
  ),
]);
export type Instance = z.infer<typeof InstanceSchema>;
/** The inner object of any instance variant (the fields every variant shares, plus its own). */
export type InstanceBody = Untagged<Instance>;

export function instanceBody(i: Instance): InstanceBody {
  return Object.values(i)[0] as InstanceBody;
}

export function instanceKind(i: Instance): "MlxRing" | "MlxJaccl" | "LlamaRpc" {
  return Object.keys(i)[0].replace(/Instance$/, "") as "MlxRing" | "MlxJaccl" | "LlamaRpc";
}

/**
 * Ours: the constraints an instance was placed with (upstream's `PlaceInstanceParams` less the model id,
 * camelCase like every event field), so healing can place it again the same way. `minNodes` and
 * `instanceMeta` default to the planner's defaults; `excludedNodes` are the user's exclusions.
 */
export const PlacementRecordSchema = z.object({
  sharding: z.enum(["Pipeline", "Tensor"]).default("Pipeline"),
  instanceMeta: z.enum(["MlxRing", "MlxJaccl", "LlamaRpc"]).default("MlxRing"),
  minNodes: z.number().int().positive().default(1),
  excludedNodes: z.array(z.string()).default([]),
  /** Healing's count for this lineage: re-placements made so far (0 for the user's own placement). */
  healAttempt: z.number().int().nonnegative().default(0),
  /**
   * Ours, set by healing's relaunch (src/healing/relaunch.ts): this instance starts again, on the same
   * node, the failed instance `of`, which stays visible until this one serves; `count` relaunches so far.
   */
  relaunch: z.object({ of: z.string(), count: z.number().int().positive() }).strict().optional(),
  /** Ours: nodes where this lineage's engine kept failing past its relaunches; later placements avoid them. */
  failedOn: z.array(z.string()).optional(),
}).strict();
export type PlacementRecord = z.infer<typeof PlacementRecordSchema>;

export const RunnerStatusSchema = z.union([
  tagged("RunnerIdle", z.object({}).strict()),
  tagged("RunnerConnecting", z.object({}).strict()),
  tagged("RunnerConnected", z.object({}).strict()),
  tagged(
    "RunnerLoading",
    z.object({ layersLoaded: z.number().int(), totalLayers: z.number().int() }).strict(),
  ),
  tagged("RunnerLoaded", z.object({}).strict()),
  tagged("RunnerWarmingUp", z.object({}).strict()),
  tagged("RunnerReady", z.object({}).strict()),
  tagged("RunnerRunning", z.object({}).strict()),
  tagged("RunnerShuttingDown", z.object({}).strict()),
  tagged("RunnerShutdown", z.object({}).strict()),
  tagged("RunnerFailed", z.object({ errorMessage: z.string().nullable() }).strict()),
]);
export type RunnerStatus = z.infer<typeof RunnerStatusSchema>;
