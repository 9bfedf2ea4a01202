/**
 * The SQLite record of engine processes this node started, and the reaper that a daemon runs at start
 * to stop engines a crashed predecessor left behind (checked by pid and command line, never blindly).
 */
import { eq } from "drizzle-orm";
import { logger } from "../log/mod.ts";
import type { Db } from "../store/db.ts";
import { engineProcesses } from "../store/schema.ts";
import { engineArgv, isOurs } from "./lifeline.ts";
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

/** The processes `pid` started (every thread's children), from /proc. */
export function childrenOf(pid: number): number[] {
  try {
    return [...Deno.readDirSync(`/proc/${pid}/task`)].flatMap((t) =>
      Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/children`).trim().split(/\s+/).filter(Boolean)
        .map(Number)
    );
  } catch {
    return [];
  }
}

/** SIGTERM, then SIGKILL when the process still runs `argv` after 5 s. */
async function terminate(pid: number, argv: string[]): Promise<void> {
  try {
    Deno.kill(pid, "SIGTERM");
    for (let i = 0; i < 50 && isOurs(argv, commandLine(pid)); i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    if (isOurs(argv, commandLine(pid))) Deno.kill(pid, "SIGKILL");
  } catch { /* gone meanwhile */ }
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
      // A watchdog passes the stop on to its engine; the engine is also stopped directly, in case the
      // watchdog cannot (wedged, or killed before it could).
      const engine = engineArgv(recorded);
      const children = engine === recorded
        ? []
        : childrenOf(row.pid).filter((c) => isOurs(engine, commandLine(c)));
      await Promise.all([terminate(row.pid, recorded), ...children.map((c) => terminate(c, engine))]);
      reaped++;
    }
    await db.delete(engineProcesses).where(eq(engineProcesses.pid, row.pid));
  }
  return reaped;
}
