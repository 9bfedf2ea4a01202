/**
 * ClusterState and the pure reducer `apply(state, indexedEvent)`. Every node folds the same indexed
 * events through this function and so holds the same state; nothing here does I/O or reads a clock.
 */
import type { DownloadProgress } from "./downloads.ts";
import { downloadModelId } from "./downloads.ts";
import type { Event, IndexedEvent } from "./events.ts";
import { eventType } from "./events.ts";
import {
  type Instance,
  instanceBody,
  type PlacementRecord,
  PlacementRecordSchema,
  type RunnerStatus,
} from "./instances.ts";

/** The `retryAt` of a lost instance nobody has tried to place yet: due at once (the reducer reads no clock). */
export const DUE_NOW = new Date(0).toISOString();

/** A lost instance whose model healing has not placed again yet (ours: never in upstream's `/state`). */
export interface Unplaced {
  instance: Instance;
  placement: PlacementRecord;
  /** Attempts made so far. */
  attempt: number;
  /** ISO time of the next attempt; null once healing gave up (until the cluster changes). */
  retryAt: string | null;
  reason: string;
}

export interface ClusterState {
  instances: Record<string, Instance>;
  runners: Record<string, RunnerStatus>;
  downloads: Record<string, DownloadProgress[]>;
  tasks: Record<string, unknown>;
  tracingEnabled: boolean;
  /**
   * The voting members, replicated like everything else so that every node counts the same majority: a
   * node cut off from the others cannot shrink it. Absent in snapshots older than voting (read via `votersOf`).
   */
  voters?: string[];
  lastEventAppliedIdx: number;
  /**
   * Ours, kept out of upstream's `/state`: the constraints each live instance was placed with (only
   * those not placed with the defaults), and lost instances awaiting re-placement, keyed by the lost id.
   * Optional because snapshots written before they existed lack them.
   */
  placements?: Record<string, PlacementRecord>;
  unplaced?: Record<string, Unplaced>;
  /** Ours: cluster-scope settings by dotted key (`ClusterConfigChanged`); absent in older snapshots. */
  clusterConfig?: Record<string, unknown>;
}

export function emptyState(): ClusterState {
  return {
    instances: {},
    runners: {},
    downloads: {},
    tasks: {},
    tracingEnabled: false,
    voters: [],
    lastEventAppliedIdx: -1,
    placements: {},
    unplaced: {},
    clusterConfig: {},
  };
}

export class OutOfOrderEvent extends Error {
  constructor(readonly expected: number, readonly got: number) {
    super(`event index ${got} applied out of order (expected ${expected})`);
    this.name = "OutOfOrderEvent";
  }
}

function runnersOf(instance: Instance): string[] {
  return Object.keys(instanceBody(instance).shardAssignments.runnerToShard);
}

function nodesOf(instance: Instance): string[] {
  return Object.keys(instanceBody(instance).shardAssignments.nodeToRunner);
}

function withoutKeys<T>(rec: Record<string, T>, keys: Iterable<string>): Record<string, T> {
  const out = { ...rec };
  for (const k of keys) delete out[k];
  return out;
}

function deleteInstances(state: ClusterState, ids: string[]): ClusterState {
  const runners = ids.flatMap((id) => (state.instances[id] ? runnersOf(state.instances[id]) : []));
  return {
    ...state,
    instances: withoutKeys(state.instances, ids),
    runners: withoutKeys(state.runners, runners),
    placements: withoutKeys(state.placements ?? {}, ids),
  };
}

const votersIn = (state: ClusterState): string[] => state.voters ?? [];

/**
 * The nodes whose majority commits and elects. A node that has joined nothing yet (a fresh data dir) is
 * a cluster of one: its own majority.
 */
export function votersOf(state: ClusterState, self: string): string[] {
  const v = votersIn(state);
  return v.length > 0 ? v : [self];
}

/** A new instance of a model settles the oldest lost instance of that model still awaiting a place. */
function settleUnplaced(unplaced: Record<string, Unplaced>, modelId: string): Record<string, Unplaced> {
  const first = Object.entries(unplaced).find(([, u]) =>
    instanceBody(u.instance).shardAssignments.modelId === modelId
  );
  return first ? withoutKeys(unplaced, [first[0]]) : unplaced;
}

