/** Table-driven tests of the pure telemetry parts: link typing, recorded tool outputs, NVML decoding, usable memory. */
import { describe, expect, it } from "vitest";
import { bytes } from "../../src/cluster/tagged.ts";
import {
  appleAccelerator,
  parseIoregAccelerator,
  parseMacmon,
} from "../../src/telemetry/accelerators/apple.ts";
import { currentDpmClock, isUnifiedAmd } from "../../src/telemetry/accelerators/amdgpu.ts";
import { Nvml, type NvmlRaw, nvmlToAccelerator } from "../../src/telemetry/accelerators/nvml.ts";
import { parseNvidiaSmi, readNvidiaSmi } from "../../src/telemetry/accelerators/nvidia-smi.ts";
import { cpuUsage, parseCpuModel, parseLoadavg, parseProcStat } from "../../src/telemetry/cpu.ts";
import { parseDarwinMemory, parseMeminfo } from "../../src/telemetry/memory.ts";
import {
  type Address,
  darwinInterfaces,
  isTailscaleAddress,
  linkPreference,
  type LinuxInterfaceFacts,
  typeLinuxInterface,
} from "../../src/telemetry/network.ts";
import type { Accelerator, InterfaceType, NodeReading } from "../../src/telemetry/reading.ts";
import { usableMemory } from "../../src/telemetry/usable.ts";

const FIX = new URL("../fixtures/", import.meta.url).pathname;
const fixture = (p: string) => Deno.readTextFileSync(`${FIX}${p}`);
const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

describe("Linux interface typing (first match wins)", () => {
  const f = (name: string, o: Partial<LinuxInterfaceFacts> = {}): LinuxInterfaceFacts => ({
    name,
    wireless: false,
    driver: null,
    hasDevice: false,
    devtype: null,
    ...o,
  });
  const cases: [string, LinuxInterfaceFacts, string, InterfaceType][] = [
    ["wireless dir", f("wlan0", { wireless: true, hasDevice: true }), "192.168.1.2", "wifi"],
    ["wireless beats an en* name", f("enwifi", { wireless: true, hasDevice: true }), "192.168.1.2", "wifi"],
    [
      "thunderbolt driver",
      f("enp5s0", { driver: "../../bus/thunderbolt/drivers/thunderbolt-net", hasDevice: true }),
      "10.9.0.1",
      "thunderbolt",
    ],
    ["thunderbolt name", f("thunderbolt0"), "10.9.0.1", "thunderbolt"],
    ["tb name", f("tb1"), "10.9.0.1", "thunderbolt"],
    [
      "en + device",
      f("enp3s0", { driver: "../../bus/pci/drivers/igc", hasDevice: true }),
      "10.0.0.2",
      "ethernet",
    ],
    ["eth + device", f("eth0", { hasDevice: true }), "10.0.0.2", "ethernet"],
    ["eth without device (veth-like)", f("eth0"), "10.0.0.2", "unknown"],
    ["tailscale by name", f("tailscale0"), "100.64.0.1", "vpn"],
    ["wireguard devtype", f("home", { devtype: "wireguard" }), "10.200.0.1", "vpn"],
    ["tun", f("tun0"), "10.8.0.2", "vpn"],
    ["tailscale by address on an odd name", f("ts-x"), "100.100.1.1", "vpn"],
    ["not CGNAT", f("br0"), "100.128.0.1", "unknown"],
    ["bridge", f("docker0", { devtype: "bridge" }), "172.17.0.1", "unknown"],
  ];
  it.each(cases)("%s", (_why, facts, addr, want) => expect(typeLinuxInterface(facts, addr)).toBe(want));

  it("recognises Tailscale's IPv6 range", () => {
    expect(isTailscaleAddress("fd7a:115c:a1e0::1")).toBe(true);
    expect(isTailscaleAddress("fd7a:115c:a1e1::1")).toBe(false);
  });
});

