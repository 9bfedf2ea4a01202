/**
 * One node's telemetry reading in upstream's wire pieces (`nodeIdentities`, `nodeMemory`, `nodeSystem`,
 * `nodeNetwork`, `nodeDisk`). Defined once here; gossip, /state and SQLite inventory all use it.
 */
import { z } from "zod";
import { MemorySchema } from "../cluster/tagged.ts";
import { MAX_REPORTED, RunningRequestSchema } from "../serving/running.ts";

export const NodeIdentityInfoSchema = z.object({
  modelId: z.string(),
  chipId: z.string(),
  friendlyName: z.string(),
  osVersion: z.string(),
  osBuildVersion: z.string(),
  skulkVersion: z.string(),
  skulkCommit: z.string(),
}).strict();

export const NodeMemoryInfoSchema = z.object({
  ramTotal: MemorySchema,
  ramAvailable: MemorySchema,
  swapTotal: MemorySchema.nullable(),
  swapAvailable: MemorySchema.nullable(),
}).strict();

export const AcceleratorSchema = z.object({
  vendor: z.string(),
  name: z.string(),
  utilizationRatio: z.number().nullable(),
  vramTotalBytes: z.number().nullable(),
  vramUsedBytes: z.number().nullable(),
  gttTotalBytes: z.number().nullable(),
  gttUsedBytes: z.number().nullable().default(null),
  powerWatts: z.number().nullable(),
  temperatureCelsius: z.number().nullable(),
  clockMhz: z.number().nullable(),
  unifiedMemory: z.boolean().default(false),
  /** Where the figures came from (nvml, nvidia-smi, sysfs, ioreg, macmon); optional so older peers still parse. */
  source: z.string().optional(),
}).strict();
export type Accelerator = z.infer<typeof AcceleratorSchema>;

export const TemperatureSchema = z.object({
  sensor: z.string(),
  label: z.string(),
  celsius: z.number(),
}).strict();
export type Temperature = z.infer<typeof TemperatureSchema>;

export const NodeSystemInfoSchema = z.object({
  gpuUsage: z.number().nullable(),
  temp: z.number().nullable(),
  sysPower: z.number().nullable(),
  pcpuUsage: z.number().nullable(),
  ecpuUsage: z.number().nullable(),
  cpuCount: z.number().int().nullable().default(null),
  loadAverage: z.array(z.number()).nullable().default(null),
  accelerator: AcceleratorSchema.nullable(),
  accelerators: z.array(AcceleratorSchema).default([]),
  /** Share of all CPU time busy since the previous reading (0..1); null on the first reading. */
  cpuUsage: z.number().nullable().optional(),
  /** Every temperature sensor the node exposes (hwmon, thermal zones), sorted by sensor and label. */
  temperatures: z.array(TemperatureSchema).optional(),
}).strict();

export const InterfaceTypeSchema = z.enum([
  "wifi",
  "ethernet",
  "maybe_ethernet",
  "thunderbolt",
  "vpn",
  "unknown",
]);
export type InterfaceType = z.infer<typeof InterfaceTypeSchema>;
export const NetworkInterfaceSchema = z.object({
  name: z.string(),
  ipAddress: z.string(),
  interfaceType: InterfaceTypeSchema,
}).strict();
export const NodeNetworkInfoSchema = z.object({ interfaces: z.array(NetworkInterfaceSchema) }).strict();

export type NetworkInterface = z.infer<typeof NetworkInterfaceSchema>;

export const NodeDiskInfoSchema = z.object({
  total: MemorySchema,
  available: MemorySchema,
  /** The directory measured: where models are stored. */
  path: z.string().optional(),
}).strict();

export const EngineInfoSchema = z.object({
  llamaServer: z.string().nullable(),
  llamaCppBuild: z.string().nullable(),
  rpcProtocol: z.string().nullable(),
  backends: z.array(z.string()),
}).strict();

/** A measured link from this node to a peer: the round trip of its last gossip exchange with it. */
export const LinkSchema = z.object({
  nodeId: z.string(),
  /** The peer's API address the exchange went to ("host:port"). */
  address: z.string(),
  rttMs: z.number().nonnegative(),
  /** When it was measured (ms since epoch, this node's clock). */
  measuredAt: z.number(),
}).strict();
export type Link = z.infer<typeof LinkSchema>;

/** Most links one reading carries (a reading is gossiped, so it stays bounded). */
export const MAX_LINKS = 128;

export const NodeReadingSchema = z.object({
  nodeId: z.string(),
  /** Where the node's API answers, for peers and the data plane ("host:port"). */
  apiAddress: z.string().nullable(),
  worker: z.boolean(),
  identity: NodeIdentityInfoSchema,
  memory: NodeMemoryInfoSchema.nullable(),
  system: NodeSystemInfoSchema.nullable(),
  network: NodeNetworkInfoSchema.nullable(),
  disk: NodeDiskInfoSchema.nullable(),
  engine: EngineInfoSchema.nullable(),
  /**
   * Ours, only when set: `node.memory_limit`, the most RAM this node lends in all. `memory` is capped at it,
   * which cannot show what loaded engines use, so the planner subtracts their footprints from it.
   */
  memoryLimit: z.number().int().positive().optional(),
  /** Requests this node's engines generate now (ours; optional so older peers still parse). */
  running: z.array(RunningRequestSchema).max(MAX_REPORTED).optional(),
  /** Peers this node exchanged gossip with lately, with the measured round trip (ours; optional likewise). */
  links: z.array(LinkSchema).max(MAX_LINKS).optional(),
}).strict();
export type NodeReading = z.infer<typeof NodeReadingSchema>;
