/**
 * Apple Silicon: the GPU from `ioreg -c IOAccelerator` (model, cores, utilisation, memory in use) and,
 * when `macmon` is installed, its sampled power, temperatures, clocks and CPU cluster usage.
 */
import type { Accelerator } from "../reading.ts";
import { runText } from "../root.ts";

export interface IoregGpu {
  model: string | null;
  cores: number | null;
  utilizationRatio: number | null;
  inUseBytes: number | null;
}

export function parseIoregAccelerator(text: string): IoregGpu | null {
  if (!text.includes("PerformanceStatistics") && !text.includes("gpu-core-count")) return null;
  const str = (key: string) => text.match(new RegExp(`"${key}" = "([^"]*)"`))?.[1] ?? null;
  const int = (key: string) => {
    const m = text.match(new RegExp(`"${key.replace(/[%()]/g, "\\$&")}"\\s*=\\s*(\\d+)`));
    return m ? Number(m[1]) : null;
  };
  const util = int("Device Utilization %");
  return {
    model: str("model"),
    cores: int("gpu-core-count"),
    utilizationRatio: util === null ? null : util / 100,
    inUseBytes: int("In use system memory"),
  };
}

/** One `macmon pipe` sample; [MHz, ratio] pairs for the clusters, watts, °C. */
export interface MacmonSample {
  gpuUsage: number | null;
  gpuMhz: number | null;
  pcpuUsage: number | null;
  ecpuUsage: number | null;
  gpuPower: number | null;
  sysPower: number | null;
  cpuTemp: number | null;
  gpuTemp: number | null;
}

export function parseMacmon(line: string): MacmonSample | null {
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(line.trim().split("\n").at(-1) ?? "");
  } catch {
    return null;
  }
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const pair = (v: unknown, i: number) => (Array.isArray(v) ? n(v[i]) : null);
  const temp = (j.temp ?? {}) as Record<string, unknown>;
  return {
    gpuUsage: pair(j.gpu_usage, 1),
    gpuMhz: pair(j.gpu_usage, 0),
    pcpuUsage: pair(j.pcpu_usage, 1),
    ecpuUsage: pair(j.ecpu_usage, 1),
    gpuPower: n(j.gpu_power),
    sysPower: n(j.sys_power) ?? n(j.all_power),
    cpuTemp: n(temp.cpu_temp_avg),
    gpuTemp: n(temp.gpu_temp_avg),
  };
}

/** The Apple GPU block: its memory is the unified RAM, so VRAM total stays null (counted via RAM). */
export function appleAccelerator(
  gpu: IoregGpu | null,
  chip: string | null,
  mm: MacmonSample | null,
): Accelerator | null {
  if (!gpu && !mm) return null;
  const model = gpu?.model ?? chip ?? "Apple GPU";
  return {
    vendor: "apple",
    name: gpu?.cores ? `${model} (${gpu.cores}-core GPU)` : model,
    utilizationRatio: mm?.gpuUsage ?? gpu?.utilizationRatio ?? null,
    vramTotalBytes: null,
    vramUsedBytes: gpu?.inUseBytes ?? null,
    gttTotalBytes: null,
    gttUsedBytes: null,
    powerWatts: mm?.gpuPower ?? null,
    temperatureCelsius: mm?.gpuTemp ?? null,
    clockMhz: mm?.gpuMhz ?? null,
    unifiedMemory: true,
    source: mm ? "macmon" : "ioreg",
  };
}

export async function readApple(
  useMacmon: boolean,
): Promise<{ accelerator: Accelerator | null; macmon: MacmonSample | null }> {
  const [ioreg, chip, mm] = await Promise.all([
    runText("ioreg", ["-r", "-d", "1", "-w", "0", "-c", "IOAccelerator"]),
    runText("sysctl", ["-n", "machdep.cpu.brand_string"]),
    useMacmon ? runText("macmon", ["pipe", "-s", "1", "-i", "200"], 3000) : Promise.resolve(null),
  ]);
  const macmon = mm ? parseMacmon(mm) : null;
  return {
    accelerator: appleAccelerator(ioreg ? parseIoregAccelerator(ioreg) : null, chip?.trim() || null, macmon),
    macmon,
  };
}
