/**
 * Takes the local node's full telemetry reading. Each collector is its own module and reads from a
 * root that tests can point at a fixture tree; this file only puts the pieces together.
 */
import { bytes } from "../cluster/tagged.ts";
import { VERSION } from "../version.ts";
import { readAmdGpus } from "./accelerators/amdgpu.ts";
import { type MacmonSample, readApple } from "./accelerators/apple.ts";
import { Nvml } from "./accelerators/nvml.ts";
import { readNvidiaSmi } from "./accelerators/nvidia-smi.ts";
import { CpuSampler, parseCpuModel, parseLoadavg } from "./cpu.ts";
import { readDisk } from "./disk.ts";
import { readMemory } from "./memory.ts";
import { type Address, darwinInterfaces, linuxInterfaces } from "./network.ts";
import type { Accelerator, NodeReading } from "./reading.ts";
import { FsRoot, runText } from "./root.ts";
import { cpuTemperature, readTemperatures } from "./thermal.ts";

export interface CollectOptions {
  nodeId: string;
  friendlyName: string;
  apiAddress: string | null;
  worker: boolean;
  modelsDir: string;
  /** Filesystem root for sysfs/procfs; anything but "/" also turns off host programs (nvidia-smi, ioreg). */
  root?: string;
  engine?: NodeReading["engine"];
  /** Addresses to type; defaults to the host's. Tests pass recorded ones with a fixture root. */
  addresses?: Address[];
  /** The OS whose collectors run; defaults to the host's. */
  os?: typeof Deno.build.os;
  /** `node.memory_limit`: available RAM is reported as at most this, so placement lends no more. */
  memoryLimit?: number | null;
}

function onPath(bin: string): boolean {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (dir && Deno.statSync(`${dir}/${bin}`).isFile) return true;
    } catch { /* not in this dir */ }
  }
  return false;
}

function hostAddresses(): Address[] {
  try {
    return Deno.networkInterfaces().map((i) => ({ name: i.name, address: i.address, family: i.family }));
  } catch {
    return [];
  }
}

/** The accelerator placement and the dashboard show first: the one with the most memory. */
export function headline(accs: Accelerator[]): Accelerator | null {
  let best: Accelerator | null = null;
  const size = (a: Accelerator) => a.vramTotalBytes ?? a.gttTotalBytes ?? 0;
  for (const a of accs) if (best === null || size(a) > size(best)) best = a;
  return best;
}

/**
 * Holds what one node's readings share across samples: identity facts read once, the CPU counters of
 * the previous sample, and an NVML handle opened once (or the knowledge that there is none).
 */
export class Collector {
  readonly #fs: FsRoot;
  readonly #os: typeof Deno.build.os;
  readonly #host: boolean;
  readonly #cpu = new CpuSampler();
  #identity: { modelId: string; chipId: string; osBuild: string } | null = null;
  #nvml: Nvml | null | undefined;
  #nvidiaSmi: boolean | undefined;
  #macmon: boolean | undefined;
  /** `networksetup` takes tens of ms and its port list changes only when hardware does: refreshed each minute. */
  #ports: { text: string | null; at: number } | null = null;

  constructor(private readonly o: CollectOptions) {
    this.#fs = new FsRoot(o.root ?? "/");
    this.#os = o.os ?? Deno.build.os;
    this.#host = (o.root ?? "/") === "/";
  }

  async #identityFacts() {
    if (this.#identity) return this.#identity;
    let modelId: string | null = null;
    let chipId: string | null = null;
    if (this.#os === "darwin" && this.#host) {
      [modelId, chipId] = (await Promise.all([
        runText("sysctl", ["-n", "hw.model"]),
        runText("sysctl", ["-n", "machdep.cpu.brand_string"]),
      ]))
        .map((s) => s?.trim() || null);
    } else if (this.#os === "linux") {
      modelId = this.#fs.text("sys/class/dmi/id/product_name")?.trim() || null;
      chipId = parseCpuModel(this.#fs.text("proc/cpuinfo"));
    }
    let osBuild = "unknown";
    try {
      osBuild = this.#host
        ? Deno.osRelease()
        : this.#fs.text("proc/sys/kernel/osrelease")?.trim() ?? "unknown";
    } catch { /* not offered on this OS */ }
    this.#identity = {
      modelId: modelId ?? `${this.#os}-${Deno.build.arch}`,
      chipId: chipId ?? Deno.build.arch,
      osBuild,
    };
    return this.#identity;
  }

