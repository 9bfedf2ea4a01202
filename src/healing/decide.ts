/**
 * Healing policy (pure): which applied event breaks which instance, and what follows: tear it down and
 * place it again with its original constraints without the dead node (bounded), else retry with backoff.
 */
import type { Event } from "../cluster/events.ts";
import { eventType } from "../cluster/events.ts";
import {
  type Instance,
  instanceBody,
  instanceKind,
  type PlacementRecord,
  PlacementRecordSchema,
} from "../cluster/instances.ts";
import { type ClusterState, type Unplaced, withoutInstance } from "../cluster/state.ts";
import { tagOf } from "../cluster/tagged.ts";
import type { ModelCard } from "../models/card.ts";
import {
  isDefaultRecord as isDefault,
  type PlacementRequest,
  placementRequest,
  plan,
  type PlanDeps,
} from "../placement/planner.ts";
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

/** The first line of an engine's failure (its log tail follows), as the history quotes it. */
export function firstLine(s: string | null): string {
  return (s ?? "no reason given").split("\n")[0].slice(0, 300);
}

/** One engine on one node (not a pool): a failure of it is relaunched on its node first (relaunch.ts). */
export function isSingleNode(i: Instance): boolean {
  return instanceKind(i) !== "LlamaRpc" &&
    Object.keys(instanceBody(i).shardAssignments.nodeToRunner).length === 1;
}

/**
 * The breakages an applied event causes. A node timeout breaks every instance touching it. A failed
 * runner breaks a pooled instance, or a wider one when `tracked` (healing placed it); a single-node
 * engine's failure is relaunch.ts's (its node is alive: the engine starts there again first).
 */
