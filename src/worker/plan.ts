/**
 * The worker's plan, pure: from the cluster state and what runs here, which runners this node must start
 * and which it must stop. The executor (worker.ts) carries the actions out; tests drive this table-first.
 */
import { type Instance, instanceBody, type ShardMetadata } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";

export type LocalPhase = "starting" | "ready" | "failed" | "stopping";

export interface LocalRunnerView {
  runnerId: string;
  instanceId: string;
  phase: LocalPhase;
}

export type WorkerAction =
  | { kind: "start"; runnerId: string; instanceId: string; instance: Instance; shard: ShardMetadata }
  | { kind: "stop"; runnerId: string; reason: string };

export function planWorker(state: ClusterState, nodeId: string, local: LocalRunnerView[]): WorkerAction[] {
  const actions: WorkerAction[] = [];
  const wanted = new Map<string, { instanceId: string; instance: Instance; shard: ShardMetadata }>();
  for (const [instanceId, instance] of Object.entries(state.instances)) {
    const body = instanceBody(instance);
    const runnerId = body.shardAssignments.nodeToRunner[nodeId];
    if (!runnerId) continue;
    const shard = body.shardAssignments.runnerToShard[runnerId];
    if (shard) wanted.set(runnerId, { instanceId, instance, shard });
  }
  const here = new Map(local.map((r) => [r.runnerId, r]));
  for (const r of local) {
    if (!wanted.has(r.runnerId) && r.phase !== "stopping") {
      actions.push({
        kind: "stop",
        runnerId: r.runnerId,
        reason: `instance ${r.instanceId} is no longer placed`,
      });
    }
  }
  for (const [runnerId, w] of [...wanted.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    if (here.has(runnerId)) continue;
    const status = state.runners[runnerId];
    // A runner the cluster already saw fail is not restarted behind the operator's back.
    if (status && "RunnerFailed" in status) continue;
    actions.push({ kind: "start", runnerId, ...w });
  }
  return actions;
}
