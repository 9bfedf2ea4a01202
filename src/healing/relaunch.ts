/**
 * Relaunch policy (pure): a single-node engine that failed on a live node starts again on that node (a
 * bounded number of times, with backoff), then is placed elsewhere without that node through healing.
 */
import {
  type Instance,
  instanceBody,
  type PlacementRecord,
  PlacementRecordSchema,
} from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import { tagOf } from "../cluster/tagged.ts";
import { isCardRefusal, isRefusal } from "../placement/shard-check.ts";
import { type Breakage, firstLine, HEALED_AFTER_MS, isSingleNode, retryDelayMs } from "./decide.ts";

/** Relaunches on the node where an engine failed before healing places it on another node. */
export const MAX_RELAUNCHES = 2;

/** When this master saw each instance's engine fail, and first serve (ms; unknown to a new master). */
export interface RelaunchClock {
  failedAt: ReadonlyMap<string, number>;
  readyAt: ReadonlyMap<string, number>;
}

export interface Retirement {
  instanceId: string;
  reason: string;
}

export type RelaunchStep =
  /** A relaunch serves: the failed instance it started again goes (its row says it was replaced). */
  | { kind: "retire"; retire: Retirement }
  /** Start the failed instance again on its node as `instance`; the failed one stays until that serves. */
  | {
    kind: "relaunch";
    failedId: string;
    retire: Retirement[];
    instance: Instance;
    createReason: string;
    placement: PlacementRecord;
  }
  /** The relaunches failed too: healing places it without the node, with the original constraints. */
  | { kind: "move"; retire: Retirement[]; breakage: Breakage; record: PlacementRecord };

/** The one node and runner of a single-node instance. */
function engineOf(i: Instance): { node: string; runnerId: string } {
  const [node, runnerId] = Object.entries(instanceBody(i).shardAssignments.nodeToRunner)[0];
  return { node, runnerId };
}

/** The engine failure healing acts on: not a refusal (placement/recovery.ts) nor a card no node serves. */
function failureOf(state: ClusterState, runnerId: string): string | null {
  const s = state.runners[runnerId];
  if (!s || !("RunnerFailed" in s)) return null;
  const msg = s.RunnerFailed.errorMessage;
  return isRefusal(msg) || isCardRefusal(msg) ? null : firstLine(msg);
}

const READY = new Set(["RunnerReady", "RunnerRunning"]);

/** The same instance with fresh instance and runner ids, so the node's worker starts it anew. */
export function relaunched(i: Instance, newId: () => string): Instance {
  const [tag, body] = Object.entries(i)[0] as [string, ReturnType<typeof instanceBody>];
  const { node, runnerId } = engineOf(i);
  const runner = newId();
  return {
    [tag]: {
      ...body,
      instanceId: newId(),
      shardAssignments: {
        ...body.shardAssignments,
        runnerToShard: { [runner]: body.shardAssignments.runnerToShard[runnerId] },
        nodeToRunner: { [node]: runner },
      },
    },
  } as Instance;
}

/** The record a placement elsewhere starts from: the original constraints, the failing node avoided. */
function moveRecord(record: PlacementRecord, node: string): PlacementRecord {
  const { relaunch: _, ...rest } = record;
  return { ...rest, failedOn: [...new Set([...(record.failedOn ?? []), node])].sort() };
}

/**
 * What the master does now about single-node engines that failed on live nodes. An instance with a
 * relaunch under way is left alone until that relaunch serves (its predecessor retires) or fails (the
 * next step supersedes both). A failure after the instance served `HEALED_AFTER_MS` starts a fresh
 * count. Pure over the state, the clock and the id sequence.
 */
export function relaunchSteps(
  state: ClusterState,
  now: number,
  clock: RelaunchClock,
  baseMs: number,
  newId: () => string,
): RelaunchStep[] {
  const records = state.placements ?? {};
  const recordOf = (id: string) => records[id] ?? PlacementRecordSchema.parse({});
  const successor = new Map<string, string>();
  for (const [id, r] of Object.entries(records)) {
    if (r.relaunch && state.instances[id]) successor.set(r.relaunch.of, id);
  }
  const steps: RelaunchStep[] = [];
  for (const [id, inst] of Object.entries(state.instances).sort(([a], [b]) => a.localeCompare(b))) {
    if (!isSingleNode(inst)) continue;
    const { node, runnerId } = engineOf(inst);
    const status = state.runners[runnerId];
    const pred = recordOf(id).relaunch?.of;
    const predInst = pred ? state.instances[pred] : undefined;
    const predCause = () => {
      const why = predInst ? failureOf(state, engineOf(predInst).runnerId) : null;
      return `the engine on node ${node} failed: ${why ?? "no reason given"}`;
    };
    if (status && READY.has(tagOf(status)) && pred && predInst) {
      const reason = `${predCause()}; replaced by ${id}, relaunched on node ${node}, which serves`;
      steps.push({ kind: "retire", retire: { instanceId: pred, reason } });
      continue;
    }
    const line = failureOf(state, runnerId);
    if (line === null || successor.has(id)) continue;
    const failedAt = clock.failedAt.get(id) ?? now;
    const readyAt = clock.readyAt.get(id);
    const served = readyAt !== undefined && failedAt - readyAt >= HEALED_AFTER_MS;
    const count = served ? 0 : recordOf(id).relaunch?.count ?? 0;
    const cause = `the engine on node ${node} failed: ${line}`;
    const retire = pred && predInst
      ? [{ instanceId: pred, reason: `${predCause()}; its relaunch ${id} failed too` }]
      : [];
    if (count >= MAX_RELAUNCHES) {
      steps.push({
        kind: "move",
        retire,
        breakage: {
          instanceId: id,
          instance: inst,
          deadNode: node,
          reason: `${cause} (after ${count} relaunch(es) there)`,
          alreadyDeleted: false,
        },
        record: moveRecord(recordOf(id), node),
      });
      continue;
    }
    if (now < failedAt + retryDelayMs(count + 1, baseMs)) continue;
    const instance = relaunched(inst, newId);
    steps.push({
      kind: "relaunch",
      failedId: id,
      retire,
      instance,
      createReason: `relaunches ${id} on node ${node} after ${cause}, relaunch ${
        count + 1
      }/${MAX_RELAUNCHES}`,
      placement: { ...recordOf(id), relaunch: { of: id, count: count + 1 } },
    });
  }
  return steps;
}
