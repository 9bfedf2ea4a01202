/**
 * Memory readings: total and available RAM and swap, from `/proc/meminfo` on Linux (under a root that
 * tests point at a fixture tree) and from `sysctl`/`vm_stat` on macOS. Unknown is null, never zero.
 */
import { FsRoot, runText } from "./root.ts";

export interface MemoryReading {
  ramTotal: number;
  ramAvailable: number;
  swapTotal: number | null;
  swapAvailable: number | null;
}

export function parseMeminfo(text: string): MemoryReading | null {
  const kb = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = line.match(/^(\w+):\s+(\d+)\s*kB/);
    if (m) kb.set(m[1], Number(m[2]) * 1024);
  }
  const total = kb.get("MemTotal");
  if (total === undefined) return null;
  const available = kb.get("MemAvailable") ?? ((kb.get("MemFree") ?? 0) + (kb.get("Cached") ?? 0));
  return {
    ramTotal: total,
    ramAvailable: available,
    swapTotal: kb.get("SwapTotal") ?? null,
    swapAvailable: kb.get("SwapFree") ?? null,
  };
}

/**
 * macOS: `sysctl -n hw.memsize` gives the total; `vm_stat` pages free, inactive, speculative and
 * purgeable are what the kernel hands out without swapping. `sysctl vm.swapusage` gives swap.
 */
export function parseDarwinMemory(
  memsize: string,
  vmStat: string,
  swapUsage: string | null,
): MemoryReading | null {
  const total = Number(memsize.trim());
  const pageSize = vmStat.match(/page size of (\d+) bytes/)?.[1];
  if (!Number.isFinite(total) || total <= 0 || !pageSize) return null;
  const pages = (name: string) => Number(vmStat.match(new RegExp(`${name}:\\s+(\\d+)`))?.[1] ?? 0);
  const available =
    (pages("Pages free") + pages("Pages inactive") + pages("Pages speculative") + pages("Pages purgeable")) *
    Number(pageSize);
  const swap = swapUsage ? parseSwapUsage(swapUsage) : null;
  return {
    ramTotal: total,
    ramAvailable: Math.min(available, total),
    swapTotal: swap?.total ?? null,
    swapAvailable: swap?.free ?? null,
  };
}

const UNIT: Record<string, number> = { K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/** `vm.swapusage: total = 2048.00M  used = 1024.50M  free = 1023.50M  (encrypted)` */
function parseSwapUsage(text: string): { total: number; free: number } | null {
  const field = (name: string) => {
    const m = text.match(new RegExp(`${name} = ([\\d.]+)([KMGT])`));
    return m ? Number(m[1]) * UNIT[m[2]] : null;
  };
  const total = field("total");
  const free = field("free");
  return total === null || free === null ? null : { total, free };
}

export async function readMemory(root = "/"): Promise<MemoryReading | null> {
  if (Deno.build.os === "linux" || root !== "/") {
    const text = new FsRoot(root).text("proc/meminfo");
    return text === null ? null : parseMeminfo(text);
  }
  if (Deno.build.os === "darwin") {
    const [memsize, vm, swap] = await Promise.all([
      runText("sysctl", ["-n", "hw.memsize"]),
      runText("vm_stat", []),
      runText("sysctl", ["vm.swapusage"]),
    ]);
    return memsize && vm ? parseDarwinMemory(memsize, vm, swap) : null;
  }
  return null;
}