export function breakagesOf(
  event: Event,
  before: ClusterState,
  after: ClusterState,
  tracked: ReadonlySet<string>,
): Breakage[] {
  const heals = (id: string, i: Instance) =>
    instanceKind(i) === "LlamaRpc" || (tracked.has(id) && !isSingleNode(i));
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
      .filter(([, i]) => nodeId in instanceBody(i).shardAssignments.nodeToRunner)
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

/**
 * The nodes that can take a placement now, and those among them not in `known` (null: nothing is known
 * yet, so nobody counts as joined). A join earns every lost instance one more try.
 */
export function joinedWorkers(
  known: ReadonlySet<string> | null,
  view: ClusterView,
): { workers: Set<string>; joined: string[] } {
  const workers = new Set(
    view.nodes.filter((n) => n.reachable && n.worker && n.hasMemory).map((n) => n.nodeId),
  );
  return { workers, joined: known ? [...workers].filter((n) => !known.has(n)).sort() : [] };
}

/** Attempts to find a place for a lost instance's model (the first at once) before healing gives up. */
export const MAX_PLACE_ATTEMPTS = 5;

/** The wait after failed attempt `attempt` (1-based): the base, doubling each time. */
export function retryDelayMs(attempt: number, baseMs: number): number {
  return baseMs * 2 ** (attempt - 1);
}

/** The constraints an instance was placed with: its record, else the defaults (a plain placement). */
export function recordOf(state: ClusterState, instanceId: string): PlacementRecord {
  return state.placements?.[instanceId] ?? PlacementRecordSchema.parse({});
}

/**
 * The requests healing tries, in order: the original constraints, then (when they asked for more than
 * the defaults) anywhere the model fits; never the dead node, the user's exclusions or a node where the
 * engine kept failing.
 */
export function healingRequests(
  modelId: string,
  record: PlacementRecord,
  deadNode: string | null,
): { label: string; request: PlacementRequest; honours: boolean }[] {
  const excluded_nodes = [
    ...new Set([...record.excludedNodes, ...(record.failedOn ?? []), ...(deadNode ? [deadNode] : [])]),
  ].sort();
  const asPlaced = placementRequest(modelId, {
    sharding: record.sharding,
    instance_meta: record.instanceMeta,
    min_nodes: record.minNodes,
    excluded_nodes,
  });
  if (isDefault(record)) return [{ label: "anywhere", request: asPlaced, honours: true }];
  return [
    {
      label: `as placed (${record.instanceMeta}, min_nodes ${record.minNodes})`,
      request: asPlaced,
      honours: true,
    },
    { label: "anywhere", request: placementRequest(modelId, { excluded_nodes }), honours: false },
  ];
}

type Found =
  | { ok: true; instance: Instance; where: string; shortfall: string | null }
  | { ok: false; errors: string };

/** The first of healing's requests the planner can place. */
function findPlace(
  modelId: string,
  record: PlacementRecord,
  deadNode: string | null,
  view: ClusterView,
  card: ModelCard,
  deps: PlanDeps,
): Found {
  const errors: string[] = [];
  for (const { label, request, honours } of healingRequests(modelId, record, deadNode)) {
    const r = plan(view, card, request, deps);
    if (!r.ok) {
      errors.push(`${label}: ${r.error}`);
      continue;
    }
    const p = r.placement;
    const where = `${p.nodes.length === 1 ? "one node" : `a pool of ${p.nodes.length}`} (${
      p.nodes.join(", ")
    }, ${instanceKind(p.instance)})${deadNode ? ` without ${deadNode}` : ""}`;
    // Only a fallback placement falls short; the history says what the original asked and why not.
    const shortfall = honours ? null : `min_nodes ${record.minNodes} not honoured (${errors.join("; ")})`;
    return { ok: true, instance: p.instance, where, shortfall };
  }
  return { ok: false, errors: errors.join("; ") };
}

/** A lost instance healing found no place for: the event that records it and schedules the next try. */
export type PlacementFailure = {
  lostInstanceId: string;
  instance: Instance;
  placement: PlacementRecord;
  attempt: number;
  retryAt: string | null;
  reason: string;
};

export type HealDecision =
  | {
    action: "replace";
    /** Null when the instance is already gone (NodeTimedOut). */
    deleteReason: string | null;
    instance: Instance;
    createReason: string;
    placement: PlacementRecord;
    lineage: Lineage;
  }
  | { action: "unplaced"; deleteReason: string | null; failure: PlacementFailure };

function failure(
  lostInstanceId: string,
  instance: Instance,
  placement: PlacementRecord,
  attempt: number,
  cause: string,
  why: string,
  now: number,
  baseMs: number,
  final = attempt >= MAX_PLACE_ATTEMPTS,
): PlacementFailure {
  const retryAt = final ? null : new Date(now + retryDelayMs(attempt, baseMs)).toISOString();
  const next = retryAt
    ? `healing found no place, attempt ${attempt}/${MAX_PLACE_ATTEMPTS}, next try at ${retryAt}`
    : `healing gave up after ${attempt} attempt(s), until a node joins`;
  return { lostInstanceId, instance, placement, attempt, retryAt, reason: `${cause}; ${next}: ${why}` };
}

/**
 * What follows a breakage. `view` must already leave the broken instance out (its memory and ports are
 * about to be freed). Pure: the same inputs and id sequence give the same decision.
 */
export function decideHealing(
  b: Breakage,
  lineage: Lineage | undefined,
  record: PlacementRecord,
  view: ClusterView,
  card: ModelCard,
  now: number,
  baseMs: number,
  deps: PlanDeps,
): HealDecision {
  const fresh = !lineage || (lineage.readySince !== null && now - lineage.readySince >= HEALED_AFTER_MS);
  const attempts = fresh ? 0 : lineage.attempts;
  const del = (tail: string) => (b.alreadyDeleted ? null : `healing: ${b.reason}; ${tail}`);
  const record0 = { ...record, healAttempt: attempts };
  if (attempts >= MAX_HEAL_ATTEMPTS) {
    const why = `${attempts} re-placement(s) did not hold`;
    const f = failure(b.instanceId, b.instance, record0, 1, b.reason, why, now, baseMs, true);
    return { action: "unplaced", deleteReason: del(`gave up: ${why}`), failure: f };
  }
  const modelId = instanceBody(b.instance).shardAssignments.modelId;
  const found = findPlace(modelId, record0, b.deadNode, view, card, deps);
  if (!found.ok) {
    const f = failure(b.instanceId, b.instance, record0, 1, b.reason, found.errors, now, baseMs);
    return { action: "unplaced", deleteReason: del("no place for it yet"), failure: f };
  }
  const newId = instanceBody(found.instance).instanceId;
  const attempt = `attempt ${attempts + 1}/${MAX_HEAL_ATTEMPTS}`;
  const short = found.shortfall ? `; ${found.shortfall}` : "";
  return {
    action: "replace",
    deleteReason: del(`torn down; replaced by ${newId} on ${found.where}, ${attempt}`),
    instance: found.instance,
    createReason: `heals ${b.instanceId} after ${b.reason}: placed on ${found.where}, ${attempt}${short}`,
    placement: { ...record0, healAttempt: attempts + 1 },
    lineage: { attempts: attempts + 1, readySince: null },
  };
}

/**
 * The master's next step for a lost instance awaiting a place: null while its retry time has not come
 * (or after it gave up, unless a node joined since); else a placement or the next failure record.
 */
export function decideRetry(
  lostInstanceId: string,
  u: Unplaced,
  view: ClusterView,
  card: ModelCard,
  now: number,
  joined: string[],
  baseMs: number,
  deps: PlanDeps,
):
  | null
  | { action: "replace"; instance: Instance; createReason: string; placement: PlacementRecord }
  | { action: "unplaced"; failure: PlacementFailure } {
  const due = u.retryAt !== null && Date.parse(u.retryAt) <= now;
  if (!due && joined.length === 0) return null;
  const modelId = instanceBody(u.instance).shardAssignments.modelId;
  const cause = u.reason.split("; healing ")[0];
  const attempt = u.attempt + 1;
  const trigger = due ? `attempt ${attempt}/${MAX_PLACE_ATTEMPTS}` : `node ${joined.join(", ")} joined`;
  const found = findPlace(modelId, u.placement, null, view, card, deps);
  if (!found.ok) {
    // A join after giving up earns one try, not a new round of timed ones.
    const final = u.retryAt === null || attempt >= MAX_PLACE_ATTEMPTS;
    const f = failure(
      lostInstanceId,
      u.instance,
      u.placement,
      attempt,
      cause,
      found.errors,
      now,
      baseMs,
      final,
    );
    return { action: "unplaced", failure: f };
  }
  const short = found.shortfall ? `; ${found.shortfall}` : "";
  return {
    action: "replace",
    instance: found.instance,
    createReason: `heals ${lostInstanceId} after ${cause}: placed on ${found.where}, ${trigger}${short}`,
    placement: { ...u.placement, healAttempt: u.placement.healAttempt + 1 },
  };
}

/** The lineage an `InstanceCreated` carries when healing placed it (its placement record counts the attempts). */
export function lineageOfCreated(event: Event): { instanceId: string; lineage: Lineage } | null {
  if (eventType(event) !== "InstanceCreated") return null;
  const { instance, placement } = (event as Extract<Event, { InstanceCreated: unknown }>).InstanceCreated;
  return placement && placement.healAttempt > 0
    ? {
      instanceId: instanceBody(instance).instanceId,
      lineage: { attempts: placement.healAttempt, readySince: null },
    }
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
export type { PlacementRecord };
