/**
 * Synthetic clusters for placement tests and the benchmark: telemetry readings in the real NodeReading
 * schema, fed through the real view builder, with a counter id generator so plans are reproducible.
 */
import { emptyState } from "../../src/cluster/state.ts";
import type { TelemetryEntry } from "../../src/cluster/telemetry.ts";
import { buildClusterView, type ClusterView } from "../../src/placement/view.ts";
import { type NodeReading, NodeReadingSchema } from "../../src/telemetry/reading.ts";

export const GB = 1e9;
export const GiB = 1024 ** 3;
export const NOW = 1_700_000_000_000;

export interface NodeSpec {
  id: string;
  /** System RAM total and available (bytes). */
  ram: number;
  ramAvailable?: number;
  /** Discrete GPU VRAM (bytes); with `computes` including a GPU compute. */
  vram?: number;
  vramUsed?: number;
  /** A UMA APU: GTT size (bytes). */
  gtt?: number;
  unified?: boolean;
  vendor?: string;
  computes?: string[];
  rpc?: boolean;
  /** The ggml RPC protocol its build speaks (default 3.0.0). */
  rpcProtocol?: string;
  ip?: string | null;
  link?: "thunderbolt" | "ethernet" | "wifi" | "unknown" | "maybe_ethernet" | "vpn";
  worker?: boolean;
  /** Milliseconds since we last heard from it. */
  silentMs?: number;
  noMemory?: boolean;
  /** `identity.osVersion`'s system (default linux). */
  os?: string;
}

export function reading(s: NodeSpec): NodeReading {
  const accelerator = s.vram !== undefined
    ? {
      vendor: s.vendor ?? "nvidia",
      name: "gpu",
      utilizationRatio: null,
      vramTotalBytes: s.vram,
      vramUsedBytes: s.vramUsed ?? 0,
      gttTotalBytes: s.gtt ?? null,
      gttUsedBytes: null,
      powerWatts: null,
      temperatureCelsius: null,
      clockMhz: null,
      unifiedMemory: s.unified ?? false,
    }
    : null;
  return NodeReadingSchema.parse({
    nodeId: s.id,
    apiAddress: null,
    worker: s.worker ?? true,
    identity: {
      modelId: "linux-x86_64",
      chipId: "x86_64",
      friendlyName: s.id,
      osVersion: s.os ?? "linux",
      osBuildVersion: "",
      skulkVersion: "0.1.0",
      skulkCommit: "",
    },
    memory: s.noMemory ? null : {
      ramTotal: { inBytes: s.ram },
      ramAvailable: { inBytes: s.ramAvailable ?? s.ram },
      swapTotal: null,
      swapAvailable: null,
    },
    system: {
      gpuUsage: null,
      temp: null,
      sysPower: null,
      pcpuUsage: null,
      ecpuUsage: null,
      accelerator,
      accelerators: accelerator ? [accelerator] : [],
    },
    network: {
      interfaces: s.ip === null ? [] : [{
        name: "eth0",
        ipAddress: s.ip ?? `10.0.0.${Number(s.id.replace(/\D/g, "")) % 250 + 1}`,
        interfaceType: s.link ?? "ethernet",
      }],
    },
    disk: null,
    engine: {
      llamaServer: "llama-server",
      llamaCppBuild: "b0",
      rpcProtocol: s.rpc === false ? null : s.rpcProtocol ?? "3.0.0",
      backends: s.computes ?? (s.vram !== undefined ? ["cuda", "cpu"] : ["cpu"]),
    },
  });
}

export function entries(specs: NodeSpec[]): [string, TelemetryEntry][] {
  return specs.map((
    s,
  ) => [s.id, { reading: reading(s), version: 1, receivedAt: NOW - (s.silentMs ?? 0), networkVersion: 1 }]);
}

export function clusterView(specs: NodeSpec[]): ClusterView {
  return buildClusterView(emptyState(), entries(specs), NOW, { nodeTimeoutMs: 30_000 });
}

/** Ids "id-0", "id-1", ...: deterministic instance and runner ids. */
export function counterIds(prefix = "id"): { newId: () => string } {
  let i = 0;
  return { newId: () => `${prefix}-${i++}` };
}

/** A small deterministic PRNG (mulberry32) for property tests: the one the tiny-model writer uses. */
export { rng } from "../../src/dev/gguf/tiny.ts";
