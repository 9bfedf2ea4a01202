/**
 * The diagnostics wire shapes (upstream's `shared/types/diagnostics.py`, camelCase), defined once: the
 * routes answer them, peers parse them, tests check real answers against them.
 */
import { z } from "zod";
import { ExtensionsStatusSchema } from "../extensions/api.ts";
import {
  NodeDiskInfoSchema,
  NodeMemoryInfoSchema,
  NodeNetworkInfoSchema,
  NodeSystemInfoSchema,
} from "../telemetry/reading.ts";
import { FlightEntrySchema } from "./recorder.ts";

export const ProcessRoleSchema = z.enum(["skulk", "runner", "other"]);

export const ProcessInfoSchema = z.object({
  pid: z.number().int(),
  parentPid: z.number().int().nullable(),
  role: ProcessRoleSchema,
  /** The command line, space-joined (bounded). */
  command: z.string(),
  /** The kernel's state letter and word (`S (sleeping)`); null where /proc is absent. */
  status: z.string().nullable(),
  /** Share of one core over the sampling window (100 = one core busy). */
  cpuPercent: z.number().nullable(),
  memoryPercent: z.number().nullable(),
  rss: z.number().nullable(),
  elapsedSeconds: z.number().nullable(),
  isChildOfSkulk: z.boolean(),
  /** The runner the process serves (engines), else null. */
  runnerId: z.string().nullable(),
}).strict();
export type ProcessInfo = z.infer<typeof ProcessInfoSchema>;

export const RuntimeSchema = z.object({
  nodeId: z.string(),
  hostname: z.string(),
  friendlyName: z.string(),
  isMaster: z.boolean(),
  masterNodeId: z.string().nullable(),
  /** This node's part in the election: master, candidate, follower, none (no cluster plane). */
  clusterRole: z.string(),
  cwd: z.string(),
  configPath: z.string(),
  configFileExists: z.boolean(),
  skulkVersion: z.string(),
  skulkCommit: z.string().nullable(),
  /** Upstream's name for the namespace peers must share; here `cluster.namespace`. */
  libp2pNamespace: z.string(),
  denoVersion: z.string(),
  pid: z.number().int(),
  startedAt: z.string(),
  uptimeSeconds: z.number(),
  tracingEnabled: z.boolean(),
  structuredLoggingConfigured: z.boolean(),
  /** The log store's URL without its query; the token is never shown. */
  loggingIngestUrl: z.string().nullable(),
}).strict();

export const IdentitySchema = z.object({
  nodeId: z.string(),
  friendlyName: z.string(),
  namespace: z.string(),
  apiAddress: z.string().nullable(),
  dataDir: z.string(),
}).strict();

export const ResourcesSchema = z.object({
  /** This node's memory as the cluster's telemetry holds it (what placement plans with). */
  gatheredMemory: NodeMemoryInfoSchema.nullable(),
  /** Read now from the OS. */
  currentMemory: z.object({
    total: z.number(),
    available: z.number(),
    free: z.number(),
    swapTotal: z.number(),
    swapFree: z.number(),
  }).strict(),
  /** macOS wired memory in upstream; no such figure here. */
  currentWired: z.null(),
  disk: NodeDiskInfoSchema.nullable(),
  system: NodeSystemInfoSchema.nullable(),
  network: NodeNetworkInfoSchema.nullable(),
}).strict();

export const SupervisorRunnerSchema = z.object({
  runnerId: z.string(),
  instanceId: z.string(),
  nodeId: z.string(),
  modelId: z.string(),
  deviceRank: z.number().int().nullable(),
  worldSize: z.number().int().nullable(),
  startLayer: z.number().int().nullable(),
  endLayer: z.number().int().nullable(),
  nLayers: z.number().int().nullable(),
  role: z.enum(["single", "driver", "donor"]),
  engineKind: z.string().nullable(),
  pid: z.number().int().nullable(),
  processAlive: z.boolean(),
  /** The runner's status in the replicated state (`RunnerReady`, `RunnerFailed`, ...). */
  statusKind: z.string().nullable(),
  phase: z.string(),
  /** When the flight recorder last saw the phase change (null: before the ring's oldest entry). */
  phaseStartedAt: z.string().nullable(),
  secondsInPhase: z.number().nullable(),
  failure: z.string().nullable(),
  logTail: z.array(z.string()),
  /** This runner's entries of the flight recorder, newest 128. */
  flightRecorder: z.array(FlightEntrySchema),
}).strict();
export type SupervisorRunner = z.infer<typeof SupervisorRunnerSchema>;

export const PlacementRunnerSchema = z.object({
  runnerId: z.string(),
  nodeId: z.string(),
  deviceRank: z.number().int().nullable(),
  statusKind: z.string().nullable(),
}).strict();

export const PlacementDiagSchema = z.object({
  instanceId: z.string(),
  modelId: z.string(),
  masterNodeId: z.string().nullable(),
  masterIsPlacementNode: z.boolean(),
  localNodeIsPlacementNode: z.boolean(),
  placementNodeIds: z.array(z.string()),
  runners: z.array(PlacementRunnerSchema),
  warnings: z.array(z.string()),
}).strict();

