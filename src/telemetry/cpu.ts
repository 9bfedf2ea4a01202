/**
 * CPU facts from procfs: busy share between two readings (`/proc/stat`), load average, CPU count and
 * model name. The sampler keeps the previous counters, so the first reading's usage is null.
 */
import type { FsRoot } from "./root.ts";

export interface CpuTimes {
  busy: number;
  total: number;
  cpus: number;
}

/** The aggregate `cpu` line: user nice system idle iowait irq softirq steal; idle + iowait is not busy. */
export function parseProcStat(text: string): CpuTimes | null {
  const lines = text.split("\n");
  const agg = lines.find((l) => /^cpu\s/.test(l));
  if (!agg) return null;
  const v = agg.trim().split(/\s+/).slice(1, 9).map(Number);
  if (v.length < 4 || v.some((n) => !Number.isFinite(n))) return null;
  const total = v.reduce((a, b) => a + b, 0);
  const idle = v[3] + (v[4] ?? 0);
  return { busy: total - idle, total, cpus: lines.filter((l) => /^cpu\d+\s/.test(l)).length };
}

/** Busy share between two counter snapshots; null when the counters did not advance. */
export function cpuUsage(prev: CpuTimes, cur: CpuTimes): number | null {
  const dt = cur.total - prev.total;
  if (dt <= 0) return null;
  return Math.min(1, Math.max(0, (cur.busy - prev.busy) / dt));
}

export function parseLoadavg(text: string | null): number[] | null {
  const v = text?.trim().split(/\s+/).slice(0, 3).map(Number);
  return v && v.length === 3 && v.every(Number.isFinite) ? v : null;
}

/** x86 has "model name"; many ARM boards only "Hardware" or "Model". */
export function parseCpuModel(cpuinfo: string | null): string | null {
  for (const key of ["model name", "Model", "Hardware"]) {
    const m = cpuinfo?.match(new RegExp(`^${key}\\s*:\\s*(.+)$`, "m"));
    if (m) return m[1].trim();
  }
  return null;
}

export class CpuSampler {
  #prev: CpuTimes | null = null;

  sample(fs: FsRoot): { usage: number | null; cpus: number | null } {
    const text = fs.text("proc/stat");
    const cur = text === null ? null : parseProcStat(text);
    const usage = cur && this.#prev ? cpuUsage(this.#prev, cur) : null;
    if (cur) this.#prev = cur;
    return { usage, cpus: cur?.cpus || null };
  }
}
