/**
 * NVIDIA GPUs through NVML over Deno FFI (`libnvidia-ml.so.1`): opened and initialised once, then read
 * per sample. Decoding NVML's out-structs and return codes is pure, so it is tested on recorded bytes.
 */
import type { Accelerator } from "../reading.ts";
import { isUnifiedNvidia } from "./nvidia-smi.ts";

const SYMBOLS = {
  nvmlInit_v2: { parameters: [], result: "i32" },
  nvmlShutdown: { parameters: [], result: "i32" },
  nvmlDeviceGetCount_v2: { parameters: ["buffer"], result: "i32" },
  nvmlDeviceGetHandleByIndex_v2: { parameters: ["u32", "buffer"], result: "i32" },
  nvmlDeviceGetName: { parameters: ["pointer", "buffer", "u32"], result: "i32" },
  nvmlDeviceGetMemoryInfo: { parameters: ["pointer", "buffer"], result: "i32" },
  nvmlDeviceGetUtilizationRates: { parameters: ["pointer", "buffer"], result: "i32" },
  nvmlDeviceGetTemperature: { parameters: ["pointer", "u32", "buffer"], result: "i32" },
  nvmlDeviceGetPowerUsage: { parameters: ["pointer", "buffer"], result: "i32" },
  nvmlDeviceGetClockInfo: { parameters: ["pointer", "u32", "buffer"], result: "i32" },
} as const;

export const NVML_SUCCESS = 0;
const NVML_TEMPERATURE_GPU = 0;
const NVML_CLOCK_SM = 1;
/** NVML_DEVICE_NAME_V2_BUFFER_SIZE */
const NAME_BUFFER = 96;

/** What one device's NVML calls returned: each out-buffer with its return code. */
export interface NvmlRaw {
  name: { rc: number; buf: Uint8Array };
  /** nvmlMemory_t: unsigned long long total, free, used. */
  memory: { rc: number; buf: Uint8Array };
  /** nvmlUtilization_t: unsigned int gpu, memory (percent). */
  utilization: { rc: number; buf: Uint8Array };
  /** unsigned int out-values: °C, mW, MHz. */
  temperature: { rc: number; buf: Uint8Array };
  power: { rc: number; buf: Uint8Array };
  clock: { rc: number; buf: Uint8Array };
}

const u32 = (r: { rc: number; buf: Uint8Array }) =>
  r.rc === NVML_SUCCESS
    ? new DataView(r.buf.buffer, r.buf.byteOffset, r.buf.byteLength).getUint32(0, true)
    : null;

export function decodeName(r: { rc: number; buf: Uint8Array }): string | null {
  if (r.rc !== NVML_SUCCESS) return null;
  const end = r.buf.indexOf(0);
  return new TextDecoder().decode(r.buf.subarray(0, end < 0 ? r.buf.length : end));
}

export function decodeMemory(
  r: { rc: number; buf: Uint8Array },
): { total: number; free: number; used: number } | null {
  if (r.rc !== NVML_SUCCESS) return null;
  const v = new DataView(r.buf.buffer, r.buf.byteOffset, r.buf.byteLength);
  return {
    total: Number(v.getBigUint64(0, true)),
    free: Number(v.getBigUint64(8, true)),
    used: Number(v.getBigUint64(16, true)),
  };
}

/** One device's accelerator block; a call that returned an error (e.g. 3, NOT_SUPPORTED) is null. */
export function nvmlToAccelerator(raw: NvmlRaw, index: number): Accelerator {
  const name = decodeName(raw.name) ?? `NVIDIA GPU ${index}`;
  const mem = decodeMemory(raw.memory);
  const util = u32(raw.utilization);
  const mw = u32(raw.power);
  return {
    vendor: "nvidia",
    name,
    utilizationRatio: util === null ? null : util / 100,
    vramTotalBytes: mem?.total ?? null,
    vramUsedBytes: mem?.used ?? null,
    gttTotalBytes: null,
    gttUsedBytes: null,
    powerWatts: mw === null ? null : mw / 1000,
    temperatureCelsius: u32(raw.temperature),
    clockMhz: u32(raw.clock),
    unifiedMemory: isUnifiedNvidia(name),
    source: "nvml",
  };
}

type Lib = Deno.DynamicLibrary<typeof SYMBOLS>;

/** An initialised NVML; `open` is null where the library is absent or no driver answers. */
export class Nvml {
  private constructor(private readonly lib: Lib) {}

  static open(path = "libnvidia-ml.so.1"): Nvml | null {
    let lib: Lib;
    try {
      lib = Deno.dlopen(path, SYMBOLS);
    } catch {
      return null;
    }
    if (lib.symbols.nvmlInit_v2() !== NVML_SUCCESS) {
      lib.close();
      return null;
    }
    return new Nvml(lib);
  }

  /** Null when NVML stops answering (driver unloaded): the caller falls back to nvidia-smi. */
  read(): Accelerator[] | null {
    const s = this.lib.symbols;
    const count = new Uint32Array(1);
    if (s.nvmlDeviceGetCount_v2(count) !== NVML_SUCCESS) return null;
    const out: Accelerator[] = [];
    for (let i = 0; i < count[0]; i++) {
      const handleBuf = new BigUint64Array(1);
      if (s.nvmlDeviceGetHandleByIndex_v2(i, handleBuf) !== NVML_SUCCESS) continue;
      const dev = Deno.UnsafePointer.create(handleBuf[0]);
      const call = (size: number, f: (b: Uint8Array) => number) => {
        const buf = new Uint8Array(size);
        return { rc: f(buf), buf };
      };
      out.push(nvmlToAccelerator({
        name: call(NAME_BUFFER, (b) => s.nvmlDeviceGetName(dev, b, NAME_BUFFER)),
        memory: call(24, (b) => s.nvmlDeviceGetMemoryInfo(dev, b)),
        utilization: call(8, (b) => s.nvmlDeviceGetUtilizationRates(dev, b)),
        temperature: call(4, (b) => s.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, b)),
        power: call(4, (b) => s.nvmlDeviceGetPowerUsage(dev, b)),
        clock: call(4, (b) => s.nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, b)),
      }, i));
    }
    return out;
  }

  close(): void {
    this.lib.symbols.nvmlShutdown();
    this.lib.close();
  }
}
