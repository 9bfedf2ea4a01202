/**
 * The cluster as the planner sees it: per node, usable accelerator memory (discrete, unified or system),
 * computes, RPC ability, addresses and liveness, built from replicated state plus telemetry at `now`.
 */
import type { DownloadProgress } from "../cluster/downloads.ts";
import { downloadModelId } from "../cluster/downloads.ts";
import { type Instance, instanceBody, type RunnerStatus } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { TelemetryEntry } from "../cluster/telemetry.ts";
import { parseCard } from "../models/card.ts";
import type { NodeReading } from "../telemetry/reading.ts";
import { nodeComputes } from "./capabilities.ts";
import {
  admissionTokens,
  GPU_VRAM_WORKING_SET_FRACTION,
  GPU_WORKING_SET_FRACTION,
  shardFootprint,
  UMA_GPU_OS_HEADROOM,
} from "./estimate.ts";

export type InterfaceType = "thunderbolt" | "maybe_ethernet" | "ethernet" | "wifi" | "unknown" | "vpn";
/** Upstream's ring priority: lower is a faster, more direct link. */
export const LINK_RANK: Record<InterfaceType, number> = {
  thunderbolt: 0,
  maybe_ethernet: 1,
  ethernet: 2,
  wifi: 3,
  unknown: 4,
  vpn: 5,
};

export interface NodeView {
  nodeId: string;
  name: string;
  /** Heard from within the node timeout. */
  reachable: boolean;
  /** Takes part in serving (a worker). */
  worker: boolean;
  /** Memory known (a reading with `memory` arrived). */
  hasMemory: boolean;
  ramTotal: number;
  ramAvailable: number;
  /** Bytes usable for weights and KV before reservations (§4.2). */
  usable: number;
  memoryKind: "discrete" | "unified" | "system";
  /** Bytes promised to instances placed here whose engines have not loaded yet (telemetry cannot show them). */
  reserved: number;
  /** Computes the node's llama.cpp build offers (`cpu`, `cuda`, ...); assumed `cpu` when the engine is unreported. */
  computes: string[];
  engineKnown: boolean;
  /** Every backend tag the node advertises (llama.cpp's and the speech engines': `whisper_cpp`, `espeak_ng`). */
  backends?: string[];
  /** ggml-rpc protocol the node's build speaks; null: cannot take part in a pool. */
  rpcProtocol: string | null;
  /** Routable IPv4 addresses, best link first. */
  addresses: { ip: string; type: InterfaceType }[];
}

export interface ClusterView {
  /** Sorted by node id, so every decision over it is deterministic. */
  nodes: NodeView[];
  /** nodeId -> modelId -> fraction of the model's files on disk (Completed 1, Failed 0). */
  downloads: Record<string, Record<string, number>>;
  /** Listener ports held by live instances (RPC donors, rings). */
  portsInUse: number[];
  /** nodeId -> ids of the models an instance already runs on it (a replica prefers other nodes). */
  serving?: Record<string, string[]>;
}

export function available(n: NodeView): number {
  return Math.max(0, n.usable - n.reserved);
}

function isRoutableIpv4(ip: string): boolean {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ip);
  if (!m) return false;
  const [a, b] = [Number(m[1]), Number(m[2])];
  return !(a === 127 || a === 0 || (a === 169 && b === 254));
}

function isVpnAddress(ip: string): boolean {
  const m = /^100\.(\d+)\./.exec(ip);
  return m !== null && Number(m[1]) >= 64 && Number(m[1]) <= 127;
}

/** Usable memory (§4.2): accelerator VRAM when the build can use the GPU, UMA spill for APUs, else capped RAM. */
export function usableMemory(
  reading: NodeReading,
  computes: string[],
): { usable: number; kind: NodeView["memoryKind"] } {
  const ramTotal = reading.memory?.ramTotal.inBytes ?? 0;
  const ramAvailable = reading.memory?.ramAvailable.inBytes ?? 0;
  const system = Math.max(0, Math.min(ramAvailable, GPU_WORKING_SET_FRACTION * ramTotal));
  const accs = reading.system?.accelerators ?? [];
  const gpuCompute = computes.some((c) => c !== "cpu");
  if (!gpuCompute) return { usable: system, kind: "system" };
  // Apple: the GPU shares RAM under Metal's working-set cap.
  if (accs.some((a) => a.unifiedMemory && a.vendor.toLowerCase() === "apple")) {
    return { usable: system, kind: "unified" };
  }
  let usable = 0;
  let unified = false;
  for (const a of accs) {
    const total = a.vramTotalBytes ?? 0;
    if (total <= 0) continue;
    usable += Math.max(0, Math.min(total - (a.vramUsedBytes ?? 0), GPU_VRAM_WORKING_SET_FRACTION * total));
    const gtt = a.gttTotalBytes ?? 0;
    // A UMA APU (Strix Halo): the GPU also maps system RAM through GTT, minus what the OS keeps.
    if (a.unifiedMemory || (gtt > total && gtt >= ramTotal && ramTotal > 0)) {
      unified = true;
      usable += Math.min(Math.max(0, ramAvailable - UMA_GPU_OS_HEADROOM), gtt || ramAvailable);
    }
  }
  if (usable === 0) return { usable: system, kind: "system" };
  return { usable, kind: unified ? "unified" : "discrete" };
}

