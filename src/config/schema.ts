/**
 * The program's settings: one table of keys, each with its flag, environment variable, `skulk.yaml` path,
 * zod schema, default and description. Loading (config/load.ts) resolves flags > env > skulk.yaml > defaults
 * per key; no other module reads a `SKULK_*` variable, and docs/configuration.md is generated from this table.
 */
import { z } from "zod";
import { DetectorSchema } from "../audio/vad.ts";
import { decodeJoinToken, type JoinToken } from "../cluster/secret.ts";
import { DEFAULT_RETRY } from "../downloads/retry.ts";
import { LifelineModeSchema } from "../engines/lifeline.ts";
import { NgramMode } from "../engines/speculation.ts";
import { LogFormatSchema, LogLevelSchema } from "../log/mod.ts";
import { IngestFormatSchema } from "../log/ship.ts";

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

/** The process environment as config resolution sees it (tests pass their own). */
export type Env = Record<string, string | undefined>;

export interface Setting<T> {
  /** Dotted name used in messages and in `skulk.yaml` (`api.port` is `api: {port: …}`). */
  key: string;
  /** commander's camelCase option name, when the setting has a flag. */
  flag?: string;
  env?: string;
  /** Further variables read, in order, when `env` is unset (upstream's or huggingface_hub's names). */
  envAliases?: string[];
  schema: z.ZodType<T>;
  /** A function when the default depends on the host (its environment: HOME, XDG_CACHE_HOME). */
  default: T | ((env: Env) => T);
  /** One line for docs/configuration.md: what the setting changes. */
  description: string;
  /** The default as the docs show it, where the value itself says little (a function, a derived path). */
  defaultText?: string;
  /** The flag as the docs show it, where commander's name is not `--kebab-name` (`--no-mdns`, repeatable). */
  flagText?: string;
  /** Not read from skulk.yaml (the path of skulk.yaml itself). */
  fileless?: true;
  /** A credential: never shown back (GET /config, the settings form, logs). */
  secret?: true;
  /**
   * "cluster": every node must agree on it, so `PUT /config` makes it a `ClusterConfigChanged` event that
   * every node applies (over its flag, environment and skulk.yaml) and keeps across restarts. Absent:
   * node-local, this node's skulk.yaml only (ports, paths, credentials, per-node limits, bootstrap).
   */
  scope?: "cluster";
}

export type Scope = "cluster" | "node";

export const scopeOf = (s: Setting<unknown>): Scope => s.scope ?? "node";

function setting<T>(s: Setting<T>): Setting<T> {
  return s;
}

