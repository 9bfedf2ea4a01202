/**
 * The SQLite record of engine processes this node started, and the reaper that a daemon runs at start
 * to stop engines a crashed predecessor left behind (checked by pid and command line, never blindly).
 */
import { eq } from "drizzle-orm";
import { logger } from "../log/mod.ts";
import type { Db } from "../store/db.ts";
import { engineProcesses } from "../store/schema.ts";
import { isOurs } from "./lifeline.ts";
import type { EngineSpec, ProcessRegistry } from "./process.ts";

const log = logger("engines");

export function sqliteRegistry(
  db: Db,
  owner: { instanceId?: string; runnerId?: string; port?: number } = {},
): ProcessRegistry {
  return {
    record: async (pid: number, spec: EngineSpec, launched: string[]) => {
      await db.insert(engineProcesses).values({
        pid,
        kind: spec.kind,
        instanceId: owner.instanceId ?? null,
        runnerId: owner.runnerId ?? null,
        port: owner.port ?? null,
        command: JSON.stringify(launched),
        startedAt: new Date().toISOString(),
      }).onConflictDoUpdate({
        target: engineProcesses.pid,
        set: { kind: spec.kind, command: JSON.stringify(launched) },
      });
    },
    forget: async (pid: number) => {
      await db.delete(engineProcesses).where(eq(engineProcesses.pid, pid));
    },
  };
}

function commandLine(pid: number): string[] | null {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0").filter(Boolean);
  } catch {
    return null;
  }
}

/** Stops every recorded engine that still runs the recorded command; returns how many were reaped. */
export async function reapOrphans(db: Db): Promise<number> {
  const rows = await db.select().from(engineProcesses);
  let reaped = 0;
  for (const row of rows) {
    const recorded = JSON.parse(row.command) as string[];
    // Only a process running the very command we launched (or the engine its wrapper exec'd) is ours; a
    // reused pid is left alone. Killing a watchdog makes it take its engine along.
    if (isOurs(recorded, commandLine(row.pid))) {
      log.warn("reaping orphaned {kind} (pid {pid}) left by a previous daemon", {
        kind: row.kind,
        pid: row.pid,
      });
      try {
        Deno.kill(row.pid, "SIGTERM");
        for (let i = 0; i < 50 && commandLine(row.pid); i++) await new Promise((r) => setTimeout(r, 100));
        if (commandLine(row.pid)) Deno.kill(row.pid, "SIGKILL");
      } catch { /* gone meanwhile */ }
      reaped++;
    }
    await db.delete(engineProcesses).where(eq(engineProcesses.pid, row.pid));
  }
  return reaped;
}