describe("macOS interface typing from recorded networksetup output", () => {
  it("types every port as upstream does and sorts the result", () => {
    const addrs = JSON.parse(fixture("macos/addresses.json")) as Address[];
    const list = darwinInterfaces(fixture("macos/networksetup.txt"), addrs);
    expect(list.map((i) => [i.name, i.interfaceType])).toEqual([
      ["bridge0", "thunderbolt"],
      ["en0", "ethernet"],
      ["en1", "wifi"],
      ["en7", "maybe_ethernet"],
      ["en8", "ethernet"],
      ["utun4", "vpn"],
    ]);
  });
});

describe("link preference for donor traffic", () => {
  it("orders Thunderbolt, Ethernet, Wi-Fi, unknown, VPN", () => {
    const all: InterfaceType[] = ["vpn", "unknown", "wifi", "maybe_ethernet", "ethernet", "thunderbolt"];
    expect([...all].sort((a, b) => linkPreference(a) - linkPreference(b))).toEqual([
      "thunderbolt",
      "ethernet",
      "maybe_ethernet",
      "wifi",
      "unknown",
      "vpn",
    ]);
  });
});

describe("nvidia-smi (recorded outputs)", () => {
  it("parses two H100s in MiB and percent", () => {
    const gpus = parseNvidiaSmi(fixture("nvidia-smi/h100-x2.csv"));
    expect(gpus).toHaveLength(2);
    expect(gpus[1]).toEqual({
      vendor: "nvidia",
      name: "NVIDIA H100 80GB HBM3",
      utilizationRatio: 0.97,
      vramTotalBytes: 81559 * MIB,
      vramUsedBytes: 40211 * MIB,
      gttTotalBytes: null,
      gttUsedBytes: null,
      powerWatts: 612.3,
      temperatureCelsius: 58,
      clockMhz: 1980,
      unifiedMemory: false,
      source: "nvidia-smi",
    });
  });

  it("turns [N/A] and [Not Supported] into null, never 0", () => {
    const [gb10] = parseNvidiaSmi(fixture("nvidia-smi/gb10.csv"));
    expect(gb10.vramTotalBytes).toBeNull();
    expect(gb10.unifiedMemory).toBe(true);
    const [old] = parseNvidiaSmi(fixture("nvidia-smi/not-supported.csv"));
    expect(old.powerWatts).toBeNull();
    expect(old.vramTotalBytes).toBe(4096 * MIB);
  });

  it("reports no NVIDIA GPU when nvidia-smi cannot run", async () => {
    expect(await readNvidiaSmi("/nonexistent/nvidia-smi")).toBeNull();
  });
});

describe("NVML (recorded out-buffers)", () => {
  const hex = (h: string) => Uint8Array.from(h.match(/../g)!.map((b) => parseInt(b, 16)));
  type Rec = Record<keyof NvmlRaw, { rc: number; hex: string }>;
  const devices = (JSON.parse(fixture("nvml/recorded.json")) as { devices: Rec[] }).devices.map((d) =>
    Object.fromEntries(
      Object.entries(d).map(([k, v]) => [k, { rc: v.rc, buf: hex(v.hex) }]),
    ) as unknown as NvmlRaw
  );

  it("decodes name, nvmlMemory_t, nvmlUtilization_t and the unsigned out-values", () => {
    expect(nvmlToAccelerator(devices[0], 0)).toEqual({
      vendor: "nvidia",
      name: "NVIDIA H200",
      utilizationRatio: 0,
      vramTotalBytes: 150754820096,
      vramUsedBytes: 548012032,
      gttTotalBytes: null,
      gttUsedBytes: null,
      powerWatts: 75.614,
      temperatureCelsius: 31,
      clockMhz: 345,
      unifiedMemory: false,
      source: "nvml",
    });
  });

  it("maps NOT_SUPPORTED return codes to null", () => {
    const a = nvmlToAccelerator(devices[1], 1);
    expect(a.powerWatts).toBeNull();
    expect(a.utilizationRatio).toBe(0.03);
    expect(a.clockMhz).toBe(1354);
  });

  it("opens to null where libnvidia-ml cannot be loaded", () => {
    expect(Nvml.open("/nonexistent/libnvidia-ml.so.1")).toBeNull();
  });
});

