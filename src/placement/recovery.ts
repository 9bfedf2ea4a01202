/**
 * Refusal recovery policy (pure): when a node refuses its shard, retry on one node without the refuser,
 * else one node wider without it, within a bounded number of hops; otherwise tear down and cancel downloads.
 */
import type { Event } from "../cluster/events.ts";
import { type Instance, instanceBody, instanceKind } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { ModelCard } from "../models/card.ts";
import { type PlacementRequest, plan, type PlanDeps } from "./planner.ts";
import { isRefusal, REFUSAL_PREFIX } from "./shard-check.ts";
import type { ClusterView } from "./view.ts";

/** Recovery placements one original placement may spawn. Exclusions only grow, so this also bounds by cluster size. */
export const MAX_RECOVERY_HOPS = 2;

/** What the master remembers about a placement's lineage (carried from the refused instance to its replacement). */
export interface Lineage {
  /** The request the user made. */
  original: PlacementRequest;
  /** Recovery placements already made in this lineage. */
  hops: number;
  /** Every node that refused in this lineage, plus the user's exclusions. */
  excluded: string[];
}

export interface Refusal {
  instance: Instance;
  nodeId: string;
  reason: string;
}

/** One line for the `instances` history. */
export interface HistoryStep {
  instanceId: string | null;
  outcome: "replaced" | "failed" | "placed";
  reason: string;
}

export type RecoveryDecision =
  | {
    action: "replace";
    /** Delete this instance (with `deleteReason`), then create `instance`. */
    deleteReason: string;
    instance: Instance;
    request: PlacementRequest;
    lineage: Lineage;
    /** Nodes whose downloads of the model the new placement no longer needs. */
    cancelDownloadsOn: string[];
    history: HistoryStep[];
  }
  | { action: "tear-down"; deleteReason: string; cancelDownloadsOn: string[]; history: HistoryStep[] };

export function lineageFor(request: PlacementRequest): Lineage {
  return { original: request, hops: 0, excluded: [...request.excluded_nodes] };
}

function nodesOf(instance: Instance): string[] {
  return Object.keys(instanceBody(instance).shardAssignments.nodeToRunner);
}

/** Nodes of the old placement that hold a partial (or any) download the new placement will not use. */
function downloadsToCancel(
  view: ClusterView,
  modelId: string,
  oldNodes: string[],
  keep: Set<string>,
): string[] {
  return oldNodes.filter((n) =>
    !keep.has(n) && view.downloads[n]?.[modelId] !== undefined && view.downloads[n][modelId] < 1
  )
    .sort();
}

/** Decides what follows a refusal. Pure: the same inputs always give the same decision. */
export function recoverFromRefusal(
  refusal: Refusal,
  lineage: Lineage,
  view: ClusterView,
  card: ModelCard,
  deps: PlanDeps,
): RecoveryDecision {
  const body = instanceBody(refusal.instance);
  const oldNodes = nodesOf(refusal.instance);
  const width = oldNodes.length;
  const refused = `node ${refusal.nodeId} refused its shard of ${card.model_id}: ${refusal.reason}`;
  const excluded = [...new Set([...lineage.excluded, refusal.nodeId])].sort();
  const history: HistoryStep[] = [{ instanceId: body.instanceId, outcome: "replaced", reason: refused }];
  const tearDown = (why: string): RecoveryDecision => ({
    action: "tear-down",
    deleteReason: `${refused}; ${why}`,
    cancelDownloadsOn: downloadsToCancel(view, card.model_id, oldNodes, new Set()),
    history: [{ instanceId: body.instanceId, outcome: "failed", reason: `${refused}; ${why}` }],
  });
  if (lineage.hops >= MAX_RECOVERY_HOPS) {
    return tearDown(`giving up after ${lineage.hops} recovery placement(s)`);
  }
  const base = lineage.original;
  const attempts: { request: PlacementRequest; label: string }[] = [
    {
      request: { ...base, min_nodes: 1, max_nodes: 1, excluded_nodes: excluded, required_nodes: [] },
      label: "one node",
    },
    {
      request: {
        ...base,
        min_nodes: width + 1,
        max_nodes: width + 1,
        excluded_nodes: excluded,
        required_nodes: [],
      },
      label: `${width + 1} nodes`,
    },
  ];
  const errors: string[] = [];
  for (const a of attempts) {
    // A single-node sharding/meta choice of the original must not veto the one-node retry.
    const req = a.request.min_nodes === 1
      ? { ...a.request, sharding: "Pipeline" as const, instance_meta: "MlxRing" as const }
      : a.request;
    const r = plan(view, card, req, deps);
    if (r.ok) {
      const placed = r.placement;
      const newId = instanceBody(placed.instance).instanceId;
      const kind = instanceKind(placed.instance);
      const reason =
        `recovery ${lineage.hops + 1}/${MAX_RECOVERY_HOPS} after ${refused}: placed on ${a.label} ` +
        `(${placed.nodes.join(", ")}, ${kind}) excluding ${excluded.join(", ")}`;
      history.push({ instanceId: newId, outcome: "placed", reason });
      return {
        action: "replace",
        deleteReason: `${refused}; replaced by ${newId}`,
        instance: placed.instance,
        request: req,
        lineage: { original: base, hops: lineage.hops + 1, excluded },
        cancelDownloadsOn: downloadsToCancel(view, card.model_id, oldNodes, new Set(placed.nodes)),
        history,
      };
    }
    errors.push(`${a.label}: ${r.error}`);
  }
  return tearDown(`no recovery placement: ${errors.join("; ")}`);
}

/** The refusal an applied event reports: a runner failed with the refusal prefix (see shard-check.ts). */
export function refusalOf(event: Event, state: ClusterState): (Refusal & { instanceId: string }) | null {
  if (!("RunnerStatusUpdated" in event)) return null;
  const { runnerId, runnerStatus } = event.RunnerStatusUpdated;
  if (!("RunnerFailed" in runnerStatus) || !isRefusal(runnerStatus.RunnerFailed.errorMessage)) return null;
  for (const [instanceId, instance] of Object.entries(state.instances)) {
    const body = instanceBody(instance);
    if (!(runnerId in body.shardAssignments.runnerToShard)) continue;
    const nodeId = Object.entries(body.shardAssignments.nodeToRunner).find(([, r]) => r === runnerId)?.[0];
    if (!nodeId) return null;
    const reason = (runnerStatus.RunnerFailed.errorMessage ?? "").slice(REFUSAL_PREFIX.length);
    return { instanceId, instance, nodeId, reason };
  }
  return null;
}
