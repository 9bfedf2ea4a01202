/**
 * Healing policy (pure): which applied event breaks which pooled instance, and what follows: tear the
 * whole instance down and place it again (one node if it now fits, else a pool without the dead node),
 * within a bounded number of attempts, each step with its reason for the `instances` history.
 */
import type { Event } from "../cluster/events.ts";
import { eventType } from "../cluster/events.ts";
import { type Instance, instanceBody, instanceKind } from "../cluster/instances.ts";
import { type ClusterState, withoutInstance } from "../cluster/state.ts";
import { tagOf } from "../cluster/tagged.ts";
import type { ModelCard } from "../models/card.ts";
import { type PlacementRequest, placementRequest, plan, type PlanDeps } from "../placement/planner.ts";
import { isRefusal } from "../placement/shard-check.ts";
import type { ClusterView } from "../placement/view.ts";

/** Re-placements one lineage may make before it gives up and says why. */
export const MAX_HEAL_ATTEMPTS = 3;
/** An instance that served this long has healed: its next breakage starts a fresh count. */
export const HEALED_AFTER_MS = 30_000;

/** What the master remembers about an instance it placed by healing. */
export interface Lineage {
  /** Re-placements made so far in this lineage. */
  attempts: number;
  /** When every runner of the current instance was first ready (null while it loads). */
  readySince: number | null;
}

export interface Breakage {
  instanceId: string;
  instance: Instance;
  /** The node whose engine died or which timed out: the next placement leaves it out. */
  deadNode: string;
  reason: string;
  /** NodeTimedOut already removed the instance from the state; a failed runner's instance still needs deleting. */
  alreadyDeleted: boolean;
}

function firstLine(s: string | null): string {
  return (s ?? "no reason given").split("\n")[0].slice(0, 300);
}

/**
 * The breakages an applied event causes. Pooled instances always heal; a single-node instance heals
 * when `tracked` (it was itself placed by healing), otherwise its failure stays visible as it was.
 */
export function breakagesOf(
  event: Event,
  before: ClusterState,
  after: ClusterState,
  tracked: ReadonlySet<string>,
): Breakage[] {
  const heals = (id: string, i: Instance) => instanceKind(i) === "LlamaRpc" || tracked.has(id);
  const type = eventType(event);
  if (type === "RunnerStatusUpdated") {
    const { runnerId, runnerStatus } =
      (event as Extract<Event, { RunnerStatusUpdated: unknown }>).RunnerStatusUpdated;
    // A refusal (the node's own memory check said no) is recovered by placement/recovery.ts, not here.
    if (!("RunnerFailed" in runnerStatus) || isRefusal(runnerStatus.RunnerFailed.errorMessage)) return [];
    // Only the first failure of an instance counts: `before` must not have seen one yet.
    for (const [id, inst] of Object.entries(after.instances)) {
      const body = instanceBody(inst);
      if (!(runnerId in body.shardAssignments.runnerToShard) || !heals(id, inst)) continue;
      const seen = Object.keys(body.shardAssignments.runnerToShard).some((r) => {
        const s = before.runners[r];
        return s !== undefined && tagOf(s) === "RunnerFailed";
      });
      if (seen) return [];
      const node = Object.entries(body.shardAssignments.nodeToRunner).find(([, r]) => r === runnerId)?.[0] ??
        "?";
      const role = "LlamaRpcInstance" in inst
        ? (inst.LlamaRpcInstance.driverNode === node ? "the driver" : "donor")
        : "the engine";
      return [{
        instanceId: id,
        instance: inst,
        deadNode: node,
        reason: `${role} on node ${node} failed: ${firstLine(runnerStatus.RunnerFailed.errorMessage)}`,
        alreadyDeleted: false,
      }];
    }
    return [];
  }
  if (type === "NodeTimedOut") {
    const { nodeId } = (event as Extract<Event, { NodeTimedOut: unknown }>).NodeTimedOut;
    return Object.entries(before.instances)
      .filter(([id, i]) => nodeId in instanceBody(i).shardAssignments.nodeToRunner && heals(id, i))
      .map(([id, i]) => ({
        instanceId: id,
        instance: i,
        deadNode: nodeId,
        reason: `node ${nodeId} timed out`,
        alreadyDeleted: true,
      }));
  }
  return [];
}