  async #nvidia(): Promise<Accelerator[]> {
    if (!this.#host || this.#os !== "linux") return [];
    if (this.#nvml === undefined) this.#nvml = Nvml.open();
    const fromNvml = this.#nvml?.read();
    if (fromNvml) return fromNvml;
    this.#nvidiaSmi ??= onPath("nvidia-smi");
    return this.#nvidiaSmi ? (await readNvidiaSmi()) ?? [] : [];
  }

  async read(): Promise<NodeReading> {
    const o = this.o;
    const ident = await this.#identityFacts();
    const mem = await readMemory(this.#fs.base || "/");
    const ramTotal = mem?.ramTotal ?? null;
    let accs: Accelerator[] = [];
    let mm: MacmonSample | null = null;
    let ifaces;
    let load: number[] | null = null;
    let cpu = { usage: null as number | null, cpus: null as number | null };
    const temps = this.#os === "linux" ? readTemperatures(this.#fs) : [];
    if (this.#os === "darwin" && this.#host) {
      this.#macmon ??= onPath("macmon");
      const apple = await readApple(this.#macmon);
      accs = apple.accelerator ? [apple.accelerator] : [];
      mm = apple.macmon;
      ifaces = darwinInterfaces(
        await runText("networksetup", ["-listallhardwareports"]),
        o.addresses ?? hostAddresses(),
      );
      try {
        load = Deno.loadavg();
      } catch { /* not offered */ }
    } else {
      accs = [...readAmdGpus(this.#fs, ramTotal), ...await this.#nvidia()];
      ifaces = linuxInterfaces(this.#fs, o.addresses ?? (this.#host ? hostAddresses() : []));
      load = parseLoadavg(this.#fs.text("proc/loadavg"));
      cpu = this.#cpu.sample(this.#fs);
    }
    const disk = readDisk(o.modelsDir);
    const head = headline(accs);
    return {
      nodeId: o.nodeId,
      apiAddress: o.apiAddress,
      worker: o.worker,
      identity: {
        modelId: ident.modelId,
        chipId: ident.chipId,
        friendlyName: o.friendlyName,
        osVersion: `${this.#os} ${ident.osBuild}`,
        osBuildVersion: ident.osBuild,
        skulkVersion: VERSION,
        skulkCommit: "",
      },
      memory: mem && {
        ramTotal: bytes(mem.ramTotal),
        ramAvailable: bytes(o.memoryLimit ? Math.min(mem.ramAvailable, o.memoryLimit) : mem.ramAvailable),
        swapTotal: mem.swapTotal === null ? null : bytes(mem.swapTotal),
        swapAvailable: mem.swapAvailable === null ? null : bytes(mem.swapAvailable),
      },
      system: {
        gpuUsage: head?.utilizationRatio ?? null,
        temp: mm?.cpuTemp ?? cpuTemperature(temps),
        sysPower: mm?.sysPower ?? null,
        pcpuUsage: mm?.pcpuUsage ?? null,
        ecpuUsage: mm?.ecpuUsage ?? null,
        cpuCount: cpu.cpus ?? (this.#host ? navigator.hardwareConcurrency ?? null : null),
        loadAverage: load,
        accelerator: head,
        accelerators: accs,
        cpuUsage: cpu.usage,
        temperatures: temps,
      },
      network: { interfaces: ifaces },
      disk: disk && { total: bytes(disk.total), available: bytes(disk.available), path: disk.path },
      engine: o.engine ?? null,
      ...(o.memoryLimit ? { memoryLimit: o.memoryLimit } : {}),
    };
  }

  close(): void {
    this.#nvml?.close();
    this.#nvml = null;
  }
}

/** One reading with a fresh collector (CPU usage is null: it needs a previous sample). */
export async function collectReading(o: CollectOptions): Promise<NodeReading> {
  const c = new Collector(o);
  try {
    return await c.read();
  } finally {
    c.close();
  }
}
