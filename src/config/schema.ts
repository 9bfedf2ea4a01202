/**
 * The node's settings: one table of keys, each with its flag, environment variable, `skulk.yaml` path,
 * zod schema and default. Loading (config/load.ts) resolves flags > env > skulk.yaml > defaults per key.
 */
import { z } from "zod";
import { DetectorSchema } from "../audio/vad.ts";
import { decodeJoinToken, type JoinToken } from "../cluster/secret.ts";
import { LifelineModeSchema } from "../engines/lifeline.ts";
import { LogFormatSchema, LogLevelSchema } from "../log/mod.ts";

const port = z.coerce.number().int().min(0, "must be between 0 (any free port) and 65535").max(
  65535,
  "must be between 0 (any free port) and 65535",
);
const nonEmpty = z.string().trim().min(1, "must not be empty");
const bool = z.union([z.boolean(), z.enum(["1", "0", "true", "false", "yes", "no", "on", "off"])])
  .transform((v) => typeof v === "boolean" ? v : ["1", "true", "yes", "on"].includes(v));
const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};
/** A size: bytes, or a number with a unit ("512MiB", "24 GB"). */
const byteSize = z.union([z.number(), z.string()]).transform((v, ctx) => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(String(v));
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined || Number(m[1]) <= 0) {
    ctx.addIssue({
      code: "custom",
      message: "must be a positive size in bytes or with a unit (e.g. 512MiB, 24GB)",
    });
    return z.NEVER;
  }
  return Math.floor(Number(m[1]) * unit);
});
const seconds = z.coerce.number().positive("must be a positive number of seconds");
const peerList = z.union([z.array(nonEmpty), z.string()])
  .transform((v) => (typeof v === "string" ? v.split(",") : v).map((s) => s.trim()).filter(Boolean))
  .pipe(z.array(z.string().regex(/^[^\s:]+:\d{1,5}$/, "each peer must be host:port")));

/** A browser origin (`scheme://host[:port]`, as a browser sends it in `Origin`), or `*` for any. */
const origin = z.string().trim().refine(
  (o) => {
    if (o === "*") return true;
    try {
      const u = new URL(o);
      return (u.protocol === "http:" || u.protocol === "https:") && u.origin === o;
    } catch {
      return false;
    }
  },
  "each origin must be `*` or scheme://host[:port] with no path or trailing slash (e.g. http://localhost:5173)",
);
const originList = z.union([z.array(z.string()), z.string()])
  .transform((v) => (typeof v === "string" ? v.split(",") : v).map((s) => s.trim()).filter(Boolean))
  .pipe(z.array(origin));
const count = z.coerce.number().int("must be a whole number").positive("must be a positive number");

export interface Setting<T> {
  /** Dotted name used in messages and in `skulk.yaml` (`api.port` is `api: {port: …}`). */
  key: string;
  /** commander's camelCase option name, when the setting has a flag. */
  flag?: string;
  env?: string;
  schema: z.ZodType<T>;
  default: T | (() => T);
  /** A credential: never shown back (GET /config, the settings form, logs). */
  secret?: true;
}

function setting<T>(s: Setting<T>): Setting<T> {
  return s;
}

