/**
 * NVIDIA GPUs through `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`: the fallback when
 * NVML cannot be loaded. Fields nvidia-smi cannot read ("[N/A]", "[Not Supported]") become null.
 */
import type { Accelerator } from "../reading.ts";
import { runText } from "../root.ts";

export const NVIDIA_SMI_FIELDS = [
  "name",
  "memory.total",
  "memory.used",
  "utilization.gpu",
  "temperature.gpu",
  "power.draw",
  "clocks.sm",
];
export const NVIDIA_SMI_ARGS = [
  `--query-gpu=${NVIDIA_SMI_FIELDS.join(",")}`,
  "--format=csv,noheader,nounits",
];

const MIB = 1024 * 1024;

function num(v: string | undefined): number | null {
  if (v === undefined) return null;
  const t = v.trim();
  if (t === "" || t.startsWith("[") || /^n\/?a$/i.test(t)) return null;
  const n = Number(t);
  return Number.isFinite(n) ? n : null;
}

/**
 * GB10 (DGX Spark) shares LPDDR with the CPU and reports no framebuffer total; its memory is the
 * system pool, so it is counted like an APU.
 */
export function isUnifiedNvidia(name: string): boolean {
  return /\bGB10\b/.test(name);
}

export function parseNvidiaSmi(csv: string): Accelerator[] {
  const out: Accelerator[] = [];
  for (const line of csv.split("\n")) {
    if (line.trim() === "") continue;
    // The name comes first and may itself contain ", "; the six numeric fields are the last six.
    const parts = line.split(",");
    if (parts.length < NVIDIA_SMI_FIELDS.length) continue;
    const nums = parts.slice(-6);
    const name = parts.slice(0, -6).join(",").trim();
    const [total, used, util, temp, power, clock] = nums.map(num);
    out.push({
      vendor: "nvidia",
      name,
      utilizationRatio: util === null ? null : util / 100,
      vramTotalBytes: total === null ? null : total * MIB,
      vramUsedBytes: used === null ? null : used * MIB,
      gttTotalBytes: null,
      gttUsedBytes: null,
      powerWatts: power,
      temperatureCelsius: temp,
      clockMhz: clock,
      unifiedMemory: isUnifiedNvidia(name),
      source: "nvidia-smi",
    });
  }
  return out;
}

/** Null when nvidia-smi is missing or fails (no driver, no GPU): the caller reports no NVIDIA GPU. */
export async function readNvidiaSmi(bin = "nvidia-smi"): Promise<Accelerator[] | null> {
  const out = await runText(bin, NVIDIA_SMI_ARGS);
  return out === null ? null : parseNvidiaSmi(out);
}
