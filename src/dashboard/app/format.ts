/**
 * Pure formatting and reading of upstream wire values for the dashboard: bytes, rates, durations,
 * runner and download states. No DOM here, so the rules are unit-tested directly.
 */
import type { DownloadProgress } from "../../cluster/downloads.ts";
import type { Instance, RunnerStatus } from "../../cluster/instances.ts";
import { instanceName } from "../../engines/instance-name.ts";

const UNITS = ["B", "KB", "MB", "GB", "TB"];

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "—";
  let v = Math.max(0, n);
  let u = 0;
  while (v >= 1000 && u < UNITS.length - 1) {
    v /= 1000;
    u++;
  }
  return `${v >= 100 || u === 0 ? Math.round(v) : v.toFixed(1)} ${UNITS[u]}`;
}

export function rate(bytesPerSecond: number): string {
  return `${bytes(bytesPerSecond)}/s`;
}

export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "—";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function percent(ratio: number | null | undefined): string {
  return ratio === null || ratio === undefined ? "—" : `${Math.round(ratio * 100)}%`;
}

/** The tag of a tagged value (`{"RunnerReady": {}}` -> "RunnerReady"). */
export function tag(value: object): string {
  return Object.keys(value)[0] ?? "";
}

export type Tone = "ok" | "busy" | "warn" | "error" | "idle";

/** A runner status in words, with how it should look. */
export function runnerState(
  status: RunnerStatus | undefined,
): { label: string; tone: Tone; detail?: string } {
  if (!status) return { label: "waiting", tone: "idle" };
  const t = tag(status);
  const body = (status as Record<string, Record<string, unknown>>)[t];
  switch (t) {
    case "RunnerReady":
      return { label: "ready", tone: "ok" };
    case "RunnerRunning":
      return { label: "generating", tone: "ok" };
    case "RunnerLoading": {
      const { layersLoaded, totalLayers } = body as { layersLoaded: number; totalLayers: number };
      return {
        label: "loading",
        tone: "busy",
        detail: totalLayers ? `${layersLoaded}/${totalLayers} layers` : undefined,
      };
    }
    case "RunnerFailed":
      return { label: "failed", tone: "error", detail: (body.errorMessage as string | null) ?? undefined };
    case "RunnerShuttingDown":
      return { label: "shutting down", tone: "warn" };
    case "RunnerShutdown":
      return { label: "stopped", tone: "idle" };
    default:
      return {
        label: t.replace(/^Runner/, "").replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase(),
        tone: "busy",
      };
  }
}

export interface InstanceView {
  id: string;
  /** What runs it, as users read it ("llama.cpp RPC pool of 3 nodes"); the wire tag stays on the wire. */
  kind: string;
  modelId: string;
  contextTokenLimit: number | null;
  /** What a speech card serves ("tts" speaks, "stt" transcribes); null for chat and embedding models. */
  speech: SpeechKind;
  /** One row per node: which runner serves which layers there. */
  shards: { nodeId: string; runnerId: string; layers: string; status: RunnerStatus | undefined }[];
}

export type SpeechKind = "tts" | "stt" | null;
type WireCard = { tasks?: string[]; audio?: { kind?: string } };

/** The card's speech role, read as src/models/capabilities.ts resolves it (audio.kind, else its tasks). */
export function speechKind(wire: unknown): SpeechKind {
  const card = (wire ?? {}) as WireCard;
  if (card.audio?.kind === "tts" || card.tasks?.includes("TextToSpeech")) return "tts";
  if (card.audio?.kind === "stt" || card.tasks?.includes("SpeechToText")) return "stt";
  return null;
}

export function instanceView(
  id: string,
  instance: Instance,
  runners: Record<string, RunnerStatus>,
): InstanceView {
  const kind = tag(instance);
  const body = (instance as Record<
    string,
    {
      shardAssignments: {
        modelId: string;
        nodeToRunner: Record<string, string>;
        runnerToShard: Record<string, object>;
      };
      contextTokenLimit: number | null;
    }
  >)[kind];
  const sa = body.shardAssignments;
  const first = Object.values(sa.runnerToShard)[0];
  return {
    id,
    kind: instanceName(instance),
    modelId: sa.modelId,
    contextTokenLimit: body.contextTokenLimit ?? null,
    speech: first
      ? speechKind((first as Record<string, { modelCard?: unknown }>)[tag(first)]?.modelCard)
      : null,
    shards: Object.entries(sa.nodeToRunner).map(([nodeId, runnerId]) => {
      const shard = sa.runnerToShard[runnerId];
      const inner = shard
        ? (shard as Record<string, { startLayer: number; endLayer: number; nLayers: number }>)[tag(shard)]
        : undefined;
      return {
        nodeId,
        runnerId,
        layers: inner ? `layers ${inner.startLayer}–${inner.endLayer} of ${inner.nLayers}` : "",
        status: runners[runnerId],
      };
    }),
  };
}