export const SETTINGS = {
  apiPort: setting({
    key: "api.port",
    flag: "apiPort",
    env: "SKULK_API_PORT",
    schema: port,
    default: 52415,
    description: "HTTP port of the API and dashboard (0: any free port)",
  }),
  apiHost: setting({
    key: "api.host",
    flag: "apiHost",
    env: "SKULK_API_HOST",
    schema: nonEmpty,
    default: "0.0.0.0",
    description: "address the API binds",
  }),
  apiKey: setting({
    key: "api.key",
    env: "SKULK_API_KEY",
    secret: true,
    schema: z.string().min(16, "must be at least 16 characters").nullable(),
    default: null,
    description:
      "secret, 16+ characters: clients send `Authorization: Bearer <key>`; also makes the node generate a cluster secret (below)",
  }),
  /**
   * Browser origins besides the node's own that may call the API (CORS and state-changing requests).
   * Cluster-wide: a browser app may call whichever node, so every node allows the same origins.
   */
  corsOrigins: setting({
    scope: "cluster",
    key: "api.cors_origins",
    env: "SKULK_CORS_ORIGINS",
    schema: originList,
    default: [] as string[],
    description:
      "browser origins besides the node's own that may call the API, e.g. `http://localhost:5173`; `*` for any (then without credentials)",
  }),
  /** Largest request body on every route but the audio uploads (which keep their 25 MiB). */
  maxBodyBytes: setting({
    key: "api.max_body_bytes",
    env: "SKULK_MAX_BODY_BYTES",
    schema: byteSize,
    default: 1024 * 1024,
    description: "largest request body (`512KiB`, `4MiB`); the audio uploads keep 25 MiB",
    defaultText: "1 MiB",
  }),
  /** A request body must arrive within this long of its headers (uploads: ten times this). */
  bodyTimeout: setting({
    key: "api.body_timeout_seconds",
    env: "SKULK_BODY_TIMEOUT",
    schema: seconds,
    default: 30,
    description: "a request body must arrive within this long of its headers (uploads: ten times), else 408",
  }),
  maxConcurrentStreams: setting({
    key: "api.max_concurrent_streams",
    env: "SKULK_MAX_CONCURRENT_STREAMS",
    schema: count,
    default: 256,
    description: "streamed answers running at once on this node; one more is 429",
  }),
  maxRealtimeSessions: setting({
    key: "api.max_realtime_sessions",
    env: "SKULK_MAX_REALTIME_SESSIONS",
    schema: count,
    default: 32,
    description: "`/v1/realtime` sockets open at once on this node; one more is 429",
  }),
  dataDir: setting({
    key: "node.data_dir",
    flag: "dataDir",
    env: "SKULK_DATA_DIR",
    schema: nonEmpty,
    default: () => `${Deno.env.get("HOME") ?? "."}/.skulk`,
    description: "identity key, database, `cluster.json`, models",
    defaultText: "`~/.skulk`",
  }),
  modelsDir: setting({
    key: "node.models_dir",
    flag: "modelsDir",
    env: "SKULK_MODELS_DIR",
    schema: nonEmpty.nullable(),
    default: null,
    description: "where model files are stored",
    defaultText: "`<data-dir>/models`",
  }),
  friendlyName: setting({
    key: "node.friendly_name",
    flag: "friendlyName",
    env: "SKULK_FRIENDLY_NAME",
    schema: nonEmpty.max(64, "must be at most 64 characters"),
    default: () => Deno.hostname(),
    description: "name shown for this node",
    defaultText: "the hostname",
  }),
  /** Lend at most this much: the node reports no more available RAM than this (pooling, tests). */
  memoryLimit: setting({
    key: "node.memory_limit",
    env: "SKULK_MEMORY_LIMIT",
    schema: byteSize.nullable(),
    default: null,
    description: "report at most this much available memory (`512MiB`, `24GB`)",
  }),
  /** Test-only routes (`POST /cluster/test_events`); the test harness sets it, nothing else should. */
  testMode: setting({
    key: "node.test_mode",
    env: "SKULK_TEST_MODE",
    schema: bool,
    default: false,
    description: "serve test-only routes (`POST /cluster/test_events`); the test harness sets it",
  }),
  worker: setting({
    key: "node.worker",
    flag: "worker",
    env: "SKULK_WORKER",
    schema: bool,
    default: true,
    description: "run models on this node",
    flagText: "`--no-worker`",
  }),
  namespace: setting({
    key: "cluster.namespace",
    flag: "namespace",
    env: "SKULK_NAMESPACE",
    schema: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, "must be 1-64 letters, digits, '.', '_' or '-'"),
    default: "default",
    description: "nodes join only their own namespace",
  }),
  peers: setting({
    key: "cluster.peers",
    flag: "peer",
    env: "SKULK_PEERS",
    schema: peerList,
    default: [] as string[],
    description: "static peers' API addresses, `host:port`",
    flagText: "`--peer` (repeatable)",
  }),
  forceMaster: setting({
    key: "cluster.force_master",
    flag: "forceMaster",
    env: "SKULK_FORCE_MASTER",
    schema: bool,
    default: false,
    description: "always win the master election",
  }),
  clusterSecret: setting({
    key: "cluster.secret",
    env: "SKULK_CLUSTER_SECRET",
    secret: true,
    schema: z.string().min(8, "must be at least 8 characters").nullable(),
    default: null,
    description:
      "secret, 8+ characters (32+ to print a join token): the cluster key; wins over a stored or joined one",
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
    description:
      "secret: a token from `skulk cluster token`; keeps its secret in the data dir, uses its namespace, adds its node as a peer",
  }),
  mdns: setting({
    key: "cluster.mdns",
    flag: "mdns",
    env: "SKULK_MDNS",
    schema: bool,
    default: true,
    description: "discover and announce peers by mDNS",
    flagText: "`--no-mdns`",
  }),
  /** Cluster-wide: every node judges a silent node dead after the same time. */
  nodeTimeout: setting({
    scope: "cluster",
    key: "cluster.node_timeout_seconds",
    env: "SKULK_NODE_TIMEOUT",
    schema: seconds,
    default: 30,
    description: "a node silent this long is timed out by the master",
  }),
  /**
   * How long the master waits for a majority to hold an event before answering a retryable 503.
   * Cluster-wide: whichever node is master waits the same, across failovers.
   */
  commitTimeout: setting({
    scope: "cluster",
    key: "cluster.commit_timeout_seconds",
    env: "SKULK_COMMIT_TIMEOUT",
    schema: seconds,
    default: 3,
    description: "how long the master waits for a majority to hold an event before answering a retryable 503",
  }),
  /**
   * Healing's first wait after finding no place for a lost instance; it doubles each attempt (5 attempts).
   * It also spaces the relaunches of a failed single-node engine on its node (this, then twice this).
   * Cluster-wide: whichever node is master heals with the same backoff, across failovers.
   */
  healRetryBase: setting({
    scope: "cluster",
    key: "cluster.heal_retry_seconds",
    env: "SKULK_HEAL_RETRY",
    schema: seconds,
    default: 5,
    description:
      "healing's first wait after finding no place for a lost instance; it doubles each attempt (5 attempts); " +
      "also the wait before relaunching a failed engine on its node (then twice it)",
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
    description: "a forwarded request's node must answer it, or a liveness probe, within this long, else 503",
  }),
  /**
   * After that, the longest the other node may stay silent (no byte of the answer, no answer to a probe
   * sent every second of silence) before the forward fails with a 503 naming it. Not a first-byte
   * deadline: a node that keeps answering probes is working (a long prefill, a non-streamed generation).
   * 6 s: a live node answers a probe in milliseconds even when busy, and a client must not wait past 10 s
   * on a node cut off mid-stream (the chaos suite's partition scenarios measured one such 15 s wait).
   */
  forwardSilenceTimeout: setting({
    key: "cluster.forward_silence_timeout_seconds",
    env: "SKULK_FORWARD_SILENCE_TIMEOUT",
    schema: seconds,
    default: 6,
    description:
      "then the longest it may send nothing and answer no probe before the forward fails (not a first-byte deadline)",
  }),
  /** How engines are tied to the daemon's life (src/engines/lifeline.ts). */
  engineLifeline: setting({
    key: "node.engine_lifeline",
    env: "SKULK_ENGINE_LIFELINE",
    schema: LifelineModeSchema,
    default: "auto" as const,
    description:
      "how engines die with the daemon: `pdeathsig` (setpriv), `supervise` (a watchdog), `auto`, `off`",
  }),
  logLevel: setting({
    key: "logging.level",
    flag: "logLevel",
    env: "SKULK_LOG_LEVEL",
    schema: LogLevelSchema,
    default: "info" as const,
    description: "trace, debug, info, warning, error",
  }),
  logFormat: setting({
    key: "logging.format",
    flag: "logFormat",
    env: "SKULK_LOG_FORMAT",
    schema: LogFormatSchema,
    default: "auto" as const,
    description: "auto, json, pretty",
  }),
  telemetryHistoryInterval: setting({
    key: "telemetry.history_interval_seconds",
    env: "SKULK_TELEMETRY_HISTORY_INTERVAL",
    schema: z.coerce.number().min(0, "must be 0 (off) or a number of seconds"),
    default: 60,
    description: "telemetry history sampling (0: off)",
  }),
  telemetryHistoryRetention: setting({
    key: "telemetry.history_retention_hours",
    env: "SKULK_TELEMETRY_HISTORY_RETENTION_HOURS",
    schema: z.coerce.number().positive("must be a positive number of hours"),
    default: 168,
    description: "how long telemetry history is kept",
  }),
  /** Upstream's SKULK_TRACING_ENABLED: the tracing state a master started with it sets for the cluster. */
  tracingEnabled: setting({
    key: "tracing.enabled",
    env: "SKULK_TRACING_ENABLED",
    schema: bool.nullable(),
    default: null,
    description:
      "a node that leads within a minute of its start sets cluster tracing on or off (unset: as the cluster has it; `PUT /v1/tracing` changes it later)",
  }),
  tracingRetentionDays: setting({
    key: "tracing.retention_days",
    env: "SKULK_TRACING_RETENTION_DAYS",
    schema: z.coerce.number().finite("must be a number of days"),
    default: 3,
    description: "traces older than this many days are deleted (0 or less: kept)",
  }),
  /** The realtime route's turn detector when a session names none (`turn_detection.detector`). */
  speechVad: setting({
    key: "speech.vad",
    env: "SKULK_SPEECH_VAD",
    schema: DetectorSchema,
    default: "energy" as const,
    description: "realtime turn detector when a session names none",
  }),
  /** Cluster-wide: the cluster places one default model, not one per node. */
  defaultModel: setting({
    scope: "cluster",
    key: "inference.default_model",
    flag: "defaultModel",
    env: "SKULK_DEFAULT_MODEL",
    schema: nonEmpty.nullable(),
    default: null,
    description: "place this model (an id, or a local .gguf file) at start unless placed",
  }),
  // Below: engines, speech, downloads and the hub, read by the parts that use them from the resolved Config.
  /** The config file itself: a flag and a variable only (skulk.yaml cannot name another skulk.yaml). */
  configFile: setting({
    key: "config",
    flag: "config",
    env: "SKULK_CONFIG",
    fileless: true,
    schema: nonEmpty,
    default: "skulk.yaml",
    defaultText: "`./skulk.yaml`",
    description: "the skulk.yaml to read (a missing default file is no error; a missing named one is)",
  }),
  /** Under a supervisor (systemd, launchd) a restart exits for it to start the node again. */
  supervised: setting({
    key: "node.supervised",
    env: "SKULK_SUPERVISED",
    schema: bool,
    default: false,
    description: "a supervisor restarts the node: `POST /restart` exits with code 75 instead of re-executing",
  }),
  cacheDir: setting({
    key: "engines.cache_dir",
    env: "SKULK_CACHE_DIR",
    schema: nonEmpty,
    default: (env: Env) => `${env.XDG_CACHE_HOME ?? `${env.HOME ?? "."}/.cache`}/skulk`,
    defaultText: "`$XDG_CACHE_HOME/skulk`, else `~/.cache/skulk`",
    description: "engine builds (`skulk engine build`), the llama.cpp source and the Silero VAD model",
  }),
  llamaServerBin: setting({
    key: "engines.llama_server_bin",
    env: "SKULK_LLAMA_SERVER_BIN",
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "`llama-server` on PATH, else the newest build in the cache dir",
    description: "the llama-server binary to run",
  }),
  rpcServerBin: setting({
    key: "engines.rpc_server_bin",
    env: "SKULK_RPC_SERVER_BIN",
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "`ggml-rpc-server` next to llama-server",
    description: "the ggml-rpc-server binary a pool's donors run",
  }),
  whisperServerBin: setting({
    key: "engines.whisper_server_bin",
    env: "SKULK_WHISPER_SERVER_BIN",
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "`whisper-server` on PATH, else the newest build in the cache dir",
    description: "the whisper.cpp whisper-server binary (speech to text)",
  }),
  espeakBin: setting({
    key: "engines.espeak_bin",
    env: "SKULK_ESPEAK_BIN",
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "`espeak-ng` on PATH",
    description: "the espeak-ng binary (text to speech)",
  }),
  sherpaOnnx: setting({
    key: "engines.sherpa_onnx",
    env: "SKULK_SHERPA_ONNX",
    schema: bool,
    default: true,
    description:
      "use sherpa-onnx (neural voices, Silero VAD) when its native build is installed; 0 turns it off",
  }),
  /** Operators keep cores for the node; onnxruntime's default here is one thread per voice. */
  sherpaThreads: setting({
    key: "engines.sherpa_threads",
    env: "SKULK_SHERPA_THREADS",
    schema: count,
    default: 1,
    description: "threads each sherpa-onnx voice computes with",
  }),
  /** Operators keep cores free for other work; llama.cpp's default is every core. */
  llamaThreads: setting({
    key: "engines.llama_threads",
    env: "SKULK_LLAMA_THREADS",
    schema: count.nullable(),
    default: null,
    defaultText: "every core",
    description: "threads each llama-server computes with (`-t`)",
  }),
  /** Off by default: n-gram drafts pay off on repetitive output (code edits, quoting) and cost a little elsewhere. */
  speculationNgram: setting({
    key: "engines.speculation_ngram",
    env: "SKULK_SPECULATION_NGRAM",
    schema: NgramMode,
    default: "off" as const,
    description:
      "n-gram speculative decoding for llama-server models whose card names no drafter: `off`, `ngram-simple`, `ngram-mod`, `ngram-map-k` or `ngram-cache`",
  }),
  sileroVadModel: setting({
    key: "speech.silero_vad_model",
    env: "SKULK_SILERO_VAD_MODEL",
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "`<cache-dir>/models/silero_vad_v5.onnx`",
    description: "the Silero VAD model file the `silero` turn detector loads (scripts/fetch-silero-vad)",
  }),
  speechMaxQueued: setting({
    key: "speech.max_queued",
    env: "SKULK_SPEECH_MAX_QUEUED",
    schema: count,
    default: 16,
    description: "speech requests waiting for one engine at once; one more is 429",
  }),
  realtimeIdleMs: setting({
    key: "speech.realtime_idle_ms",
    env: "SKULK_REALTIME_IDLE_MS",
    schema: count,
    default: 300_000,
    description:
      "a `/v1/realtime` session with no event either way for this many milliseconds is closed (4408)",
  }),
  maxOutputTokens: setting({
    key: "inference.max_output_tokens",
    env: "SKULK_MAX_OUTPUT_TOKENS",
    envAliases: ["SKULK_MAX_TOKENS"],
    schema: count,
    default: 4096,
    description:
      "`max_tokens` of a chat or completion request (or `max_output_tokens` of a Responses request) that names none",
  }),
  enableImageModels: setting({
    key: "inference.enable_image_models",
    env: "SKULK_ENABLE_IMAGE_MODELS",
    schema: bool,
    default: false,
    description: "list image-generation cards in `GET /models` (no engine here runs them yet)",
  }),
  offline: setting({
    key: "downloads.offline",
    env: "SKULK_OFFLINE",
    envAliases: ["HF_HUB_OFFLINE"],
    schema: bool,
    default: false,
    description: "never call the hub: models complete on disk are used, anything missing is an error",
  }),
  downloadHttp: setting({
    key: "downloads.http_client",
    env: "SKULK_DOWNLOAD_HTTP",
    schema: z.enum(["auto", "fetch"]),
    default: "auto" as const,
    description: "`auto`: Skulk's HTTP/1.1 client unless a proxy is set; `fetch`: always Deno's fetch",
  }),
  downloadMaxFiles: setting({
    key: "downloads.max_parallel_files",
    env: "SKULK_DOWNLOAD_MAX_FILES",
    schema: count,
    default: 8,
    description: "files of one model downloaded at once",
  }),
  downloadAttempts: setting({
    key: "downloads.attempts",
    env: "SKULK_DOWNLOAD_ATTEMPTS",
    schema: count,
    default: DEFAULT_RETRY.attempts,
    description: "tries per file before a download fails",
  }),
  downloadRetryBaseMs: setting({
    key: "downloads.retry_base_ms",
    env: "SKULK_DOWNLOAD_RETRY_BASE_MS",
    schema: count,
    default: DEFAULT_RETRY.baseMs,
    description: "the first wait before a retry, in milliseconds; it doubles each try (capped at 10 s)",
  }),
  hubEndpoint: setting({
    key: "hub.endpoint",
    env: "HF_ENDPOINT",
    schema: z.string().trim().url("must be a URL (http://host[:port])").transform((u) =>
      u.replace(/\/+$/, "")
    ),
    default: "https://huggingface.co",
    description: "the Hugging Face hub (or a mirror) models are downloaded from",
  }),
  hfToken: setting({
    key: "hf_token",
    env: "HF_TOKEN",
    envAliases: ["HUGGING_FACE_HUB_TOKEN"],
    secret: true,
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "the token in `<hf-home>/token`",
    description: "secret: the hub token for gated or private repos; never sent to another node",
  }),
  hfHome: setting({
    key: "hub.home",
    env: "HF_HOME",
    schema: nonEmpty,
    default: (env: Env) => `${env.HOME ?? "."}/.cache/huggingface`,
    defaultText: "`~/.cache/huggingface`",
    description: "huggingface_hub's home, where `huggingface-cli login` keeps the token",
  }),
  responsesStoreMax: setting({
    key: "inference.responses_store_max",
    env: "SKULK_RESPONSES_STORE_MAX",
    schema: count,
    default: 1000,
    description:
      "Responses kept in memory for `previous_response_id` on the node that generated them; the oldest goes first",
  }),
  responsesStoreBytes: setting({
    key: "inference.responses_store_bytes",
    env: "SKULK_RESPONSES_STORE_BYTES",
    schema: byteSize,
    default: 64 * 1024 * 1024,
    defaultText: "64 MiB",
    description: "bytes of kept Responses conversations (as JSON) at most; the oldest go first",
  }),
  responsesStoreTtl: setting({
    key: "inference.responses_store_ttl_seconds",
    env: "SKULK_RESPONSES_STORE_TTL_SECONDS",
    schema: seconds,
    default: 3600,
    description: "how long a kept Response can be continued through `previous_response_id`",
  }),
  vocabDir: setting({
    key: "dev.vocab_dir",
    env: "SKULK_VOCAB_DIR",
    schema: nonEmpty.nullable(),
    default: null,
    defaultText: "`<cache-dir>/src/llama.cpp-*/models`",
    description: "where `skulk dev make-model` finds llama.cpp's `ggml-vocab-*.gguf` files",
  }),
  // Diagnostics and log outputs (docs/observability.md).
  flightRecorderSize: setting({
    key: "diagnostics.flight_recorder_size",
    env: "SKULK_FLIGHT_RECORDER_SIZE",
    schema: count.max(100_000, "must be at most 100000"),
    default: 2000,
    description: "control and runner events this node's flight recorder keeps (the timeline's ring)",
  }),
  logFile: setting({
    key: "logging.file",
    env: "SKULK_LOG_FILE",
    schema: bool,
    default: true,
    description: "also write JSON log lines to `<data-dir>/logs/skulk.log`, rotated by size",
  }),
  logFileMaxBytes: setting({
    key: "logging.file_max_bytes",
    env: "SKULK_LOG_FILE_MAX_BYTES",
    schema: byteSize,
    default: 10 * 1024 * 1024,
    defaultText: "10 MiB",
    description: "the log file is rotated when a line would take it past this size",
  }),
  logFileCount: setting({
    key: "logging.file_count",
    env: "SKULK_LOG_FILE_COUNT",
    schema: count.min(2, "must be at least 2 (the file and one rotated)"),
    default: 5,
    description: "log files kept in all: `skulk.log` and its rotations `skulk.log.1` (newest) onwards",
  }),
  logIngestUrl: setting({
    key: "logging.ingest_url",
    env: "SKULK_LOGGING_INGEST_URL",
    schema: z.string().trim().refine((u) => {
      // One check, so a value that is no URL at all never reaches `new URL` twice (it throws).
      const url = URL.parse(u);
      return url !== null && /^https?:$/.test(url.protocol) && !url.username && !url.password;
    }, "must be an http(s) URL without credentials (put a token in logging.ingest_token)").nullable(),
    default: null,
    description:
      "ship log lines to this log store: VictoriaLogs `http://host:9428` (or its full `/insert/jsonline?...` URL), or Loki's base URL",
  }),
  logIngestFormat: setting({
    key: "logging.ingest_format",
    env: "SKULK_LOGGING_INGEST_FORMAT",
    schema: IngestFormatSchema,
    default: "victorialogs" as const,
    description: "`victorialogs` (JSON lines to `/insert/jsonline`) or `loki` (`/loki/api/v1/push`)",
  }),
  logIngestToken: setting({
    key: "logging.ingest_token",
    env: "SKULK_LOGGING_INGEST_TOKEN",
    secret: true,
    schema: nonEmpty.nullable(),
    default: null,
    description: "secret: sent to the log store as `Authorization: Bearer`; never logged or shown",
  }),
  logIngestBuffer: setting({
    key: "logging.ingest_buffer_lines",
    env: "SKULK_LOGGING_INGEST_BUFFER",
    schema: count,
    default: 10_000,
    description: "lines held while the log store is slow or down; past it the oldest are dropped and counted",
  }),
  logIngestBatch: setting({
    key: "logging.ingest_batch_lines",
    env: "SKULK_LOGGING_INGEST_BATCH",
    schema: count,
    default: 500,
    description: "lines per request to the log store",
  }),
  logIngestIntervalMs: setting({
    key: "logging.ingest_interval_ms",
    env: "SKULK_LOGGING_INGEST_INTERVAL_MS",
    schema: count,
    default: 1000,
    description: "a partial batch is sent after this many milliseconds",
  }),
  extensions: setting({
    key: "extensions.modules",
    env: "SKULK_EXTENSIONS",
    schema: z.union([z.array(nonEmpty), z.string()])
      .transform((v) => (typeof v === "string" ? v.split(",") : v).map((s) => s.trim()).filter(Boolean)),
    default: [] as string[],
    defaultText: "none",
    description:
      "extensions loaded at start, in order: file paths, file:/http(s) URLs or npm: specifiers (comma-separated in the variable; docs/extensions.md)",
  }),
  extensionsConfig: setting({
    key: "extensions.config",
    schema: z.record(z.string(), z.record(z.string(), z.unknown())),
    default: {} as Record<string, Record<string, unknown>>,
    defaultText: "none",
    description:
      "each extension's own settings, a mapping under its name (the extension reads it as `ctx.config`)",
  }),
  extensionsDisable: setting({
    key: "extensions.disable",
    env: "SKULK_EXTENSIONS_DISABLE",
    schema: bool,
    default: false,
    description: "`1`: load no extension at all, whatever `extensions.modules` names",
  }),
  extensionsRequestBudgetMs: setting({
    key: "extensions.request_budget_ms",
    env: "SKULK_EXTENSIONS_REQUEST_BUDGET_MS",
    schema: count,
    default: 2000,
    description:
      "how long one extension's onChatRequest may take; past it the request goes on without that extension's change",
  }),
  extensionsHookBudgetMs: setting({
    key: "extensions.hook_budget_ms",
    env: "SKULK_EXTENSIONS_HOOK_BUDGET_MS",
    schema: count,
    default: 10_000,
    description: "how long an extension's setup, onChatResponse or teardown may take before it is abandoned",
  }),
  /** Requests one llama-server runs at once; admission and the router count against it. */
  llamaParallel: setting({
    key: "engines.llama_parallel",
    env: "SKULK_LLAMA_PARALLEL",
    schema: count,
    default: 4,
    description: "requests each llama-server runs at once (`-np`, its slots; they share its context window)",
  }),
  /** Past an instance's slots, this many wait; one more is a 429 (serving/admission.ts). */
  queueDepth: setting({
    key: "inference.queue_depth",
    env: "SKULK_QUEUE_DEPTH",
    schema: z.coerce.number().int("must be a whole number").min(0, "must be 0 or more"),
    default: 16,
    description:
      "requests that may wait for a busy instance beyond its engine's slots (`x-skulk-queue-ms` says how long they waited); one more is 429",
  }),
  prefixAffinity: setting({
    key: "inference.prefix_affinity",
    env: "SKULK_PREFIX_AFFINITY",
    schema: bool,
    default: true,
    description:
      "send a prompt sharing a long prefix with a recent one to the instance that served it (its KV cache holds it), unless that instance is overloaded",
  }),
} as const;

type Settings = typeof SETTINGS;
export type Config = { -readonly [K in keyof Settings]: Settings[K] extends Setting<infer T> ? T : never };
