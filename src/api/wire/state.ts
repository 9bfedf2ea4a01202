/**
 * `GET /state` in upstream's wire form: the replicated ClusterState plus the telemetry maps, filtered to
 * nodes that are seen, plus `nodeHealth`. Pure: the same state, telemetry and clock give the same JSON.
 */
import type { ClusterState } from "../../cluster/state.ts";
import type { TelemetryEntry } from "../../cluster/telemetry.ts";
import { tasksOf } from "../../serving/running.ts";
import type { NodeReading } from "../../telemetry/reading.ts";

export interface HealthReason {
  code: "download_failed" | "disk_low" | "disk_full" | "unreachable";
  message: string;
  remediation: string;
}

const GB = 1_000_000_000;

export function nodeHealth(
  nodeId: string,
  reading: NodeReading,
  receivedAt: number,
  state: ClusterState,
  now: number,
) {
  const reasons: (HealthReason & { level: "warn" | "error" })[] = [];
  for (const p of state.downloads[nodeId] ?? []) {
    if ("DownloadFailed" in p) {
      reasons.push({
        level: "error",
        code: "download_failed",
        message: `download failed: ${p.DownloadFailed.errorMessage}`,
        remediation: "retry the download or place the model elsewhere",
      });
    }
  }
  const avail = reading.disk?.available.inBytes;
  if (avail !== undefined && avail <= 2 * GB) {
    reasons.push({
      level: "error",
      code: "disk_full",
      message: `${(avail / GB).toFixed(1)} GB free`,
      remediation: "free disk space where models are stored",
    });
  } else if (avail !== undefined && avail < 10 * GB) {
    reasons.push({
      level: "warn",
      code: "disk_low",
      message: `${(avail / GB).toFixed(1)} GB free`,
      remediation: "free disk space where models are stored",
    });
  }
  const silent = (now - receivedAt) / 1000;
  if (silent > 15) {
    reasons.push({
      level: "warn",
      code: "unreachable",
      message: `not heard from for ${Math.round(silent)} s`,
      remediation: "check the node is running and reachable",
    });
  }
  const level = reasons.some((r) => r.level === "error") ? "error" : reasons.length ? "warn" : "ok";
  return { level, reasons: reasons.map(({ level: _l, ...r }) => r) };
}

/** "host:port" or "[v6]:port" as upstream's multiaddr edge; null when it is neither. */
function sinkMultiaddr(address: string) {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(address);
  if (!m) return null;
  const v6 = m[1].includes(":");
  return {
    address: `/${v6 ? "ip6" : "ip4"}/${m[1]}/tcp/${m[2]}`,
    address_type: v6 ? "ip6" : "ip4",
    ip_address: m[1],
    port: Number(m[2]),
  };
}

/**
 * Upstream's `topology`: the nodes seen, and a directed edge from each node to every peer it measured a
 * link to (its last gossip round trip; `rttMs` and `measuredAt` are ours), from the gossiped readings.
 */
export function topologyOf(telemetry: [string, TelemetryEntry][]) {
  const seen = new Set(telemetry.map(([id]) => id));
  const connections: Record<string, Record<string, unknown[]>> = {};
  for (const [src, e] of telemetry) {
    for (const l of e.reading.links ?? []) {
      const sink = sinkMultiaddr(l.address);
      if (!sink || !seen.has(l.nodeId) || l.nodeId === src) continue;
      (connections[src] ??= {})[l.nodeId] = [{
        sinkMultiaddr: sink,
        rttMs: l.rttMs,
        measuredAt: l.measuredAt,
      }];
    }
  }
  return { nodes: [...seen], connections };
}

/** `masterNodeId` is ours (upstream's /state has no role field): the master this node follows, null while none. */
export function stateToWire(
  state: ClusterState,
  telemetry: [string, TelemetryEntry][],
  now: number,
  masterNodeId: string | null = null,
) {
  const pick = <T>(f: (r: NodeReading) => T | null) =>
    Object.fromEntries(telemetry.flatMap(([id, e]) => {
      const v = f(e.reading);
      return v === null ? [] : [[id, v]];
    }));
  return {
    instances: state.instances,
    runners: state.runners,
    downloads: state.downloads,
    // Serving tasks are not events here: each node reports the requests its engines run (gossiped readings).
    tasks: {
      ...state.tasks,
      ...tasksOf(telemetry.flatMap(([, e]) => e.reading.running ?? []), state.tracingEnabled),
    },
    lastSeen: Object.fromEntries(telemetry.map(([id, e]) => [id, new Date(e.receivedAt).toISOString()])),
    topology: topologyOf(telemetry),
    tracingEnabled: state.tracingEnabled,
    lastEventAppliedIdx: state.lastEventAppliedIdx,
    masterNodeId,
    nodeNetwork: pick((r) => r.network),
    nodeThunderbolt: {},
    nodeThunderboltBridge: {},
    thunderboltBridgeCycles: [],
    nodeMemory: pick((r) => r.memory),
    nodeSystem: pick((r) => r.system),
    nodeIdentities: pick((r) => r.identity),
    nodeDisk: pick((r) => r.disk),
    nodeRdmaCtl: {},
    nodeEngines: pick((r) => r.engine),
    nodeHealth: Object.fromEntries(
      telemetry.map(([id, e]) => [id, nodeHealth(id, e.reading, e.receivedAt, state, now)]),
    ),
  };
}
