/**
 * Typed network interfaces: Linux from sysfs (`/sys/class/net/<if>`), macOS from `networksetup
 * -listallhardwareports`; the donor-traffic preference order; sorted so an unchanged reading compares equal.
 */
import type { InterfaceType, NetworkInterface } from "./reading.ts";
import type { FsRoot } from "./root.ts";

export interface Address {
  name: string;
  address: string;
  family: "IPv4" | "IPv6";
}

/** Tailscale hands out CGNAT 100.64.0.0/10 and fd7a:115c:a1e0::/48 whatever the interface is called. */
export function isTailscaleAddress(addr: string): boolean {
  const v4 = addr.match(/^(\d+)\.(\d+)\.\d+\.\d+$/);
  if (v4) return Number(v4[1]) === 100 && Number(v4[2]) >= 64 && Number(v4[2]) <= 127;
  return addr.toLowerCase().startsWith("fd7a:115c:a1e0:");
}

const VPN_NAME = /^(tailscale|wg|tun|tap|utun|ppp|ipsec|zt|nordlynx|mullvad|proton|vti|gpd|cscotun)/;

export interface LinuxInterfaceFacts {
  name: string;
  /** `/sys/class/net/<if>/wireless` exists. */
  wireless: boolean;
  /** Target of `device/driver` (e.g. `../../../../bus/thunderbolt/drivers/thunderbolt-net`). */
  driver: string | null;
  /** `/sys/class/net/<if>/device` exists: backed by hardware, not a virtual interface. */
  hasDevice: boolean;
  /** DEVTYPE from the interface's uevent (wlan, wireguard, bridge, ...). */
  devtype: string | null;
}

/** Linux typing; first match wins: Wi-Fi, Thunderbolt/USB4, wired Ethernet, VPN, else unknown. */
export function typeLinuxInterface(f: LinuxInterfaceFacts, address: string): InterfaceType {
  if (f.wireless || f.devtype === "wlan") return "wifi";
  if (f.driver?.includes("thunderbolt") || /^(thunderbolt|tb)/.test(f.name)) return "thunderbolt";
  if (/^(en|eth)/.test(f.name) && f.hasDevice) return "ethernet";
  if (VPN_NAME.test(f.name) || f.devtype === "wireguard" || isTailscaleAddress(address)) return "vpn";
  return "unknown";
}

export function linuxInterfaceFacts(fs: FsRoot, name: string): LinuxInterfaceFacts {
  const dir = `sys/class/net/${name}`;
  return {
    name,
    wireless: fs.exists(`${dir}/wireless`),
    driver: fs.link(`${dir}/device/driver`),
    hasDevice: fs.exists(`${dir}/device`),
    devtype: fs.text(`${dir}/uevent`)?.match(/^DEVTYPE=(.+)$/m)?.[1].trim() ?? null,
  };
}

/** `networksetup -listallhardwareports`: "Hardware Port: Wi-Fi / Device: en0" blocks -> device -> port. */
export function parseHardwarePorts(text: string): Map<string, string> {
  const ports = new Map<string, string>();
  let port: string | null = null;
  for (const line of text.split("\n")) {
    const p = line.match(/^Hardware Port:\s*(.+)$/);
    if (p) port = p[1].trim();
    const d = line.match(/^Device:\s*(\S+)/);
    if (d && port !== null) {
      ports.set(d[1], port);
      port = null;
    }
  }
  return ports;
}

/**
 * macOS typing as upstream: Wi-Fi, Thunderbolt ports, Ethernet/LAN ports (an enX past en1 whose port is
 * just "Ethernet" may be a dock or adapter: maybe_ethernet), then VPNs by name or Tailscale address.
 */
export function typeDarwinInterface(name: string, port: string | undefined, address: string): InterfaceType {
  if (port !== undefined) {
    if (port.includes("Wi-Fi") || port.includes("AirPort")) return "wifi";
    if (port.startsWith("Thunderbolt")) return "thunderbolt";
    if (port.includes("Ethernet") || port.includes("LAN")) {
      const n = name.match(/^en(\d+)$/);
      return port === "Ethernet" && n && Number(n[1]) > 1 ? "maybe_ethernet" : "ethernet";
    }
  }
  if (VPN_NAME.test(name) || isTailscaleAddress(address)) return "vpn";
  return "unknown";
}

/** Loopback and IPv6 link-local (unusable without a scope) are left out; IPv4 link-local stays. */
export function reportable(a: Address): boolean {
  if (a.family === "IPv4") return !a.address.startsWith("127.");
  const lower = a.address.toLowerCase();
  return lower !== "::1" && !/^fe[89ab]/.test(lower);
}

export function sortInterfaces(list: NetworkInterface[]): NetworkInterface[] {
  return [...list].sort((a, b) =>
    a.name < b.name
      ? -1
      : a.name > b.name
      ? 1
      : a.ipAddress < b.ipAddress
      ? -1
      : a.ipAddress > b.ipAddress
      ? 1
      : 0
  );
}

export function linuxInterfaces(fs: FsRoot, addresses: Address[]): NetworkInterface[] {
  const facts = new Map<string, LinuxInterfaceFacts>();
  return sortInterfaces(
    addresses.filter(reportable).map((a) => {
      const f = facts.get(a.name) ?? linuxInterfaceFacts(fs, a.name);
      facts.set(a.name, f);
      return { name: a.name, ipAddress: a.address, interfaceType: typeLinuxInterface(f, a.address) };
    }),
  );
}

export function darwinInterfaces(hardwarePorts: string | null, addresses: Address[]): NetworkInterface[] {
  const ports = parseHardwarePorts(hardwarePorts ?? "");
  return sortInterfaces(
    addresses.filter(reportable).map((a) => ({
      name: a.name,
      ipAddress: a.address,
      interfaceType: typeDarwinInterface(a.name, ports.get(a.name), a.address),
    })),
  );
}

const PREFERENCE: Record<InterfaceType, number> = {
  thunderbolt: 0,
  ethernet: 1,
  maybe_ethernet: 2,
  wifi: 3,
  unknown: 4,
  vpn: 5,
};

/** Rank for donor traffic, lower is better: Thunderbolt, Ethernet (then maybe-Ethernet), Wi-Fi, unknown, VPN. */
export function linkPreference(type: InterfaceType): number {
  return PREFERENCE[type];
}

/** This machine's first IPv4 address that other machines could reach (not loopback, not link-local). */
export function firstIpv4(): string | null {
  return Deno.networkInterfaces().find((i) =>
    i.family === "IPv4" && !i.address.startsWith("127.") && !i.address.startsWith("169.254.")
  )?.address ?? null;
}