export const ShipStatsSchema = z.object({
  url: z.string(),
  format: z.enum(["victorialogs", "loki"]),
  shipped: z.number().int(),
  dropped: z.number().int(),
  rejected: z.number().int(),
  buffered: z.number().int(),
  bufferLines: z.number().int(),
  failuresInARow: z.number().int(),
  lastError: z.string().nullable(),
  lastShippedAt: z.string().nullable(),
}).strict();

export const LoggingDiagSchema = z.object({
  file: z.object({ path: z.string(), maxBytes: z.number(), files: z.number() }).strict().nullable(),
  shipping: ShipStatsSchema.nullable(),
}).strict();

export const FlightRecorderStatsSchema = z.object({
  size: z.number().int(),
  held: z.number().int(),
  noted: z.number().int(),
}).strict();

export const NodeDiagnosticsSchema = z.object({
  generatedAt: z.string(),
  runtime: RuntimeSchema,
  identity: IdentitySchema,
  resources: ResourcesSchema,
  processes: z.array(ProcessInfoSchema),
  supervisorRunners: z.array(SupervisorRunnerSchema),
  placements: z.array(PlacementDiagSchema),
  logging: LoggingDiagSchema,
  flightRecorder: FlightRecorderStatsSchema,
  /** Ours: the extensions this node loaded and refused (docs/extensions.md). */
  extensions: ExtensionsStatusSchema,
  warnings: z.array(z.string()),
}).strict();
export type NodeDiagnostics = z.infer<typeof NodeDiagnosticsSchema>;

export const CaptureRequestSchema = z.object({
  runnerId: z.string().min(1).max(200).optional(),
  taskId: z.string().min(1).max(200).optional(),
  includeProcessSamples: z.boolean().default(true),
  sampleDurationSeconds: z.number().min(1).max(10).default(3),
  /** Lines of the node's log file in the bundle. */
  logLines: z.number().int().min(0).max(5000).default(500),
}).strict();
export type CaptureRequest = z.infer<typeof CaptureRequestSchema>;

export const ProcessSampleSchema = z.object({
  name: z.string(),
  pid: z.number().int(),
  role: ProcessRoleSchema,
  durationSeconds: z.number(),
  ok: z.boolean(),
  cpuPercent: z.number().nullable(),
  rssStart: z.number().nullable(),
  rssEnd: z.number().nullable(),
  error: z.string().nullable(),
}).strict();

export const CaptureSchema = z.object({
  generatedAt: z.string(),
  nodeId: z.string(),
  nodeDiagnostics: NodeDiagnosticsSchema,
  runner: SupervisorRunnerSchema.nullable(),
  flightRecorder: z.array(FlightEntrySchema),
  processSamples: z.array(ProcessSampleSchema),
  /** The newest lines of the node's log file (JSON lines), oldest first. */
  logTail: z.array(z.string()),
  warnings: z.array(z.string()),
}).strict();
export type Capture = z.infer<typeof CaptureSchema>;

export const ClusterNodeDiagSchema = z.object({
  nodeId: z.string(),
  url: z.string().nullable(),
  ok: z.boolean(),
  diagnostics: NodeDiagnosticsSchema.optional(),
  error: z.string().optional(),
}).strict();

export const ClusterDiagnosticsSchema = z.object({
  generatedAt: z.string(),
  localNodeId: z.string(),
  masterNodeId: z.string().nullable(),
  nodes: z.array(ClusterNodeDiagSchema),
}).strict();

export const RunnerSynopsisSchema = z.object({
  runnerId: z.string(),
  instanceId: z.string(),
  nodeId: z.string(),
  modelId: z.string(),
  deviceRank: z.number().int().nullable(),
  worldSize: z.number().int().nullable(),
  statusKind: z.string().nullable(),
}).strict();
export type RunnerSynopsis = z.infer<typeof RunnerSynopsisSchema>;

export const UnreachableSchema = z.object({
  nodeId: z.string(),
  url: z.string().nullable(),
  error: z.string(),
})
  .strict();
export type Unreachable = z.infer<typeof UnreachableSchema>;

export const TimelineSchema = z.object({
  generatedAt: z.string(),
  localNodeId: z.string(),
  masterNodeId: z.string().nullable(),
  runners: z.array(RunnerSynopsisSchema),
  timeline: z.array(FlightEntrySchema),
  /** Nodes asked, answered or not. */
  nodes: z.array(z.string()),
  unreachableNodes: z.array(UnreachableSchema),
}).strict();
export type Timeline = z.infer<typeof TimelineSchema>;

/** What one node asks another over the signed peer route. */
export const PeerDiagRequestSchema = z.discriminatedUnion("what", [
  z.object({ what: z.literal("node") }).strict(),
  z.object({
    what: z.literal("timeline"),
    sinceMs: z.number().optional(),
    limit: z.number().int().positive().max(100_000),
  }).strict(),
  z.object({ what: z.literal("capture"), request: CaptureRequestSchema }).strict(),
]);
export type PeerDiagRequest = z.infer<typeof PeerDiagRequestSchema>;
