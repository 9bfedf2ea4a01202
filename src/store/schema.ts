/**
 * The state database's tables (drizzle). Times are ISO-8601 UTC text so `skulk sql` users can read and
 * compare them directly; JSON columns hold the wire shapes. Migrations in migrations/ are generated from this.
 */
import { index, integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** Node inventory: every node this node has known, kept across restarts. */
export const nodes = sqliteTable("nodes", {
  id: text("id").primaryKey(),
  friendlyName: text("friendly_name").notNull(),
  version: text("version").notNull(),
  firstSeen: text("first_seen").notNull(),
  lastSeen: text("last_seen").notNull(),
  /** JSON: os, arch, cpu count, memory total, accelerators (the last reading's summary). */
  hardware: text("hardware").notNull().default("{}"),
  /** Last known API address ("host:port"), when known. */
  address: text("address"),
});

/** The control-plane log: every event the master indexed, replicated to every node. */
export const events = sqliteTable("events", {
  idx: integer("idx").primaryKey(),
  /** The election session that indexed it: "<master node id>/<election clock>". */
  session: text("session").notNull(),
  type: text("type").notNull(),
  payload: text("payload").notNull(),
  createdAt: text("created_at").notNull(),
}, (t) => [index("events_type_idx").on(t.type)]);

/** Placement history: one row per instance ever created, kept after it is deleted. */
export const instances = sqliteTable("instances", {
  id: text("id").primaryKey(),
  modelId: text("model_id").notNull(),
  /** "MlxRing", "LlamaRpc", ... plus sharding: e.g. "MlxRing/Pipeline". */
  shape: text("shape").notNull(),
  /** JSON array of node ids. */
  nodes: text("nodes").notNull(),
  createdAt: text("created_at").notNull(),
  deletedAt: text("deleted_at"),
  /** placed | running | failed | deleted | replaced */
  outcome: text("outcome").notNull(),
  reason: text("reason"),
  /** JSON: the tagged Instance as placed. */
  detail: text("detail").notNull().default("{}"),
}, (t) => [index("instances_model_idx").on(t.modelId)]);

/** Download failure records; cleared (not deleted) by a later success or a fix, so history stays. */
export const downloadFailures = sqliteTable("download_failures", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  nodeId: text("node_id").notNull(),
  modelId: text("model_id").notNull(),
  error: text("error").notNull(),
  failedAt: text("failed_at").notNull(),
  clearedAt: text("cleared_at"),
  clearedReason: text("cleared_reason"),
}, (t) => [index("download_failures_open_idx").on(t.nodeId, t.modelId, t.clearedAt)]);

/** Small node-local facts (onboarding flag, last election clock, ...). */
export const kv = sqliteTable("kv", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull(),
});

/** Engine processes this node started (llama-server, ggml-rpc-server, ...), so a restarted daemon reaps orphans. */
export const engineProcesses = sqliteTable("engine_processes", {
  pid: integer("pid").primaryKey(),
  kind: text("kind").notNull(),
  instanceId: text("instance_id"),
  runnerId: text("runner_id"),
  port: integer("port"),
  /** JSON argv, to confirm a pid still runs the engine we started before killing it. */
  command: text("command").notNull(),
  startedAt: text("started_at").notNull(),
});

/** Custom model cards (a local GGUF or a hub id added at run time), as the card's JSON. */
export const customCards = sqliteTable("custom_cards", {
  modelId: text("model_id").primaryKey(),
  card: text("card").notNull(),
  source: text("source").notNull(),
  addedAt: text("added_at").notNull(),
});

/** Facts resolved on first contact with the hub (a card's size, its GGUF header), reused from then on. */
export const resolvedModelFacts = sqliteTable("resolved_model_facts", {
  modelId: text("model_id").primaryKey(),
  storageBytes: integer("storage_bytes").notNull(),
  /** JSON: the GGUF header facts placement uses (layers, heads, KV heads, context, file type). */
  gguf: text("gguf").notNull().default("{}"),
  source: text("source").notNull(),
  resolvedAt: text("resolved_at").notNull(),
});

/** Telemetry history, sampled at a modest rate and pruned by retention. */
export const telemetrySamples = sqliteTable("telemetry_samples", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  nodeId: text("node_id").notNull(),
  takenAt: text("taken_at").notNull(),
  ramUsedBytes: integer("ram_used_bytes"),
  ramTotalBytes: integer("ram_total_bytes"),
  vramUsedBytes: integer("vram_used_bytes"),
  vramTotalBytes: integer("vram_total_bytes"),
  gpuUtilization: real("gpu_utilization"),
  temperatureCelsius: real("temperature_celsius"),
  powerWatts: real("power_watts"),
  cpuLoad: real("cpu_load"),
  diskAvailableBytes: integer("disk_available_bytes"),
}, (t) => [index("telemetry_samples_node_time_idx").on(t.nodeId, t.takenAt)]);

/**
 * Request trace spans (`tracing.enabled`): one row per span a node recorded, joined across nodes by
 * `task_id`; written in batches off the request path and pruned after `tracing.retention_days`.
 */
export const traceSpans = sqliteTable("trace_spans", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  taskId: text("task_id").notNull(),
  nodeId: text("node_id").notNull(),
  /** receive | route | forward | queue | prefill | decode | stream | request */
  category: text("category").notNull(),
  name: text("name").notNull(),
  /** Microseconds since the Unix epoch on the recording node's clock. */
  startUs: integer("start_us").notNull(),
  durationUs: integer("duration_us").notNull(),
  modelId: text("model_id"),
  instanceId: text("instance_id"),
  /** JSON object: what else the span knows (command id, target node, token counts, status). */
  attrs: text("attrs").notNull().default("{}"),
  createdAt: text("created_at").notNull(),
}, (t) => [
  index("trace_spans_task_idx").on(t.taskId),
  index("trace_spans_created_idx").on(t.createdAt),
]);
