/**
 * Where an engine may listen: one literal IP address (canonical IPv4 dotted quad or an IPv6 literal) that
 * is loopback or on one of this node's interfaces, never a wildcard in any spelling. Pure.
 */
import { z } from "zod";

export type IpLiteral = { family: 4 | 6; address: string };

// zod's IPv4 check takes the canonical dotted quad only (no `0`, `0x0`, `127.1`, `0177.0.0.1`), which
// is the point: inet_aton reads those shorthands as addresses, so a text check on them is no check.
const IPV4 = z.ipv4();
const IPV6 = z.ipv6();

/**
 * The address in canonical form (IPv6 as RFC 5952 writes it, via the URL parser), or why it is not a
 * literal IP address. Brackets, zone ids, hostnames and numeric shorthands are all refused.
 */
export function parseIpLiteral(text: string): IpLiteral | { error: string } {
  if (IPV4.safeParse(text).success) return { family: 4, address: text };
  if (IPV6.safeParse(text).success) {
    try {
      return { family: 6, address: new URL(`http://[${text}]/`).hostname.slice(1, -1) };
    } catch { /* zod and the URL parser disagree: treat as not a literal */ }
  }
  return {
    error:
      "not a literal IP address (an IPv4 dotted quad like 10.0.0.2 or an IPv6 address like fd00::2; no brackets, hostnames or shorthands)",
  };
}

export function isLoopback(ip: IpLiteral): boolean {
  return ip.family === 4 ? ip.address.startsWith("127.") : ip.address === "::1";
}

/**
 * Why this address is a wildcard or stands for one, else null: 0.0.0.0/8 ("this network"), `::`, and any
 * IPv4-mapped IPv6 address (`::ffff:0.0.0.0` binds every IPv4 address on a dual-stack socket).
 */
export function wildcardReason(ip: IpLiteral): string | null {
  if (ip.family === 4 && ip.address.startsWith("0.")) {
    return `${ip.address} is the IPv4 wildcard ("this network"): it would listen on every interface`;
  }
  if (ip.family === 6 && ip.address === "::") {
    return ":: is the IPv6 wildcard: it would listen on every interface";
  }
  if (ip.family === 6 && /^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(ip.address)) {
    return `${ip.address} is an IPv4-mapped IPv6 address: give the IPv4 address itself`;
  }
  return null;
}

/** Canonical forms of the addresses a node reports (telemetry), skipping anything unparseable. */
export function canonicalAddresses(addresses: string[]): Set<string> {
  const out = new Set<string>();
  for (const a of addresses) {
    const ip = parseIpLiteral(a);
    if ("address" in ip) out.add(ip.address);
  }
  return out;
}

/**
 * Null when an engine may bind `host` on a node whose interfaces carry `local` (its telemetry's
 * addresses); otherwise the reason, naming the host. Loopback is always allowed.
 */
export function bindRefusal(host: string, local: string[], node = "this node"): string | null {
  const ip = parseIpLiteral(host);
  const shown = `refusing to bind '${host.slice(0, 64)}'`;
  if ("error" in ip) return `${shown}: ${ip.error}`;
  const wild = wildcardReason(ip);
  if (wild) return `${shown}: ${wild}`;
  if (isLoopback(ip) || canonicalAddresses(local).has(ip.address)) return null;
  return `${shown}: it is not an address of ${node} (its telemetry reports ${
    [...canonicalAddresses(local)].join(", ") || "no interface addresses"
  }; loopback is always allowed)`;
}

/** The addresses a node's own telemetry reports on its interfaces (none when it has not reported). */
export function reportedAddresses(
  network: { interfaces: { ipAddress: string }[] } | null | undefined,
): string[] {
  return (network?.interfaces ?? []).map((i) => i.ipAddress);
}
