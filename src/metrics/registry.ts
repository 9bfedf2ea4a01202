/**
 * This node's Prometheus registry (prom-client): the counters and histograms the API and the planes record
 * through narrow functions, and the gauges read from a `GaugeSource` when Prometheus scrapes.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Accelerator } from "../telemetry/reading.ts";
import type { Increment } from "./events.ts";
import { BoundedLabel, codeLabel, methodLabel } from "./labels.ts";

/** Most distinct model / instance label values per node; past them requests count under `other`. */
export const MAX_MODEL_LABELS = 64;
export const MAX_INSTANCE_LABELS = 128;

/** What the gauges read at scrape time; the daemon's wiring (node.ts) supplies it. */
export interface GaugeSource {
  /** Generations running on this node's engines, one entry per request. */
  inFlight(): { instance: string }[];
  streams(): { used: number; max: number };
  realtime(): { used: number; max: number };
  /** The master's command queue here (0 on a follower, whose desk is idle). */
  commandQueue(): number;
  /** Phases of this node's runners (starting, ready, failed, stopping). */
  runnerPhases(): string[];
  memory(): { total: number; available: number } | null;
  accelerators(): Accelerator[];
  isMaster(): boolean;
  /** Requests waiting for a slot of each instance this node drives (serving/admission.ts). */
  queued?(): { instance: string; waiting: number }[];
}

/** Known ids for the bounded labels. */
export interface KnownIds {
  model(id: string): boolean;
  instance(id: string): boolean;
}

export interface RequestRecord {
  route: string;
  method: string;
  status: number;
  model?: string | null;
  instance?: string | null;
}

export interface GenerationRecord {
  model: string;
  promptTokens?: number | null;
  generatedTokens?: number | null;
  /** Seconds from the request's arrival to its first generated token. */
  ttftSeconds?: number | null;
  /** Seconds per generated token, as the engine timed its decode. */
  perTokenSeconds?: number | null;
}

/** Time to first token spans a tiny model's milliseconds to a long prompt's prefill on a large one. */
const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Per-token decode latency: ~1 ms (fast GPU, small model) to ~1 s (CPU, or a pool over a slow link). */
const TOKEN_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Admission waits: none at all for most requests, up to a long generation's length when a burst queues. */
const QUEUE_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const RUNNER_PHASES = ["starting", "ready", "failed", "stopping"] as const;

export class Metrics {
  readonly registry = new Registry();
  readonly #models = new BoundedLabel(MAX_MODEL_LABELS);
  readonly #instances = new BoundedLabel(MAX_INSTANCE_LABELS);

  readonly #requests: Counter<"route" | "method" | "code" | "model" | "instance">;
  readonly #tokens: Counter<"kind" | "model">;
  readonly #ttft: Histogram<"model">;
  readonly #perToken: Histogram<"model">;
  readonly #queueWait: Histogram<"model">;
  readonly #placements: Counter<"reason">;
  readonly #refusals: Counter<"source">;
  readonly #elections: Counter;
  readonly #engineStarts: Counter;
  readonly #engineFailures: Counter;
  readonly #peerCalls: Counter<"kind">;
  readonly #peerFailures: Counter<"kind">;
  readonly #downloadBytes: Counter;
  readonly #downloadFailures: Counter;

