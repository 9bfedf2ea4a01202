/**
 * Which engine answers a request for a model: pure over the cluster state. Picks an instance of the model
 * whose runners are all ready (preferring one driven by this node) and names its driver node and runner.
 */
import { instanceBody } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import { tagOf, untag } from "../cluster/tagged.ts";

export interface Target {
  instanceId: string;
  driverNode: string;
  runnerId: string;
  contextTokenLimit: number | null;
}

export type TargetResult =
  | { ok: true; target: Target }
  | { ok: false; status: 404 | 503; message: string };

const READY = new Set(["RunnerReady", "RunnerRunning"]);

export function resolveTarget(state: ClusterState, modelId: string, selfNodeId: string): TargetResult {
  const candidates = Object.entries(state.instances).filter(([, i]) =>
    instanceBody(i).shardAssignments.modelId === modelId
  );
  if (candidates.length === 0) {
    return { ok: false, status: 404, message: `No instance found for model ${modelId}` };
  }
  const described: string[] = [];
  const ready: Target[] = [];
  for (const [instanceId, inst] of candidates) {
    const body = instanceBody(inst);
    const nodes = Object.keys(body.shardAssignments.nodeToRunner);
    const driverNode = "LlamaRpcInstance" in inst ? inst.LlamaRpcInstance.driverNode : nodes.sort((a, b) => {
      const ra = untag(body.shardAssignments.runnerToShard[body.shardAssignments.nodeToRunner[a]]).deviceRank;
      const rb = untag(body.shardAssignments.runnerToShard[body.shardAssignments.nodeToRunner[b]]).deviceRank;
      return ra - rb;
    })[0];
    const runnerId = body.shardAssignments.nodeToRunner[driverNode];
    const statuses = Object.keys(body.shardAssignments.runnerToShard).map((r) => state.runners[r]);
    if (statuses.every((s) => s && READY.has(tagOf(s)))) {
      ready.push({ instanceId, driverNode, runnerId, contextTokenLimit: body.contextTokenLimit });
      continue;
    }
    const failed = statuses.find((s) => s && "RunnerFailed" in s);
    if (failed && "RunnerFailed" in failed) {
      described.push(
        `instance ${instanceId} failed: ${failed.RunnerFailed.errorMessage ?? "no reason given"}`,
      );
    } else {
      const phase = statuses.map((s) => (s ? tagOf(s) : "RunnerIdle")).find((t) => !READY.has(t)) ??
        "RunnerIdle";
      described.push(`instance ${instanceId} is not ready yet (${phase}); retry shortly`);
    }
  }
  if (ready.length === 0) {
    return { ok: false, status: 503, message: `model ${modelId} cannot serve now: ${described.join("; ")}` };
  }
  ready.sort((a, b) =>
    Number(b.driverNode === selfNodeId) - Number(a.driverNode === selfNodeId) ||
    a.instanceId.localeCompare(b.instanceId)
  );
  return { ok: true, target: ready[0] };
}
