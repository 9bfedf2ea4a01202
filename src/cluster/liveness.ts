/**
 * Liveness as a pure rule: which nodes the master times out, judged by telemetry freshness. A node the
 * master has never heard from counts from the moment it became master, so a fresh master waits a full timeout.
 */
import type { ClusterState } from "./state.ts";
import { instanceBody } from "./instances.ts";

export interface LivenessInput {
  selfId: string;
  /** Last time each known node's heartbeat advanced (local ms). */
  heard: Record<string, number>;
  state: ClusterState;
  masterSince: number;
  now: number;
  timeoutMs: number;
}

export function nodesInState(state: ClusterState): string[] {
  // Voters too: a voter no master has heard from since it was elected must leave the majority in time.
  const ids = new Set<string>([...Object.keys(state.downloads), ...(state.voters ?? [])]);
  for (const i of Object.values(state.instances)) {
    for (const n of Object.keys(instanceBody(i).shardAssignments.nodeToRunner)) {
      ids.add(n);
    }
  }
  return [...ids];
}

export function timedOut(i: LivenessInput): string[] {
  const ids = new Set([...Object.keys(i.heard), ...nodesInState(i.state)]);
  ids.delete(i.selfId);
  return [...ids].filter((id) => i.now - Math.max(i.heard[id] ?? -Infinity, i.masterSince) > i.timeoutMs)
    .sort();
}
