/**
 * Free disk where models are stored: statfs of the models directory, or of its nearest existing parent
 * when it is not created yet (a reading never creates directories).
 */
import { statfsSync } from "node:fs";

export interface DiskReading {
  total: number;
  available: number;
  path: string;
}

function nearestExisting(dir: string): string | null {
  let cur = dir.replace(/\/+$/, "") || "/";
  for (;;) {
    try {
      if (Deno.statSync(cur).isDirectory) return cur;
    } catch { /* not there yet: try the parent */ }
    if (cur === "/" || cur === "." || cur === "") return null;
    const i = cur.lastIndexOf("/");
    cur = i <= 0 ? (cur.startsWith("/") ? "/" : ".") : cur.slice(0, i);
  }
}

export function readDisk(dir: string): DiskReading | null {
  const at = nearestExisting(dir);
  if (at === null) return null;
  try {
    const s = statfsSync(at);
    // bavail, not bfree: blocks reserved for root are not space a model download can use.
    return { total: s.blocks * s.bsize, available: s.bavail * s.bsize, path: dir };
  } catch {
    return null;
  }
}
