/**
 * Takes the local node's full telemetry reading. Each collector is its own module and reads from a
 * root that tests can point at a fixture tree; this file only puts the pieces together.
 */
import { bytes } from "../cluster/tagged.ts";
import { VERSION } from "../version.ts";
import { readMemory } from "./memory.ts";
import type { NodeReading } from "./reading.ts";

export interface CollectOptions {
  nodeId: string;
  friendlyName: string;
  apiAddress: string | null;
  worker: boolean;
  modelsDir: string;
  root?: string;
  engine?: NodeReading["engine"];
}

function osVersion(): string {
  try {
    return Deno.osRelease();
  } catch {
    return "unknown";
  }
}

async function readDisk(dir: string): Promise<NodeReading["disk"]> {
  try {
    await Deno.mkdir(dir, { recursive: true });
    const out = await new Deno.Command("df", { args: ["-Pk", dir], stdout: "piped", stderr: "null" }).output();
    if (!out.success) return null;
    const cols = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!.split(/\s+/);
    const [total, , avail] = [Number(cols[1]) * 1024, Number(cols[2]) * 1024, Number(cols[3]) * 1024];
    return Number.isFinite(total) && Number.isFinite(avail) ? { total: bytes(total), available: bytes(avail) } : null;
  } catch {
    return null;
  }
}

export async function collectReading(o: CollectOptions): Promise<NodeReading> {
  const root = o.root ?? "/";
  const [mem, disk] = await Promise.all([readMemory(root), readDisk(o.modelsDir)]);
  let load: number[] | null = null;
  try {
    load = Deno.loadavg();
  } catch { /* not offered on this OS */ }
  return {
    nodeId: o.nodeId,
    apiAddress: o.apiAddress,
    worker: o.worker,
    identity: {
      modelId: `${Deno.build.os}-${Deno.build.arch}`,
      chipId: Deno.build.arch,
      friendlyName: o.friendlyName,
      osVersion: `${Deno.build.os} ${osVersion()}`,
      osBuildVersion: osVersion(),
      skulkVersion: VERSION,
      skulkCommit: "",
    },
    memory: mem && {
      ramTotal: bytes(mem.ramTotal),
      ramAvailable: bytes(mem.ramAvailable),
      swapTotal: mem.swapTotal === null ? null : bytes(mem.swapTotal),
      swapAvailable: mem.swapAvailable === null ? null : bytes(mem.swapAvailable),
    },
    system: {
      gpuUsage: null,
      temp: null,
      sysPower: null,
      pcpuUsage: null,
      ecpuUsage: null,
      cpuCount: navigator.hardwareConcurrency ?? null,
      loadAverage: load,
      accelerator: null,
      accelerators: [],
    },
    network: {
      interfaces: Deno.networkInterfaces()
        .filter((i) => i.family === "IPv4" && !i.address.startsWith("127."))
        .map((i) => ({ name: i.name, ipAddress: i.address, interfaceType: "unknown" as const }))
        .sort((a, b) => a.name.localeCompare(b.name) || a.ipAddress.localeCompare(b.ipAddress)),
    },
    disk,
    engine: o.engine ?? null,
  };
}
