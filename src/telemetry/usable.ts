/**
 * Usable memory per node for placement: the bytes a model's weights and KV cache can occupy on a node,
 * from its reading alone (pure). Unified-memory nodes count their shared pool once; see docs/telemetry.md.
 */
import type { Accelerator, NodeReading } from "./reading.ts";

const GIB = 1024 ** 3;
/** Share of a discrete GPU's VRAM a model may take (drivers and the display keep the rest). */
export const VRAM_WORKING_SET_FRACTION = 0.9;
/** Metal's cap on GPU-wired memory, as a share of RAM. */
export const APPLE_WORKING_SET_FRACTION = 0.75;
/** RAM left to the OS on an APU before its GTT pool is handed to a model. */
export const UMA_OS_HEADROOM_BYTES = 16 * GIB;

export type UsableRule = "apple-unified" | "apu-unified" | "discrete" | "cpu" | "unknown";

export interface UsableMemory {
  /** What placement should fit a model into; null when the node has not reported memory. */
  bytes: number | null;
  /** Of `bytes`, what sits on accelerators (null on CPU-only nodes). */
  acceleratorBytes: number | null;
  /** Discrete GPUs only: system RAM available for layers offloaded to the CPU, on top of `bytes`. */
  offloadBytes: number | null;
  rule: UsableRule;
}

const discreteFree = (a: Accelerator) =>
  a.vramTotalBytes === null ? null : Math.max(
    0,
    Math.min(a.vramTotalBytes - (a.vramUsedBytes ?? 0), VRAM_WORKING_SET_FRACTION * a.vramTotalBytes),
  );

/** True when the node's engine was built for the CPU only, so its GPU memory cannot hold a model. */
function cpuOnlyEngine(r: NodeReading): boolean {
  const b = r.engine?.backends;
  return !!b && b.length > 0 && b.every((x) => /cpu/i.test(x));
}

export function usableMemory(r: NodeReading): UsableMemory {
  const ramTotal = r.memory?.ramTotal.inBytes ?? null;
  const ramAvail = r.memory?.ramAvailable.inBytes ?? null;
  const accs = r.system?.accelerators.length
    ? r.system.accelerators
    : (r.system?.accelerator ? [r.system.accelerator] : []);
  const cpu = (): UsableMemory =>
    ramAvail === null
      ? { bytes: null, acceleratorBytes: null, offloadBytes: null, rule: "unknown" }
      : { bytes: ramAvail, acceleratorBytes: null, offloadBytes: null, rule: "cpu" };
  if (accs.length === 0 || cpuOnlyEngine(r)) return cpu();

  const apple = accs.find((a) => a.vendor === "apple");
  if (apple && ramTotal !== null && ramAvail !== null) {
    const b = Math.min(ramAvail, APPLE_WORKING_SET_FRACTION * ramTotal);
    return { bytes: b, acceleratorBytes: b, offloadBytes: null, rule: "apple-unified" };
  }

  const apu = accs.find((a) => a.unifiedMemory && a.vendor !== "apple");
  if (apu && ramAvail !== null) {
    // The VRAM carve is outside MemTotal; GTT pages come out of RAM, so RAM is charged here and never
    // again as offload. GTT used is already missing from MemAvailable, so it is not subtracted twice.
    const carve = discreteFree(apu) ?? 0;
    const gtt = apu.gttTotalBytes ?? (apu.vramTotalBytes === null ? Infinity : 0);
    const pooled = Math.min(Math.max(0, ramAvail - UMA_OS_HEADROOM_BYTES), gtt);
    return {
      bytes: carve + pooled,
      acceleratorBytes: carve + pooled,
      offloadBytes: null,
      rule: "apu-unified",
    };
  }

  const frees = accs.map(discreteFree).filter((n): n is number => n !== null);
  if (frees.length === 0) return cpu();
  const vram = frees.reduce((a, b) => a + b, 0);
  return { bytes: vram, acceleratorBytes: vram, offloadBytes: ramAvail, rule: "discrete" };
}
