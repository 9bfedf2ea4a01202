/**
 * Pure: what one applied control-plane event adds to this node's counters (placements, healing refusals,
 * elections, its own engines' starts and failures, its own download bytes and failures).
 */
import { downloadModelId, type DownloadProgress } from "../cluster/downloads.ts";
import type { IndexedEvent } from "../cluster/events.ts";
import { instanceBody } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";

export type Increment =
  | { counter: "placements"; labels: { reason: "request" | "healing" } }
  | { counter: "placement_refusals"; labels: { source: "healing" } }
  | { counter: "elections" }
  | { counter: "engine_starts" }
  | { counter: "engine_failures" }
  | { counter: "download_bytes"; value: number }
  | { counter: "download_failures" };

/** Bytes a progress record says are on disk (null: the record carries no count). */
function bytesOf(p: DownloadProgress): number | null {
  if ("DownloadOngoing" in p) return p.DownloadOngoing.downloadProgress.downloaded.inBytes;
  if ("DownloadCompleted" in p) return p.DownloadCompleted.total.inBytes;
  if ("DownloadPending" in p) return p.DownloadPending.downloaded.inBytes;
  return null;
}

/** Whether `runnerId` belongs to one of this node's shards, in the state the event applied to. */
function isOwnRunner(state: ClusterState, nodeId: string, runnerId: string): boolean {
  return Object.values(state.instances).some((i) =>
    instanceBody(i).shardAssignments.nodeToRunner[nodeId] === runnerId
  );
}

export function incrementsOf(ie: IndexedEvent, before: ClusterState, nodeId: string): Increment[] {
  const e = ie.event;
  if ("InstanceCreated" in e) {
    // Healing names why it placed again; a plain placement carries no reason.
    const reason = e.InstanceCreated.reason ? "healing" : "request";
    return [{ counter: "placements", labels: { reason } }];
  }
  if ("PlacementFailed" in e) return [{ counter: "placement_refusals", labels: { source: "healing" } }];
  if ("MasterElected" in e) return [{ counter: "elections" }];
  if ("RunnerStatusUpdated" in e) {
    const { runnerId, runnerStatus } = e.RunnerStatusUpdated;
    if (!isOwnRunner(before, nodeId, runnerId)) return [];
    const previous = before.runners[runnerId];
    // A start is the first Loading after anything but Loading (statuses repeat while layers load).
    if ("RunnerLoading" in runnerStatus && !(previous && "RunnerLoading" in previous)) {
      return [{ counter: "engine_starts" }];
    }
    if ("RunnerFailed" in runnerStatus && !(previous && "RunnerFailed" in previous)) {
      return [{ counter: "engine_failures" }];
    }
    return [];
  }
  if ("NodeDownloadProgress" in e) {
    const p = e.NodeDownloadProgress.downloadProgress;
    const body = Object.values(p)[0] as { nodeId: string };
    if (body.nodeId !== nodeId) return [];
    if ("DownloadFailed" in p) return [{ counter: "download_failures" }];
    const model = downloadModelId(p);
    const prev = (before.downloads[nodeId] ?? []).find((q) => downloadModelId(q) === model);
    const now = bytesOf(p);
    const then = prev ? bytesOf(prev) : null;
    // Without an earlier record the bytes already on disk were not fetched now: nothing to count yet.
    if (now === null || then === null || now <= then) return [];
    return [{ counter: "download_bytes", value: now - then }];
  }
  return [];
}
