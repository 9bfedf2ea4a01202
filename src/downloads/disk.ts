/**
 * The disk check before a download starts: free space (statfs, behind a probe tests can replace) against the
 * bytes still needed, so a download that cannot fit fails at once with a clear message instead of filling the disk.
 */
import { statfs } from "node:fs/promises";
import { formatBytes } from "../cli/common.ts";

export type FreeSpaceProbe = (dir: string) => Promise<number>;

/** Bytes an unprivileged writer can still use on the filesystem holding `dir` (or its nearest existing parent). */
export const statfsFree: FreeSpaceProbe = async (dir) => {
  let d = dir;
  for (;;) {
    try {
      const s = await statfs(d);
      return Number(s.bavail) * Number(s.bsize);
    } catch (e) {
      const parent = d.replace(/\/[^/]+\/?$/, "") || "/";
      if (parent === d || (e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      d = parent;
    }
  }
};

/** Headroom kept free beyond the files themselves (filesystem metadata, the database, logs). */
export const DISK_RESERVE_BYTES = 64 * 1024;

/** Pure: null when the download fits, else the message of the failure. */
export function diskShortfall(
  neededBytes: number,
  freeBytes: number,
  dir: string,
  reserve = DISK_RESERVE_BYTES,
): string | null {
  if (neededBytes + reserve <= freeBytes) return null;
  return `not enough disk space in ${dir}: the download needs ${formatBytes(neededBytes)} more and ${
    formatBytes(freeBytes)
  } is free; ` +
    `free space or set --models-dir / SKULK_MODELS_DIR to a larger disk`;
}

/** Pure: whether an open failure record's cause is a lack of space (cleared once a new check passes). */
export function isDiskFailure(error: string): boolean {
  return error.startsWith("not enough disk space") || error.startsWith("disk full");
}