describe("Apple Silicon (recorded ioreg and macmon)", () => {
  it("combines ioreg's GPU with macmon's power, clock and temperature", () => {
    const gpu = parseIoregAccelerator(fixture("macos/ioreg.txt"));
    expect(gpu).toEqual({ model: "Apple M2 Max", cores: 38, utilizationRatio: 0.12, inUseBytes: 1190182912 });
    const mm = parseMacmon(fixture("macos/macmon.json"));
    expect(mm).toMatchObject({
      gpuUsage: 0.02,
      gpuMhz: 461,
      pcpuUsage: 0.04,
      ecpuUsage: 0.08,
      sysPower: 8.7,
      cpuTemp: 44.1,
    });
    const a = appleAccelerator(gpu, "Apple M2 Max", mm)!;
    expect(a).toMatchObject({
      vendor: "apple",
      name: "Apple M2 Max (38-core GPU)",
      utilizationRatio: 0.02,
      unifiedMemory: true,
      vramTotalBytes: null,
      source: "macmon",
    });
    expect(appleAccelerator(gpu, null, null)!.utilizationRatio).toBe(0.12);
    expect(appleAccelerator(null, null, null)).toBeNull();
  });

  it("reads RAM and swap from sysctl and vm_stat", () => {
    const m = parseDarwinMemory(
      fixture("macos/hw.memsize.txt"),
      fixture("macos/vm_stat.txt"),
      fixture("macos/swapusage.txt"),
    )!;
    expect(m.ramTotal).toBe(68719476736);
    expect(m.ramAvailable).toBe((1234567 + 700000 + 12345 + 20000) * 16384);
    expect(m.swapTotal).toBe(2048 * MIB);
    expect(m.swapAvailable).toBe(1023.5 * MIB);
  });
});

describe("procfs parsers", () => {
  it("meminfo without MemAvailable falls back to free + cached; without MemTotal is unmeasured", () => {
    expect(parseMeminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nCached: 50 kB\n")!.ramAvailable).toBe(
      150 * 1024,
    );
    expect(parseMeminfo("garbage")).toBeNull();
  });

  it("CPU busy share between two /proc/stat snapshots", () => {
    const a = parseProcStat("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\n")!;
    const b = parseProcStat("cpu  250 0 150 900 100 0 0 0 0 0\ncpu0 250 0 150 900 100 0 0 0 0 0\n")!;
    expect(a.cpus).toBe(1);
    expect(cpuUsage(a, b)).toBe(200 / 400);
    expect(cpuUsage(b, b)).toBeNull();
  });

  it("load average, CPU model, dpm clock, APU detection", () => {
    expect(parseLoadavg("0.5 0.25 0.1 1/2 3")).toEqual([0.5, 0.25, 0.1]);
    expect(parseLoadavg(null)).toBeNull();
    expect(parseCpuModel("processor : 0\nHardware\t: BCM2835\n")).toBe("BCM2835");
    expect(currentDpmClock("0: 500Mhz\n1: 1800Mhz *\n")).toBe(1800);
    expect(currentDpmClock(null)).toBeNull();
    // an unknown APU with GTT raised to most of RAM; a discrete card keeps GTT at half of RAM
    expect(isUnifiedAmd("0x9999", 512 * MIB, 120 * GIB, 125 * GIB)).toBe(true);
    expect(isUnifiedAmd("0x9999", 8 * GIB, 32 * GIB, 64 * GIB)).toBe(false);
  });
});

