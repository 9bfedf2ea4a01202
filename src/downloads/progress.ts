/**
 * Download progress as upstream's `DownloadProgress` records (pure): building Pending/Ongoing/Completed/Failed
 * for a model from per-file byte counts, and the throttle that keeps a download to a few dozen events.
 */
import type { DownloadProgress } from "../cluster/downloads.ts";
import type { ShardMetadata } from "../cluster/instances.ts";
import { bytes } from "../cluster/tagged.ts";

export interface FileTally {
  path: string;
  total: number;
  /** Bytes on disk now (complete file or partial). */
  downloaded: number;
  /** Bytes on disk when this session began (so speed counts only what this session fetched). */
  atStart: number;
  done: boolean;
}

export interface ModelRef {
  nodeId: string;
  shardMetadata: ShardMetadata;
  modelDirectory: string;
}

function fileProgress(
  total: number,
  downloaded: number,
  thisSession: number,
  completed: number,
  files: number,
  elapsedMs: number,
) {
  const speed = elapsedMs > 0 ? thisSession / (elapsedMs / 1000) : 0;
  const left = Math.max(0, total - downloaded);
  return {
    total: bytes(total),
    downloaded: bytes(downloaded),
    downloadedThisSession: bytes(thisSession),
    completedFiles: completed,
    totalFiles: files,
    speed,
    etaMs: speed > 0 ? Math.round((left / speed) * 1000) : 0,
  };
}

export function sumTally(
  files: FileTally[],
): { total: number; downloaded: number; thisSession: number; completed: number } {
  let total = 0, downloaded = 0, thisSession = 0, completed = 0;
  for (const f of files) {
    total += f.total;
    downloaded += f.downloaded;
    thisSession += Math.max(0, f.downloaded - f.atStart);
    if (f.done) completed++;
  }
  return { total, downloaded, thisSession, completed };
}

export function pending(ref: ModelRef, downloaded: number, total: number): DownloadProgress {
  return { DownloadPending: { ...ref, downloaded: bytes(downloaded), total: bytes(total) } };
}

export function ongoing(ref: ModelRef, files: FileTally[], elapsedMs: number): DownloadProgress {
  const s = sumTally(files);
  const perFile = Object.fromEntries(files.map((f) => [
    f.path,
    fileProgress(f.total, f.downloaded, Math.max(0, f.downloaded - f.atStart), f.done ? 1 : 0, 1, elapsedMs),
  ]));
  return {
    DownloadOngoing: {
      ...ref,
      downloadProgress: {
        ...fileProgress(s.total, s.downloaded, s.thisSession, s.completed, files.length, elapsedMs),
        files: perFile,
      },
    },
  };
}

export function completed(ref: ModelRef, total: number, readOnly = false): DownloadProgress {
  return { DownloadCompleted: { ...ref, total: bytes(total), readOnly } };
}

export function failed(ref: ModelRef, errorMessage: string): DownloadProgress {
  return { DownloadFailed: { ...ref, errorMessage } };
}

export interface ThrottleRule {
  /** Emit when progress moved at least this fraction (0.05 = 5 %) ... */
  minStep: number;
  /** ... and at least this long has passed since the last emit; */
  minIntervalMs: number;
  /** or when this long has passed at all (a heartbeat for slow downloads). */
  heartbeatMs: number;
}

export const DEFAULT_THROTTLE: ThrottleRule = { minStep: 0.05, minIntervalMs: 1000, heartbeatMs: 30_000 };

/** Pure: whether an in-progress update goes out, given the last one sent (upstream's rule; regressions always go). */
export function shouldEmit(
  rule: ThrottleRule,
  last: { fraction: number; at: number } | null,
  now: { fraction: number; at: number },
): boolean {
  if (last === null) return true;
  if (now.fraction < last.fraction) return true;
  const since = now.at - last.at;
  if (since >= rule.heartbeatMs) return true;
  return now.fraction - last.fraction >= rule.minStep && since >= rule.minIntervalMs;
}

/** The store routes' summary of a record: `{modelId, status, progress (0..1), error}`. */
export function summarize(p: DownloadProgress, modelId: string) {
  if ("DownloadCompleted" in p) return { modelId, status: "complete" as const, progress: 1, error: null };
  if ("DownloadFailed" in p) {
    return { modelId, status: "failed" as const, progress: 0, error: p.DownloadFailed.errorMessage };
  }
  if ("DownloadOngoing" in p) {
    const d = p.DownloadOngoing.downloadProgress;
    return {
      modelId,
      status: "downloading" as const,
      progress: d.total.inBytes > 0 ? d.downloaded.inBytes / d.total.inBytes : 0,
      error: null,
    };
  }
  const d = p.DownloadPending;
  return {
    modelId,
    status: "pending" as const,
    progress: d.total.inBytes > 0 ? d.downloaded.inBytes / d.total.inBytes : 0,
    error: null,
  };
}
