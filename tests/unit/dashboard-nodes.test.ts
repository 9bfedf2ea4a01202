import { describe, expect, it } from "vitest";
import type { ClusterStateWire } from "../../src/dashboard/app/api.ts";
import { stateToWire } from "../../src/api/wire/state.ts";
import { emptyState } from "../../src/cluster/state.ts";
import type { TelemetryEntry } from "../../src/cluster/telemetry.ts";
import {
  acceleratorsOf,
  freeMemory,
  isTimedOut,
  masterOf,
  memoryOf,
  nodeIds,
  nodeName,
  temperatureOf,
} from "../../src/dashboard/app/nodes.ts";
import { NodeReadingSchema } from "../../src/telemetry/reading.ts";

const GB = 1_000_000_000;
const NOW = 1_800_000_000_000;

function reading(
  nodeId: string,
  name: string,
  opts: { gpu?: boolean; sensors?: number[]; cpuTemp?: number | null; free?: number } = {},
) {
  const acc = {
    vendor: "NVIDIA",
    name: "H200",
    utilizationRatio: 0.42,
    vramTotalBytes: 141 * GB,
    vramUsedBytes: 20 * GB,
    gttTotalBytes: null,
    powerWatts: 310,
    temperatureCelsius: 61,
    clockMhz: 1980,
  };
  return NodeReadingSchema.parse({
    nodeId,
    apiAddress: "127.0.0.1:1",
    worker: true,
    identity: {
      modelId: "pc",
      chipId: "x86",
      friendlyName: name,
      osVersion: "linux",
      osBuildVersion: "6",
      skulkVersion: "0.1.0",
      skulkCommit: "abc",
    },
    memory: {
      ramTotal: { inBytes: 64 * GB },
      ramAvailable: { inBytes: (opts.free ?? 48) * GB },
      swapTotal: null,
      swapAvailable: null,
    },
    system: {
      gpuUsage: null,
      temp: opts.cpuTemp ?? null,
      sysPower: null,
      pcpuUsage: null,
      ecpuUsage: null,
      accelerator: opts.gpu ? acc : null,
      accelerators: opts.gpu ? [acc] : [],
      ...(opts.sensors
        ? { temperatures: opts.sensors.map((c, i) => ({ sensor: "hwmon0", label: `t${i}`, celsius: c })) }
        : {}),
    },
    network: { interfaces: [{ name: "eth0", ipAddress: "10.0.0.2", interfaceType: "ethernet" }] },
    disk: { total: { inBytes: 1000 * GB }, available: { inBytes: 500 * GB } },
    engine: null,
  });
}

/** The `/state` JSON the dashboard receives, made by the server's own stateToWire. */
function wire(entries: [string, TelemetryEntry][]): ClusterStateWire {
  return JSON.parse(JSON.stringify(stateToWire(emptyState(), entries, NOW)));
}

describe("reading nodes out of /state", () => {
  const fresh = (
    r: ReturnType<typeof reading>,
    agoMs = 1000,
  ): [string, TelemetryEntry] => [r.nodeId, {
    reading: r,
    version: 1,
    receivedAt: NOW - agoMs,
    networkVersion: 1,
  }];

  it("names, orders and measures each node", () => {
    const s = wire([
      fresh(reading("n2", "zeta", { gpu: true })),
      fresh(reading("n1", "alpha", { cpuTemp: 55 })),
    ]);
    expect(nodeIds(s)).toEqual(["n1", "n2"]);
    expect(nodeName(s, "n2")).toBe("zeta");
    expect(memoryOf(s, "n1")).toEqual({ used: 16 * GB, total: 64 * GB });
    expect(acceleratorsOf(s, "n2").map((a) => [a.name, a.vramUsedBytes, a.powerWatts])).toEqual([[
      "H200",
      20 * GB,
      310,
    ]]);
    expect(acceleratorsOf(s, "n1")).toEqual([]);
  });

  it.each([
    [{ gpu: true, sensors: [70], cpuTemp: 50 }, 61],
    [{ sensors: [48, 72.5], cpuTemp: 50 }, 72.5],
    [{ cpuTemp: 50 }, 50],
    [{}, null],
  ])("temperature with %j is %s", (opts, want) => {
    expect(temperatureOf(wire([fresh(reading("n1", "a", opts))]), "n1")).toBe(want);
  });

  it("marks a node silent for more than 15 s as timed out and leaves its memory out of the free total", () => {
    const s = wire([
      fresh(reading("n1", "live", { free: 40 })),
      fresh(reading("n2", "silent", { free: 30 }), 20_000),
    ]);
    expect(isTimedOut(s, "n1")).toBe(false);
    expect(isTimedOut(s, "n2")).toBe(true);
    expect(freeMemory(s)).toBe(40 * GB);
  });

  it("names the master only when the state says who it is", () => {
    const s = wire([fresh(reading("n1", "a"))]);
    expect(masterOf(s)).toBeNull();
    expect(masterOf({ ...s, masterNodeId: "n1" })).toBe("n1");
  });
});
