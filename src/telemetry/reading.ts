/**
 * One node's telemetry reading in upstream's wire pieces (`nodeIdentities`, `nodeMemory`, `nodeSystem`,
 * `nodeNetwork`, `nodeDisk`). Defined once here; gossip, /state and SQLite inventory all use it.
 */
import { z } from "zod";
import { MemorySchema } from "../cluster/tagged.ts";

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
}).strict();
export type Accelerator = z.infer<typeof AcceleratorSchema>;

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
}).strict();

export const InterfaceTypeSchema = z.enum(["wifi", "ethernet", "maybe_ethernet", "thunderbolt", "vpn", "unknown"]);
export const NetworkInterfaceSchema = z.object({
  name: z.string(),
  ipAddress: z.string(),
  interfaceType: InterfaceTypeSchema,
}).strict();
export const NodeNetworkInfoSchema = z.object({ interfaces: z.array(NetworkInterfaceSchema) }).strict();

export const NodeDiskInfoSchema = z.object({ total: MemorySchema, available: MemorySchema }).strict();

export const EngineInfoSchema = z.object({
  llamaServer: z.string().nullable(),
  llamaCppBuild: z.string().nullable(),
  rpcProtocol: z.string().nullable(),
  backends: z.array(z.string()),
}).strict();

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
}).strict();
export type NodeReading = z.infer<typeof NodeReadingSchema>;