export type HealDecision =
  | {
    action: "replace";
    /** Null when the instance is already gone (NodeTimedOut). */
    deleteReason: string | null;
    instance: Instance;
    createReason: string;
    lineage: Lineage;
  }
  | { action: "give-up"; deleteReason: string | null; why: string };

/** The requests healing tries, in order: one node, a pool as wide as before, any pool; never the dead node. */
export function healingRequests(b: Breakage): { label: string; request: PlacementRequest }[] {
  const modelId = instanceBody(b.instance).shardAssignments.modelId;
  const width = Object.keys(instanceBody(b.instance).shardAssignments.nodeToRunner).length;
  const excluded_nodes = [b.deadNode];
  const out = [
    { label: "one node", request: placementRequest(modelId, { min_nodes: 1, max_nodes: 1, excluded_nodes }) },
  ];
  if (width > 2) {
    out.push({
      label: `a pool of ${width}`,
      request: placementRequest(modelId, {
        instance_meta: "LlamaRpc",
        min_nodes: width,
        max_nodes: width,
        excluded_nodes,
      }),
    });
  }
  out.push({
    label: "a pool",
    request: placementRequest(modelId, { instance_meta: "LlamaRpc", min_nodes: 2, excluded_nodes }),
  });
  return out;
}

/**
 * What follows a breakage. `view` must already leave the broken instance out (its memory and ports are
 * about to be freed). Pure: the same inputs and id sequence give the same decision.
 */
export function decideHealing(
  b: Breakage,
  lineage: Lineage | undefined,
  view: ClusterView,
  card: ModelCard,
  now: number,
  deps: PlanDeps,
): HealDecision {
  const fresh = !lineage || (lineage.readySince !== null && now - lineage.readySince >= HEALED_AFTER_MS);
  const attempts = fresh ? 0 : lineage.attempts;
  const del = (tail: string) => (b.alreadyDeleted ? null : `healing: ${b.reason}; ${tail}`);
  if (attempts >= MAX_HEAL_ATTEMPTS) {
    const why = `gave up after ${attempts} re-placement(s) that did not hold: ${b.reason}`;
    return { action: "give-up", deleteReason: del(why), why };
  }
  const errors: string[] = [];
  for (const { label, request } of healingRequests(b)) {
    const r = plan(view, card, request, deps);
    if (!r.ok) {
      errors.push(`${label}: ${r.error}`);
      continue;
    }
    const p = r.placement;
    const newId = instanceBody(p.instance).instanceId;
    const attempt = `attempt ${attempts + 1}/${MAX_HEAL_ATTEMPTS}`;
    const where = `${label} (${p.nodes.join(", ")}, ${instanceKind(p.instance)}) without ${b.deadNode}`;
    return {
      action: "replace",
      deleteReason: del(`torn down; replaced by ${newId} on ${where}, ${attempt}`),
      instance: p.instance,
      createReason: `heals ${b.instanceId} after ${b.reason}: placed on ${where}, ${attempt}`,
      lineage: { attempts: attempts + 1, readySince: null },
    };
  }
  const why = `no re-placement without ${b.deadNode}: ${errors.join("; ")}`;
  return { action: "give-up", deleteReason: del(why), why };
}

/** The lineage an `InstanceCreated` carries when healing placed it (its reason names the attempt). */
export function lineageOfCreated(event: Event): { instanceId: string; lineage: Lineage } | null {
  if (eventType(event) !== "InstanceCreated") return null;
  const { instance, reason } = (event as Extract<Event, { InstanceCreated: unknown }>).InstanceCreated;
  const m = reason ? /^heals .*, attempt (\d+)\/\d+$/.exec(reason) : null;
  return m
    ? { instanceId: instanceBody(instance).instanceId, lineage: { attempts: Number(m[1]), readySince: null } }
    : null;
}

/** True when every runner of the instance is ready (the lineage's clock for "it healed" starts then). */
export function allReady(state: ClusterState, instanceId: string): boolean {
  const inst = state.instances[instanceId];
  if (!inst) return false;
  return Object.keys(instanceBody(inst).shardAssignments.runnerToShard).every((r) => {
    const s = state.runners[r];
    return s !== undefined && (tagOf(s) === "RunnerReady" || tagOf(s) === "RunnerRunning");
  });
}

export { withoutInstance };
