/** Full readings taken from the committed sysfs/procfs fixture trees, one per kind of machine. */
import { describe, expect, it } from "vitest";
import { Collector } from "../../src/telemetry/collect.ts";
import { type NodeReading, NodeReadingSchema } from "../../src/telemetry/reading.ts";
import { usableMemory } from "../../src/telemetry/usable.ts";
import { fixtureAddresses, fixtureReading } from "../helpers/telemetry.ts";

const GIB = 1024 ** 3;
const KB = 1024;
const reading = fixtureReading;

const types = (r: NodeReading) =>
  Object.fromEntries(r.network!.interfaces.map((i) => [`${i.name} ${i.ipAddress}`, i.interfaceType]));

describe("AMD APU (Strix Halo-like, GTT larger than VRAM)", () => {
  it("reads memory, the unified GPU block, sensors and typed links", async () => {
    const r = await reading("strix-halo");
    expect(NodeReadingSchema.parse(r)).toEqual(r);
    expect(r.memory!.ramTotal.inBytes).toBe(131_669_512 * KB);
    expect(r.memory!.ramAvailable.inBytes).toBe(118_530_120 * KB);
    expect(r.identity.chipId).toBe("AMD RYZEN AI MAX+ 395 w/ Radeon 8060S");
    expect(r.identity.modelId).toBe("MS-S1 MAX");
    const gpus = r.system!.accelerators;
    expect(gpus).toHaveLength(1); // card1-DP-1 and renderD128 are not cards
    expect(gpus[0]).toMatchObject({
      vendor: "amd",
      vramTotalBytes: 536870912,
      vramUsedBytes: 201326592,
      gttTotalBytes: 133143986176,
      gttUsedBytes: 10737418240,
      utilizationRatio: 0.37,
      temperatureCelsius: 52,
      powerWatts: 48,
      clockMhz: 2900,
      unifiedMemory: true,
      source: "sysfs",
    });
    expect(gpus[0].gttTotalBytes!).toBeGreaterThan(gpus[0].vramTotalBytes!);
    expect(r.system!.accelerator).toEqual(gpus[0]);
    expect(r.system!.gpuUsage).toBe(0.37);
    expect(r.system!.temp).toBe(61.25); // k10temp Tctl, not the GPU or the NVMe
    expect(r.system!.temperatures!.map((t) => `${t.sensor}/${t.label}`)).toEqual([
      "amdgpu/edge",
      "k10temp/Tctl",
      "nvme/Composite",
      "nvme/Sensor 1",
      "thermal_zone/acpitz",
    ]);
    expect(r.system!.loadAverage).toEqual([1.52, 1.2, 0.98]);
    expect(r.system!.cpuCount).toBe(32);
    expect(types(r)).toEqual({
      "enp191s0 192.168.1.40": "ethernet",
      "wlp192s0 192.168.1.41": "wifi",
      "tailscale0 100.101.7.12": "vpn",
      "tailscale0 fd7a:115c:a1e0::c501:70c": "vpn",
    });
  });

  it("counts the shared pool once: VRAM carve plus GTT-backed RAM above the OS headroom", async () => {
    const u = usableMemory(await reading("strix-halo"));
    const carve = Math.min(536870912 - 201326592, 0.9 * 536870912);
    expect(u.rule).toBe("apu-unified");
    expect(u.bytes).toBe(carve + (118_530_120 * KB - 16 * GIB));
    expect(u.offloadBytes).toBeNull();
  });
});