/** Whether an instance can take requests now (every runner ready or busy generating). */
export function instanceReady(v: InstanceView): boolean {
  return v.shards.length > 0 &&
    v.shards.every((s) => ["RunnerReady", "RunnerRunning"].includes(s.status ? tag(s.status) : ""));
}

export interface DownloadView {
  nodeId: string;
  modelId: string;
  state: "pending" | "downloading" | "complete" | "failed";
  ratio: number;
  downloaded: number;
  total: number;
  speed: number;
  etaMs: number;
  error?: string;
}

export function downloadView(p: DownloadProgress): DownloadView {
  const t = tag(p);
  const body = (p as Record<string, Record<string, unknown>>)[t] as {
    nodeId: string;
    shardMetadata: Record<string, { modelCard: { modelId: string } }>;
    total?: { inBytes: number };
    downloaded?: { inBytes: number };
    errorMessage?: string;
    downloadProgress?: {
      total: { inBytes: number };
      downloaded: { inBytes: number };
      speed: number;
      etaMs: number;
    };
  };
  const modelId = Object.values(body.shardMetadata)[0]?.modelCard.modelId ?? "?";
  const base = { nodeId: body.nodeId, modelId, speed: 0, etaMs: NaN };
  switch (t) {
    case "DownloadOngoing": {
      const d = body.downloadProgress!;
      const total = d.total.inBytes;
      return {
        ...base,
        state: "downloading",
        downloaded: d.downloaded.inBytes,
        total,
        ratio: total ? d.downloaded.inBytes / total : 0,
        speed: d.speed,
        etaMs: d.etaMs,
      };
    }
    case "DownloadCompleted":
      return {
        ...base,
        state: "complete",
        downloaded: body.total?.inBytes ?? 0,
        total: body.total?.inBytes ?? 0,
        ratio: 1,
      };
    case "DownloadFailed":
      return { ...base, state: "failed", downloaded: 0, total: 0, ratio: 0, error: body.errorMessage };
    default: {
      const total = body.total?.inBytes ?? 0;
      const done = body.downloaded?.inBytes ?? 0;
      return { ...base, state: "pending", downloaded: done, total, ratio: total ? done / total : 0 };
    }
  }
}

/**
 * A download's bar text: bytes of total, speed and time left. A pending download of a card whose size is open knows
 * no total yet: it reads "size unknown", never "0 B / 0 B".
 */
export function downloadText(d: DownloadView): string {
  if (!(d.total > 0)) return d.downloaded > 0 ? `${bytes(d.downloaded)} of an unknown size` : "size unknown";
  return `${bytes(d.downloaded)} / ${bytes(d.total)}${
    d.speed ? ` · ${rate(d.speed)} · ${duration(d.etaMs)} left` : ""
  }`;
}

export type SizeBucket = "tiny" | "small" | "medium" | "large" | "huge";
export const SIZE_BUCKETS: { id: SizeBucket; label: string; max: number }[] = [
  { id: "tiny", label: "under 1 GB", max: 1e9 },
  { id: "small", label: "1–4 GB", max: 4e9 },
  { id: "medium", label: "4–16 GB", max: 16e9 },
  { id: "large", label: "16–64 GB", max: 64e9 },
  { id: "huge", label: "over 64 GB", max: Infinity },
];

export function sizeBucket(sizeBytes: number): SizeBucket {
  return SIZE_BUCKETS.find((b) => sizeBytes < b.max)!.id;
}

/**
 * Requests running per instance, from the tasks every node reports in `/state` (`{taskId: {Kind:
 * {instanceId}}}`): how the router spread a model's load over its instances.
 */
export function runningByInstance(tasks: Record<string, Record<string, unknown>>): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of Object.values(tasks)) {
    const id = (Object.values(t)[0] as { instanceId?: unknown } | undefined)?.instanceId;
    if (typeof id === "string") out.set(id, (out.get(id) ?? 0) + 1);
  }
  return out;
}
