/**
 * Pure readings of one node from `/state` for the views: its name, role, health, memory, accelerators
 * and temperature. No DOM here, so the rules are unit-tested against real `stateToWire` output.
 */
import type { ClusterStateWire } from "./api.ts";

/** Every node the state mentions, in a stable order. */
export function nodeIds(s: ClusterStateWire): string[] {
  const ids = new Set<string>([
    ...s.topology.nodes,
    ...Object.keys(s.nodeIdentities),
    ...Object.keys(s.lastSeen),
  ]);
  return [...ids].sort((a, b) => nodeName(s, a).localeCompare(nodeName(s, b)) || a.localeCompare(b));
}

export function nodeName(s: ClusterStateWire, id: string): string {
  return s.nodeIdentities[id]?.friendlyName || id.slice(0, 12);
}

export function shortId(id: string): string {
  return id.length > 14 ? `${id.slice(0, 6)}…${id.slice(-6)}` : id;
}

/** The master's id when the state names it (upstream 1.3 /state does not; later versions may). */
export function masterOf(s: ClusterStateWire): string | null {
  return typeof s.masterNodeId === "string" ? s.masterNodeId : null;
}

export function isTimedOut(s: ClusterStateWire, id: string): boolean {
  return s.nodeHealth[id]?.reasons.some((r) => r.code === "unreachable") ?? false;
}

export function memoryOf(s: ClusterStateWire, id: string): { used: number; total: number } | null {
  const m = s.nodeMemory[id];
  if (!m) return null;
  return { used: m.ramTotal.inBytes - m.ramAvailable.inBytes, total: m.ramTotal.inBytes };
}

export function acceleratorsOf(s: ClusterStateWire, id: string) {
  const sys = s.nodeSystem[id];
  if (!sys) return [];
  return sys.accelerators.length ? sys.accelerators : sys.accelerator ? [sys.accelerator] : [];
}

/** The hottest measured reading: accelerators first, then the node's sensors, then its summary `temp`. */
export function temperatureOf(s: ClusterStateWire, id: string): number | null {
  const sys = s.nodeSystem[id];
  const acc = acceleratorsOf(s, id).map((a) => a.temperatureCelsius).filter((t): t is number => t !== null);
  if (acc.length) return Math.max(...acc);
  const sensors = (sys?.temperatures ?? []).map((t) => t.celsius);
  return sensors.length ? Math.max(...sensors) : sys?.temp ?? null;
}

export function freeMemory(s: ClusterStateWire): number {
  return nodeIds(s).filter((id) => !isTimedOut(s, id)).reduce(
    (n, id) => n + (s.nodeMemory[id]?.ramAvailable.inBytes ?? 0),
    0,
  );
}