describe("Linux box with a Thunderbolt network link and a discrete Radeon", () => {
  it("types Thunderbolt by driver, Ethernet by name+device, WireGuard as VPN, a bridge as unknown", async () => {
    const r = await reading("thunderbolt-box");
    expect(types(r)).toEqual({
      "thunderbolt0 10.99.0.1": "thunderbolt",
      "eno1 10.0.0.21": "ethernet",
      "eno1 2001:db8::21": "ethernet",
      "docker0 172.17.0.1": "unknown",
      "wg0 10.200.0.2": "vpn",
    });
  });

  it("reads the discrete card (product name, dpm clock, average power) and skips the Intel iGPU", async () => {
    const r = await reading("thunderbolt-box");
    expect(r.system!.accelerators).toEqual([expect.objectContaining({
      vendor: "amd",
      name: "AMD Radeon RX 7900 XTX",
      unifiedMemory: false,
      clockMhz: 500,
      powerWatts: 23,
      utilizationRatio: 0,
    })]);
    expect(r.system!.temp).toBe(47);
    const u = usableMemory(r);
    expect(u.rule).toBe("discrete");
    expect(u.bytes).toBe(Math.min(25753026560 - 1073741824, 0.9 * 25753026560));
    expect(u.offloadBytes).toBe(52_004_112 * KB);
  });
});

describe("Wi-Fi laptop", () => {
  it("types the wireless link as Wi-Fi and a USB Ethernet adapter as Ethernet; CPU temp from x86_pkg_temp", async () => {
    const r = await reading("wifi-laptop");
    expect(types(r)).toEqual({
      "wlp0s20f3 192.168.178.23": "wifi",
      "enx00e04c680001 169.254.12.7": "ethernet",
    });
    expect(r.system!.accelerators).toEqual([]);
    expect(r.system!.temp).toBe(58);
    expect(usableMemory(r)).toEqual({
      bytes: 7_904_220 * KB,
      acceleratorBytes: null,
      offloadBytes: null,
      rule: "cpu",
    });
  });
});

describe("plain server", () => {
  it("reports no accelerator and null (not zero) for what it cannot read", async () => {
    const r = await reading("plain-server");
    expect(r.system!.accelerator).toBeNull();
    expect(r.system!.gpuUsage).toBeNull();
    expect(r.system!.temp).toBeNull();
    expect(r.system!.temperatures).toEqual([]);
    expect(r.system!.sysPower).toBeNull();
    expect(r.identity.modelId).toBe("linux-" + Deno.build.arch); // no DMI product name in this tree
    expect(types(r)).toEqual({
      "eth0 10.1.2.3": "ethernet",
      "eth1 10.1.3.3": "ethernet",
      "bond0 10.1.9.3": "unknown",
    });
    expect(usableMemory(r).rule).toBe("cpu");
  });

  it("measures CPU busy share only from the second reading on", async () => {
    expect((await reading("plain-server")).system!.cpuUsage).toBeNull();
    // The fixture's counters do not move between reads, so the share stays unmeasured rather than 0.
    expect((await reading("plain-server", true)).system!.cpuUsage).toBeNull();
  });

  it("gives equal network readings for an unchanged machine, whatever order addresses arrive in", async () => {
    const addresses = fixtureAddresses("thunderbolt-box");
    const [a, b] = await Promise.all([
      reading("thunderbolt-box", false, addresses),
      reading("thunderbolt-box", false, [...addresses].reverse()),
    ]);
    expect(JSON.stringify(a.network)).toBe(JSON.stringify(b.network));
  });
});

describe("the host itself", () => {
  it("takes a reading that matches the wire schema, with measured memory and disk", async () => {
    const dir = Deno.makeTempDirSync({ prefix: "skulk-telemetry-" });
    const c = new Collector({
      nodeId: "host",
      friendlyName: "host",
      apiAddress: null,
      worker: true,
      modelsDir: `${dir}/models`,
    });
    try {
      const r = await c.read();
      expect(NodeReadingSchema.parse(r)).toEqual(r);
      expect(r.memory!.ramTotal.inBytes).toBeGreaterThan(r.memory!.ramAvailable.inBytes);
      expect(r.disk!.total.inBytes).toBeGreaterThan(0);
      expect(r.disk!.path).toBe(`${dir}/models`);
    } finally {
      c.close();
      Deno.removeSync(dir, { recursive: true });
    }
  });
});
