/**
 * Memory readings: total and available RAM and swap, from `/proc/meminfo` on Linux (under a root that
 * tests point at a fixture tree) and from `sysctl`/`vm_stat` on macOS. Unknown is null, never zero.
 */
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

export async function readMemory(root = "/"): Promise<MemoryReading | null> {
  if (Deno.build.os === "linux" || root !== "/") {
    try {
      return parseMeminfo(await Deno.readTextFile(`${root.replace(/\/$/, "")}/proc/meminfo`));
    } catch {
      return null;
    }
  }
  if (Deno.build.os === "darwin") return await readDarwinMemory();
  return null;
}

async function run(cmd: string, args: string[]): Promise<string | null> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).output();
    return out.success ? new TextDecoder().decode(out.stdout) : null;
  } catch {
    return null;
  }
}

async function readDarwinMemory(): Promise<MemoryReading | null> {
  const total = Number((await run("sysctl", ["-n", "hw.memsize"]))?.trim());
  const vm = await run("vm_stat", []);
  if (!total || !vm) return null;
  const page = Number(vm.match(/page size of (\d+) bytes/)?.[1] ?? 16384);
  const pages = (name: string) => Number(vm.match(new RegExp(`${name}:\\s+(\\d+)`))?.[1] ?? 0);
  const available = (pages("Pages free") + pages("Pages inactive") + pages("Pages speculative") + pages("Pages purgeable")) * page;
  return { ramTotal: total, ramAvailable: available, swapTotal: null, swapAvailable: null };
}
