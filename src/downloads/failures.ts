/**
 * Download failure records in SQLite `download_failures`: written when a `DownloadFailed` is applied, cleared
 * (never deleted) by a later `DownloadCompleted` or a reset, and read by placement to exclude failed nodes.
 */
import { and, eq, isNull } from "drizzle-orm";
import { downloadModelId, type DownloadProgress } from "../cluster/downloads.ts";
import type { IndexedEvent } from "../cluster/events.ts";
import type { ClusterState } from "../cluster/state.ts";
import { untag } from "../cluster/tagged.ts";
import type { Db } from "../store/db.ts";
import { downloadFailures } from "../store/schema.ts";

export type FailureRow = typeof downloadFailures.$inferSelect;

/** What an applied download record means for the failure table (pure). */
export type FailureAction =
  | { kind: "record"; nodeId: string; modelId: string; error: string }
  | { kind: "clear"; nodeId: string; modelId: string; reason: string }
  | { kind: "none" };

/**
 * Pure: a Failed opens a record (unless the same failure is already open); a Completed clears it. A Pending
 * does not: the master's recovery resets the state record, but the node stays excluded until it succeeds.
 */
export function failureAction(p: DownloadProgress, previous: DownloadProgress | undefined): FailureAction {
  const body = untag(p) as { nodeId: string };
  const modelId = downloadModelId(p);
  if ("DownloadFailed" in p) {
    const same = previous && "DownloadFailed" in previous &&
      previous.DownloadFailed.errorMessage === p.DownloadFailed.errorMessage;
    return same
      ? { kind: "none" }
      : { kind: "record", nodeId: body.nodeId, modelId, error: p.DownloadFailed.errorMessage };
  }
  if ("DownloadCompleted" in p) {
    return { kind: "clear", nodeId: body.nodeId, modelId, reason: "download completed" };
  }
  return { kind: "none" };
}

export async function recordFailure(
  db: Db,
  nodeId: string,
  modelId: string,
  error: string,
  at = new Date(),
): Promise<void> {
  await db.insert(downloadFailures).values({ nodeId, modelId, error, failedAt: at.toISOString() });
}

/** Marks every open record of (node, model) cleared; returns how many it cleared. */
export async function clearFailures(
  db: Db,
  nodeId: string,
  modelId: string,
  reason: string,
  at = new Date(),
): Promise<number> {
  const rows = await db.update(downloadFailures)
    .set({ clearedAt: at.toISOString(), clearedReason: reason })
    .where(
      and(
        eq(downloadFailures.nodeId, nodeId),
        eq(downloadFailures.modelId, modelId),
        isNull(downloadFailures.clearedAt),
      ),
    )
    .returning({ id: downloadFailures.id });
  return rows.length;
}

export async function openFailures(
  db: Db,
  filter: { nodeId?: string; modelId?: string } = {},
): Promise<FailureRow[]> {
  const conds = [isNull(downloadFailures.clearedAt)];
  if (filter.nodeId) conds.push(eq(downloadFailures.nodeId, filter.nodeId));
  if (filter.modelId) conds.push(eq(downloadFailures.modelId, filter.modelId));
  return await db.select().from(downloadFailures).where(and(...conds));
}

/** Nodes with an open failure record for the model (placement excludes them when it places the model again). */
export async function nodesWithOpenFailure(db: Db, modelId: string): Promise<string[]> {
  return [...new Set((await openFailures(db, { modelId })).map((r) => r.nodeId))].sort();
}

/** Pure: nodes whose current record for the model in `/state` is `DownloadFailed`. */
export function nodesWithFailedDownload(state: Pick<ClusterState, "downloads">, modelId: string): string[] {
  return Object.entries(state.downloads)
    .filter(([, list]) => list.some((p) => "DownloadFailed" in p && downloadModelId(p) === modelId))
    .map(([nodeId]) => nodeId)
    .sort();
}

/** The event-log listener that keeps the table in step with the replicated download records. */
export function failureRecorder(db: Db) {
  return async (ie: IndexedEvent, before: ClusterState): Promise<void> => {
    if (!("NodeDownloadProgress" in ie.event)) return;
    const p = ie.event.NodeDownloadProgress.downloadProgress;
    const nodeId = (untag(p) as { nodeId: string }).nodeId;
    const previous = (before.downloads[nodeId] ?? []).find((x) => downloadModelId(x) === downloadModelId(p));
    const action = failureAction(p, previous);
    if (action.kind === "record") await recordFailure(db, action.nodeId, action.modelId, action.error);
    if (action.kind === "clear") await clearFailures(db, action.nodeId, action.modelId, action.reason);
  };
}