/** Applies one event's effect, without index bookkeeping. */
export function applyEvent(state: ClusterState, event: Event): ClusterState {
  const type = eventType(event);
  switch (type) {
    case "InstanceCreated": {
      const { instance, placement } = (event as Extract<Event, { InstanceCreated: unknown }>).InstanceCreated;
      const body = instanceBody(instance);
      const placements = { ...state.placements ?? {} };
      if (placement) placements[body.instanceId] = placement;
      else delete placements[body.instanceId];
      return {
        ...state,
        instances: { ...state.instances, [body.instanceId]: instance },
        placements,
        unplaced: settleUnplaced(state.unplaced ?? {}, body.shardAssignments.modelId),
      };
    }
    case "PlacementFailed": {
      const { lostInstanceId, instance, placement, attempt, retryAt, reason } =
        (event as Extract<Event, { PlacementFailed: unknown }>).PlacementFailed;
      return {
        ...state,
        unplaced: {
          ...state.unplaced ?? {},
          [lostInstanceId]: { instance, placement, attempt, retryAt, reason },
        },
      };
    }
    case "InstanceDeleted": {
      const { instanceId } = (event as Extract<Event, { InstanceDeleted: unknown }>).InstanceDeleted;
      return deleteInstances(state, [instanceId]);
    }
    case "RunnerStatusUpdated": {
      const { runnerId, runnerStatus } =
        (event as Extract<Event, { RunnerStatusUpdated: unknown }>).RunnerStatusUpdated;
      if ("RunnerShutdown" in runnerStatus) {
        return { ...state, runners: withoutKeys(state.runners, [runnerId]) };
      }
      const live = Object.values(state.instances).some((i) => runnersOf(i).includes(runnerId));
      return live ? { ...state, runners: { ...state.runners, [runnerId]: runnerStatus } } : state;
    }
    case "NodeDownloadProgress": {
      const { downloadProgress } =
        (event as Extract<Event, { NodeDownloadProgress: unknown }>).NodeDownloadProgress;
      const body = Object.values(downloadProgress)[0] as { nodeId: string };
      const model = downloadModelId(downloadProgress);
      const list = (state.downloads[body.nodeId] ?? []).filter((p) => downloadModelId(p) !== model);
      return { ...state, downloads: { ...state.downloads, [body.nodeId]: [...list, downloadProgress] } };
    }
    case "NodeTimedOut": {
      const { nodeId } = (event as Extract<Event, { NodeTimedOut: unknown }>).NodeTimedOut;
      const touching = Object.entries(state.instances).filter(([, i]) => nodesOf(i).includes(nodeId)).map((
        [id],
      ) => id);
      const next = deleteInstances(state, touching);
      // Each instance it held is lost and due for re-placement now: whichever node is master (this one, or
      // one elected before it acted) finds it here, so a failover between the two loses nothing.
      const unplaced = { ...state.unplaced ?? {} };
      for (const id of touching) {
        unplaced[id] = {
          instance: state.instances[id],
          placement: state.placements?.[id] ?? PlacementRecordSchema.parse({}),
          attempt: 0,
          retryAt: DUE_NOW,
          reason: `node ${nodeId} timed out`,
        };
      }
      // The last voter stays: an empty list would make every node a cluster of one (see votersOf).
      const rest = votersIn(state).filter((v) => v !== nodeId);
      return {
        ...next,
        downloads: withoutKeys(next.downloads, [nodeId]),
        unplaced,
        voters: rest.length > 0 ? rest : votersIn(state),
      };
    }
    case "NodeJoined": {
      const { nodeId } = (event as Extract<Event, { NodeJoined: unknown }>).NodeJoined;
      const voters = votersIn(state);
      return voters.includes(nodeId) ? state : { ...state, voters: [...voters, nodeId].sort() };
    }
    case "TracingStateChanged":
      return {
        ...state,
        tracingEnabled:
          (event as Extract<Event, { TracingStateChanged: unknown }>).TracingStateChanged.enabled,
      };
    case "ClusterConfigChanged": {
      const { settings } = (event as Extract<Event, { ClusterConfigChanged: unknown }>).ClusterConfigChanged;
      const next = { ...state.clusterConfig ?? {} };
      for (const [k, v] of Object.entries(settings)) {
        if (v === null) delete next[k];
        else next[k] = v;
      }
      return { ...state, clusterConfig: next };
    }
    case "CustomModelCardAdded":
    case "CustomModelCardDeleted":
    case "MasterElected":
    case "TestEvent":
      return state;
  }
}

/** Applies an indexed event; indices must arrive in order with no gap. */
export function apply(state: ClusterState, ie: IndexedEvent): ClusterState {
  if (ie.idx !== state.lastEventAppliedIdx + 1) {
    throw new OutOfOrderEvent(state.lastEventAppliedIdx + 1, ie.idx);
  }
  return { ...applyEvent(state, ie.event), lastEventAppliedIdx: ie.idx };
}

/** The state without one instance and its runners: what planning around it (healing, a shard check) sees. */
export function withoutInstance(state: ClusterState, instanceId: string): ClusterState {
  return deleteInstances(state, [instanceId]);
}