export const SETTINGS = {
  apiPort: setting({ key: "api.port", flag: "apiPort", env: "SKULK_API_PORT", schema: port, default: 52415 }),
  apiHost: setting({
    key: "api.host",
    flag: "apiHost",
    env: "SKULK_API_HOST",
    schema: nonEmpty,
    default: "0.0.0.0",
  }),
  apiKey: setting({
    key: "api.key",
    env: "SKULK_API_KEY",
    secret: true,
    schema: z.string().min(16, "must be at least 16 characters").nullable(),
    default: null,
  }),
  /** Browser origins besides the node's own that may call the API (CORS and state-changing requests). */
  corsOrigins: setting({
    key: "api.cors_origins",
    env: "SKULK_CORS_ORIGINS",
    schema: originList,
    default: [] as string[],
  }),
  /** Largest request body on every route but the audio uploads (which keep their 25 MiB). */
  maxBodyBytes: setting({
    key: "api.max_body_bytes",
    env: "SKULK_MAX_BODY_BYTES",
    schema: byteSize,
    default: 1024 * 1024,
  }),
  /** A request body must arrive within this long of its headers (uploads: ten times this). */
  bodyTimeout: setting({
    key: "api.body_timeout_seconds",
    env: "SKULK_BODY_TIMEOUT",
    schema: seconds,
    default: 30,
  }),
  maxConcurrentStreams: setting({
    key: "api.max_concurrent_streams",
    env: "SKULK_MAX_CONCURRENT_STREAMS",
    schema: count,
    default: 256,
  }),
  maxRealtimeSessions: setting({
    key: "api.max_realtime_sessions",
    env: "SKULK_MAX_REALTIME_SESSIONS",
    schema: count,
    default: 32,
  }),
  dataDir: setting({
    key: "node.data_dir",
    flag: "dataDir",
    env: "SKULK_DATA_DIR",
    schema: nonEmpty,
    default: () => `${Deno.env.get("HOME") ?? "."}/.skulk`,
  }),
  modelsDir: setting({
    key: "node.models_dir",
    flag: "modelsDir",
    env: "SKULK_MODELS_DIR",
    schema: nonEmpty.nullable(),
    default: null,
  }),
  friendlyName: setting({
    key: "node.friendly_name",
    flag: "friendlyName",
    env: "SKULK_FRIENDLY_NAME",
    schema: nonEmpty.max(64, "must be at most 64 characters"),
    default: () => Deno.hostname(),
  }),
  /** Lend at most this much: the node reports no more available RAM than this (pooling, tests). */
  memoryLimit: setting({
    key: "node.memory_limit",
    env: "SKULK_MEMORY_LIMIT",
    schema: byteSize.nullable(),
    default: null,
  }),
  /** Test-only routes (`POST /cluster/test_events`); the test harness sets it, nothing else should. */
  testMode: setting({ key: "node.test_mode", env: "SKULK_TEST_MODE", schema: bool, default: false }),
  worker: setting({ key: "node.worker", flag: "worker", env: "SKULK_WORKER", schema: bool, default: true }),
  namespace: setting({
    key: "cluster.namespace",
    flag: "namespace",
    env: "SKULK_NAMESPACE",
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "must be 1-64 letters, digits, '.', '_' or '-'"),
    default: "default",
  }),
  peers: setting({
    key: "cluster.peers",
    flag: "peer",
    env: "SKULK_PEERS",
    schema: peerList,
    default: [] as string[],
  }),
  forceMaster: setting({
    key: "cluster.force_master",
    flag: "forceMaster",
    env: "SKULK_FORCE_MASTER",
    schema: bool,
    default: false,
  }),
  clusterSecret: setting({
    key: "cluster.secret",
    env: "SKULK_CLUSTER_SECRET",
    secret: true,
    schema: z.string().min(8, "must be at least 8 characters").nullable(),
    default: null,
  }),
  /** A join token from `skulk cluster token`: the cluster's secret, namespace and one member's address. */
  join: setting({
    key: "cluster.join",
    flag: "join",
    env: "SKULK_JOIN",
    secret: true,
    schema: z.string().transform((v, ctx): JoinToken => {
      try {
        return decodeJoinToken(v);
      } catch (e) {
        ctx.addIssue({ code: "custom", message: (e as Error).message });
        return z.NEVER;
      }
    }).nullable(),
    default: null,
  }),
  mdns: setting({ key: "cluster.mdns", flag: "mdns", env: "SKULK_MDNS", schema: bool, default: true }),
  nodeTimeout: setting({
    key: "cluster.node_timeout_seconds",
    env: "SKULK_NODE_TIMEOUT",
    schema: seconds,
    default: 30,
  }),
  /** How long the master waits for a majority to hold an event before answering a retryable 503. */
  commitTimeout: setting({
    key: "cluster.commit_timeout_seconds",
    env: "SKULK_COMMIT_TIMEOUT",
    schema: seconds,
    default: 3,
  }),
  /** Healing's first wait after finding no place for a lost instance; it doubles each attempt (5 attempts). */
  healRetryBase: setting({
    key: "cluster.heal_retry_seconds",
    env: "SKULK_HEAL_RETRY",
    schema: seconds,
    default: 5,
  }),
  /**
   * How long a forward waits for the other node's first sign of life (its answer, or its answer to a
   * liveness probe). A node that is up answers in milliseconds; a SIGSTOPped one still accepts the TCP
   * connection (the kernel does), so only this deadline notices it.
   */
  forwardConnectTimeout: setting({
    key: "cluster.forward_connect_timeout_seconds",
    env: "SKULK_FORWARD_CONNECT_TIMEOUT",
    schema: seconds,
    default: 3,
  }),
  /**
   * After that, the longest the other node may stay silent (no byte of the answer, no answer to a probe
   * sent every second of silence) before the forward fails with a 503 naming it. Not a first-byte
   * deadline: a node that keeps answering probes is working (a long prefill, a non-streamed generation).
   */
  forwardSilenceTimeout: setting({
    key: "cluster.forward_silence_timeout_seconds",
    env: "SKULK_FORWARD_SILENCE_TIMEOUT",
    schema: seconds,
    default: 15,
  }),
  /** How engines are tied to the daemon's life (src/engines/lifeline.ts). */
  engineLifeline: setting({
    key: "node.engine_lifeline",
    env: "SKULK_ENGINE_LIFELINE",
    schema: LifelineModeSchema,
    default: "auto" as const,
  }),
  logLevel: setting({
    key: "logging.level",
    flag: "logLevel",
    env: "SKULK_LOG_LEVEL",
    schema: LogLevelSchema,
    default: "info" as const,
  }),
  logFormat: setting({
    key: "logging.format",
    flag: "logFormat",
    env: "SKULK_LOG_FORMAT",
    schema: LogFormatSchema,
    default: "auto" as const,
  }),
  telemetryHistoryInterval: setting({
    key: "telemetry.history_interval_seconds",
    env: "SKULK_TELEMETRY_HISTORY_INTERVAL",
    schema: z.coerce.number().min(0, "must be 0 (off) or a number of seconds"),
    default: 60,
  }),
  telemetryHistoryRetention: setting({
    key: "telemetry.history_retention_hours",
    env: "SKULK_TELEMETRY_HISTORY_RETENTION_HOURS",
    schema: z.coerce.number().positive("must be a positive number of hours"),
    default: 168,
  }),
  /** The realtime route's turn detector when a session names none (`turn_detection.detector`). */
  speechVad: setting({
    key: "speech.vad",
    env: "SKULK_SPEECH_VAD",
    schema: DetectorSchema,
    default: "energy" as const,
  }),
  defaultModel: setting({
    key: "inference.default_model",
    flag: "defaultModel",
    env: "SKULK_DEFAULT_MODEL",
    schema: nonEmpty.nullable(),
    default: null,
  }),
} as const;

type Settings = typeof SETTINGS;
export type Config = { -readonly [K in keyof Settings]: Settings[K] extends Setting<infer T> ? T : never };