function downloadFraction(p: DownloadProgress): number {
  if ("DownloadCompleted" in p) return 1;
  if ("DownloadFailed" in p) return 0;
  if ("DownloadPending" in p) {
    const t = p.DownloadPending.total.inBytes;
    return t > 0 ? p.DownloadPending.downloaded.inBytes / t : 0;
  }
  const d = p.DownloadOngoing.downloadProgress;
  return d.total.inBytes > 0 ? d.downloaded.inBytes / d.total.inBytes : 0;
}

const LOADED: ReadonlySet<string> = new Set(["RunnerReady", "RunnerRunning"]);

/**
 * Memory an instance holds on each of its nodes, split by whether its engine has loaded there: telemetry
 * shows a loaded engine's memory (so only `pending` is reserved), except under a memory limit (see
 * buildClusterView). Donors and driver are charged their share of the weights; layers tell the share.
 */
function footprints(
  instance: Instance,
  runners: Record<string, RunnerStatus>,
): Map<string, { bytes: number; loaded: boolean }> {
  const body = instanceBody(instance);
  const out = new Map<string, { bytes: number; loaded: boolean }>();
  const nodes = Object.entries(body.shardAssignments.nodeToRunner);
  for (const [nodeId, runnerId] of nodes) {
    const status = runners[runnerId];
    // A failed runner's engine has exited and holds nothing (healing may relaunch it beside its record).
    if (status && "RunnerFailed" in status) continue;
    const shard = Object.values(body.shardAssignments.runnerToShard[runnerId] ?? {})[0];
    if (!shard) continue;
    let card;
    try {
      card = parseCard(shard.modelCard);
    } catch {
      continue; // a card this build cannot read: nothing to reserve against
    }
    const storage = card.storage_size?.in_bytes ?? 0;
    const fraction = nodes.length > 1
      ? 1 / nodes.length
      : (shard.endLayer - shard.startLayer) / shard.nLayers;
    const tokens = body.contextTokenLimit ?? admissionTokens(card);
    out.set(nodeId, {
      bytes: shardFootprint(card, storage, fraction, tokens),
      loaded: Boolean(status && LOADED.has(Object.keys(status)[0])),
    });
  }
  return out;
}

function listenerPorts(instance: Instance): number[] {
  const body = instanceBody(instance) as Record<string, unknown>;
  const ports: number[] = [];
  if (typeof body.ephemeralPort === "number" && body.ephemeralPort > 0) ports.push(body.ephemeralPort);
  for (const ep of Object.values((body.donorEndpoints ?? {}) as Record<string, string>)) {
    const p = Number(ep.split(":").at(-1));
    if (Number.isInteger(p)) ports.push(p);
  }
  return ports;
}

export interface ViewOptions {
  /** A node unheard for longer than this is unreachable. */
  nodeTimeoutMs: number;
}

/** Builds the planner's view: pure in (state, telemetry entries, now). */
export function buildClusterView(
  state: ClusterState,
  telemetry: [string, TelemetryEntry][],
  now: number,
  opts: ViewOptions,
): ClusterView {
  const reserved = new Map<string, number>();
  const lent = new Map<string, number>();
  const portsInUse: number[] = [];
  const serving: Record<string, string[]> = {};
  for (const inst of Object.values(state.instances)) {
    const { modelId, nodeToRunner } = instanceBody(inst).shardAssignments;
    for (const node of Object.keys(nodeToRunner)) (serving[node] ??= []).push(modelId);
    for (const [node, { bytes, loaded }] of footprints(inst, state.runners)) {
      const into = loaded ? lent : reserved;
      into.set(node, (into.get(node) ?? 0) + bytes);
    }
    portsInUse.push(...listenerPorts(inst));
  }
  const nodes: NodeView[] = telemetry.map(([nodeId, entry]) => {
    const r = entry.reading;
    const computes = nodeComputes(r.engine?.backends);
    const { usable: measured, kind } = usableMemory(r, computes);
    // A node lending at most `memoryLimit` reports RAM capped at it, which stays flat while its engines
    // load: what they hold is taken from the limit here, so a second model is never booked onto it.
    const usable = r.memoryLimit !== undefined && kind !== "discrete"
      ? Math.max(0, Math.min(measured, r.memoryLimit - (lent.get(nodeId) ?? 0)))
      : measured;
    const addresses = (r.network?.interfaces ?? [])
      .filter((i) => isRoutableIpv4(i.ipAddress))
      .map((i) => ({ ip: i.ipAddress, type: isVpnAddress(i.ipAddress) ? "vpn" as const : i.interfaceType }))
      .sort((a, b) => LINK_RANK[a.type] - LINK_RANK[b.type] || a.ip.localeCompare(b.ip));
    return {
      nodeId,
      name: r.identity.friendlyName || nodeId.slice(0, 8),
      reachable: now - entry.receivedAt <= opts.nodeTimeoutMs,
      worker: r.worker,
      hasMemory: r.memory !== null,
      ramTotal: r.memory?.ramTotal.inBytes ?? 0,
      ramAvailable: r.memory?.ramAvailable.inBytes ?? 0,
      usable,
      memoryKind: kind,
      reserved: reserved.get(nodeId) ?? 0,
      computes,
      engineKnown: r.engine !== null,
      backends: r.engine?.backends ?? [],
      rpcProtocol: r.engine?.rpcProtocol ?? null,
      addresses,
    };
  }).sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  const downloads: ClusterView["downloads"] = {};
  for (const [nodeId, list] of Object.entries(state.downloads)) {
    downloads[nodeId] = {};
    for (const p of list) downloads[nodeId][downloadModelId(p)] = downloadFraction(p);
  }
  return { nodes, downloads, portsInUse: [...new Set(portsInUse)].sort((a, b) => a - b), serving };
}