  constructor(readonly known: KnownIds, source: GaugeSource) {
    const registers = [this.registry];
    const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers });
    const histogram = (name: string, help: string, buckets: number[]) =>
      new Histogram<"model">({ name, help, labelNames: ["model"], buckets, registers });
    this.#requests = counter(
      "skulk_requests_total",
      "HTTP requests answered, by route pattern, method, status code, model and instance",
      ["route", "method", "code", "model", "instance"],
    );
    this.#tokens = counter(
      "skulk_tokens_total",
      "Tokens of generations this node's engines ran, as the engine counted them (kind: prompt, generated)",
      ["kind", "model"],
    );
    this.#ttft = histogram(
      "skulk_time_to_first_token_seconds",
      "Seconds from a generation's arrival to its first token (streams), or the engine's prefill time",
      TTFT_BUCKETS,
    );
    this.#perToken = histogram(
      "skulk_time_per_output_token_seconds",
      "Seconds per generated token of each generation, as the engine timed its decode",
      TOKEN_BUCKETS,
    );
    this.#queueWait = histogram(
      "skulk_queue_wait_seconds",
      "Seconds a request waited in its instance's admission queue on this node for an engine slot (inference.queue_depth)",
      QUEUE_BUCKETS,
    );
    this.#placements = counter(
      "skulk_placements_total",
      "Instances created, as this node's log applied them (reason: request, healing)",
      ["reason"],
    );
    this.#refusals = counter(
      "skulk_placement_refusals_total",
      "Placements refused: requests answered here with the planner's refusal, and healing's failures",
      ["source"],
    );
    this.#elections = counter(
      "skulk_elections_total",
      "Masters elected (MasterElected events this node's log applied)",
    );
    this.#engineStarts = counter(
      "skulk_engine_starts_total",
      "Engine launches of this node's runners (a relaunch counts again)",
    );
    this.#engineFailures = counter(
      "skulk_engine_failures_total",
      "This node's runners that failed: engine exits, wedged engines, failed starts",
    );
    this.#peerCalls = counter(
      "skulk_peer_exchanges_total",
      "Signed calls to other nodes (kind: gossip, sync, push, submit, command, other)",
      ["kind"],
    );
    this.#peerFailures = counter(
      "skulk_peer_exchange_failures_total",
      "Signed calls to other nodes that failed (unreachable, timed out, refused)",
      ["kind"],
    );
    this.#downloadBytes = counter(
      "skulk_download_bytes_total",
      "Model bytes this node downloaded, from its progress records",
    );
    this.#downloadFailures = counter("skulk_download_failures_total", "Downloads on this node that failed");
    this.#gauges(source);
  }

  #gauges(s: GaugeSource): void {
    const registers = [this.registry];
    const instances = this.#instances;
    const known = this.known;
    new Gauge({
      name: "skulk_in_flight_requests",
      help: "Generations running on this node's engines, by instance",
      labelNames: ["instance"],
      registers,
      collect() {
        this.reset();
        for (const r of s.inFlight()) this.inc({ instance: instances.of(r.instance, known.instance) });
      },
    });
    for (const [which, help] of [["used", "held"], ["max", "this node allows"]] as const) {
      new Gauge({
        name: `skulk_stream_slots_${which}`,
        help:
          `Stream slots ${help} (api.max_concurrent_streams, api.max_realtime_sessions; kind: streams, realtime)`,
        labelNames: ["kind"],
        registers,
        collect() {
          this.set({ kind: "streams" }, s.streams()[which]);
          this.set({ kind: "realtime" }, s.realtime()[which]);
        },
      });
    }
    new Gauge({
      name: "skulk_queue_depth",
      help: "Requests waiting in admission queues for an engine slot, by instance this node drives",
      labelNames: ["instance"],
      registers,
      collect() {
        this.reset();
        for (const q of s.queued?.() ?? []) {
          this.inc({ instance: instances.of(q.instance, known.instance) }, q.waiting);
        }
      },
    });
    new Gauge({
      name: "skulk_command_queue_depth",
      help: "Commands waiting for or being decided by the master's desk on this node",
      registers,
      collect() {
        this.set(s.commandQueue());
      },
    });
    new Gauge({
      name: "skulk_is_master",
      help: "1 while this node is the master backed by a majority, else 0",
      registers,
      collect() {
        this.set(s.isMaster() ? 1 : 0);
      },
    });
    new Gauge({
      name: "skulk_runners",
      help: "This node's runners by phase",
      labelNames: ["phase"],
      registers,
      collect() {
        const phases = s.runnerPhases();
        for (const p of RUNNER_PHASES) this.set({ phase: p }, phases.filter((x) => x === p).length);
      },
    });
    new Gauge({
      name: "skulk_memory_bytes",
      help: "This node's RAM from its telemetry reading (kind: total, available)",
      labelNames: ["kind"],
      registers,
      collect() {
        this.reset();
        const m = s.memory();
        if (!m) return;
        this.set({ kind: "total" }, m.total);
        this.set({ kind: "available" }, m.available);
      },
    });
    const perAccelerator = (
      name: string,
      help: string,
      pick: (a: Accelerator) => number | null,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ["index", "vendor"],
        registers,
        collect() {
          this.reset();
          s.accelerators().forEach((a, i) => {
            const v = pick(a);
            // The vendor is a collector's constant (nvidia, amd, apple, ...), not free text.
            if (v !== null && Number.isFinite(v)) this.set({ index: String(i), vendor: a.vendor }, v);
          });
        },
      });
    perAccelerator(
      "skulk_accelerator_memory_total_bytes",
      "Accelerator memory (VRAM)",
      (a) => a.vramTotalBytes,
    );
    perAccelerator(
      "skulk_accelerator_memory_used_bytes",
      "Accelerator memory in use",
      (a) => a.vramUsedBytes,
    );
    perAccelerator(
      "skulk_accelerator_utilization_ratio",
      "Accelerator busy share, 0..1",
      (a) => a.utilizationRatio,
    );
    perAccelerator("skulk_accelerator_power_watts", "Accelerator power draw", (a) => a.powerWatts);
    perAccelerator(
      "skulk_accelerator_temperature_celsius",
      "Accelerator temperature",
      (a) => a.temperatureCelsius,
    );
  }

  request(r: RequestRecord): void {
    this.#requests.inc({
      route: r.route,
      method: methodLabel(r.method),
      code: codeLabel(r.status),
      model: this.#models.of(r.model, this.known.model),
      instance: this.#instances.of(r.instance, this.known.instance),
    });
  }

  generation(g: GenerationRecord): void {
    const model = this.#models.of(g.model, this.known.model);
    const count = (kind: string, n: number | null | undefined) => {
      if (typeof n === "number" && Number.isFinite(n) && n > 0) this.#tokens.inc({ kind, model }, n);
    };
    count("prompt", g.promptTokens);
    count("generated", g.generatedTokens);
    if (typeof g.ttftSeconds === "number" && g.ttftSeconds >= 0) this.#ttft.observe({ model }, g.ttftSeconds);
    if (typeof g.perTokenSeconds === "number" && g.perTokenSeconds > 0) {
      this.#perToken.observe({ model }, g.perTokenSeconds);
    }
  }

  /** A request let through admission after `seconds` in its instance's queue. */
  queued(model: string, seconds: number): void {
    this.#queueWait.observe({ model: this.#models.of(model, this.known.model) }, seconds);
  }

  /** A placement request this node answered with the planner's refusal. */
  refused(): void {
    this.#refusals.inc({ source: "request" });
  }

  peerCall(kind: string, ok: boolean): void {
    this.#peerCalls.inc({ kind });
    if (!ok) this.#peerFailures.inc({ kind });
  }

  apply(increments: Increment[]): void {
    for (const i of increments) {
      switch (i.counter) {
        case "placements":
          this.#placements.inc(i.labels);
          break;
        case "placement_refusals":
          this.#refusals.inc(i.labels);
          break;
        case "elections":
          this.#elections.inc();
          break;
        case "engine_starts":
          this.#engineStarts.inc();
          break;
        case "engine_failures":
          this.#engineFailures.inc();
          break;
        case "download_bytes":
          this.#downloadBytes.inc(i.value);
          break;
        case "download_failures":
          this.#downloadFailures.inc();
          break;
      }
    }
  }

  /** The exposition and its content type. */
  async expose(): Promise<{ text: string; contentType: string }> {
    return { text: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}

interface EngineTimings {
  prompt_n?: number;
  prompt_ms?: number;
  prompt_per_second?: number;
  predicted_n?: number;
  predicted_per_second?: number;
}

/**
 * Pure: a generation's record from llama-server's `usage` and `timings`. Time to first token is the
 * measured one when the caller has it (a stream), else the engine's prefill time.
 */
export function generationOf(
  model: string,
  usage: unknown,
  timings: unknown,
  measuredTtft: number | null,
): GenerationRecord {
  const u = (usage && typeof usage === "object" ? usage : {}) as Record<string, unknown>;
  const t = (timings && typeof timings === "object" ? timings : {}) as EngineTimings;
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const promptPerS = num(t.prompt_per_second);
  const prefill = num(t.prompt_ms) !== null
    ? num(t.prompt_ms)! / 1000
    : promptPerS && num(t.prompt_n) !== null
    ? num(t.prompt_n)! / promptPerS
    : null;
  const decodePerS = num(t.predicted_per_second);
  return {
    model,
    promptTokens: num(u.prompt_tokens) ?? num(t.prompt_n),
    generatedTokens: num(u.completion_tokens) ?? num(t.predicted_n),
    ttftSeconds: measuredTtft ?? prefill,
    perTokenSeconds: decodePerS && decodePerS > 0 ? 1 / decodePerS : null,
  };
}
