/**
 * Which engines can answer a request for a model: pure over the cluster state. Lists the instances of the
 * model whose runners are all ready, each with its driver node and runner (serving/balance.ts picks one).
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

export type TargetsResult =
  | { ok: true; targets: Target[] }
  | { ok: false; status: 404 | 503; message: string };

/** Every ready instance of the model, by instance id; or why none can serve (404 none placed, 503 not ready). */
export function readyTargets(state: ClusterState, modelId: string): TargetsResult {
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
  return { ok: true, targets: ready.sort((a, b) => a.instanceId.localeCompare(b.instanceId)) };
}

/** One ready instance, preferring one this node drives (routes with no load to balance: speech, loads). */
export function resolveTarget(state: ClusterState, modelId: string, selfNodeId: string): TargetResult {
  const r = readyTargets(state, modelId);
  if (!r.ok) return r;
  const local = r.targets.find((t) => t.driverNode === selfNodeId);
  return { ok: true, target: local ?? r.targets[0] };
}