describe("usableMemory", () => {
  const acc = (o: Partial<Accelerator>): Accelerator => ({
    vendor: "nvidia",
    name: "gpu",
    utilizationRatio: null,
    vramTotalBytes: null,
    vramUsedBytes: null,
    gttTotalBytes: null,
    gttUsedBytes: null,
    powerWatts: null,
    temperatureCelsius: null,
    clockMhz: null,
    unifiedMemory: false,
    ...o,
  });
  const node = (
    ramTotal: number,
    ramAvail: number,
    accs: Accelerator[],
    backends?: string[],
  ): NodeReading => ({
    nodeId: "n",
    apiAddress: null,
    worker: true,
    identity: {
      modelId: "",
      chipId: "",
      friendlyName: "",
      osVersion: "",
      osBuildVersion: "",
      skulkVersion: "",
      skulkCommit: "",
    },
    memory: {
      ramTotal: bytes(ramTotal),
      ramAvailable: bytes(ramAvail),
      swapTotal: null,
      swapAvailable: null,
    },
    system: {
      gpuUsage: null,
      temp: null,
      sysPower: null,
      pcpuUsage: null,
      ecpuUsage: null,
      cpuCount: null,
      loadAverage: null,
      accelerator: accs[0] ?? null,
      accelerators: accs,
    },
    network: null,
    disk: null,
    engine: backends ? { llamaServer: null, llamaCppBuild: null, rpcProtocol: null, backends } : null,
  });
  const cases: [string, NodeReading, number | null, string, number | null][] = [
    ["CPU only: available RAM", node(64 * GIB, 40 * GIB, []), 40 * GIB, "cpu", null],
    [
      "Apple: RAM under Metal's 75% cap",
      node(64 * GIB, 60 * GIB, [acc({ vendor: "apple", unifiedMemory: true })]),
      48 * GIB,
      "apple-unified",
      null,
    ],
    [
      "Apple: available RAM when lower",
      node(64 * GIB, 20 * GIB, [acc({ vendor: "apple", unifiedMemory: true })]),
      20 * GIB,
      "apple-unified",
      null,
    ],
    [
      "discrete: VRAM free under 90%, RAM as offload",
      node(128 * GIB, 100 * GIB, [acc({ vramTotalBytes: 80 * GIB, vramUsedBytes: 1 * GIB })]),
      72 * GIB,
      "discrete",
      100 * GIB,
    ],
    [
      "two discrete GPUs add up",
      node(128 * GIB, 100 * GIB, [
        acc({ vramTotalBytes: 24 * GIB, vramUsedBytes: 10 * GIB }),
        acc({ vramTotalBytes: 24 * GIB, vramUsedBytes: 0 }),
      ]),
      14 * GIB + 24 * GIB * 0.9,
      "discrete",
      100 * GIB,
    ],
    [
      "APU: carve + GTT-backed RAM above 16 GiB headroom, capped by GTT",
      node(120 * GIB, 110 * GIB, [
        acc({
          vendor: "amd",
          vramTotalBytes: 1 * GIB,
          vramUsedBytes: 0,
          gttTotalBytes: 64 * GIB,
          unifiedMemory: true,
        }),
      ]),
      0.9 * GIB + 64 * GIB,
      "apu-unified",
      null,
    ],
    [
      "APU with little free RAM: the carve only",
      node(16 * GIB, 10 * GIB, [
        acc({
          vendor: "amd",
          vramTotalBytes: 2 * GIB,
          vramUsedBytes: 0,
          gttTotalBytes: 8 * GIB,
          unifiedMemory: true,
        }),
      ]),
      0.9 * 2 * GIB,
      "apu-unified",
      null,
    ],
    [
      "GB10 (unified, no framebuffer figure): the RAM pool",
      node(128 * GIB, 116 * GIB, [acc({ name: "NVIDIA GB10", unifiedMemory: true })]),
      100 * GIB,
      "apu-unified",
      null,
    ],
    ["GPU whose VRAM is not measured: CPU rule", node(32 * GIB, 30 * GIB, [acc({})]), 30 * GIB, "cpu", null],
    [
      "CPU-only engine: the GPU cannot hold the model",
      node(32 * GIB, 30 * GIB, [acc({ vramTotalBytes: 24 * GIB, vramUsedBytes: 0 })], ["llama_cpp-cpu"]),
      30 * GIB,
      "cpu",
      null,
    ],
  ];
  it.each(cases)("%s", (_why, r, want, rule, offload) => {
    const u = usableMemory(r);
    expect(u.bytes).toBeCloseTo(want!, 0);
    expect(u.rule).toBe(rule);
    expect(u.offloadBytes).toBe(offload);
  });

  it("is unknown when the node has not reported memory", () => {
    expect(usableMemory({ ...node(1, 1, []), memory: null })).toEqual({
      bytes: null,
      acceleratorBytes: null,
      offloadBytes: null,
      rule: "unknown",
    });
  });
});
