/**
 * The data dir's single-daemon lock: `daemon.lock` holds the owner's pid and API address. A second
 * daemon on the same data dir is refused while the owner lives; a lock left by a dead process is taken over.
 */
import { z } from "zod";

export const LockInfoSchema = z.object({
  pid: z.number().int(),
  apiHost: z.string(),
  apiPort: z.number().int(),
  startedAt: z.string(),
});
export type LockInfo = z.infer<typeof LockInfoSchema>;

export class DataDirBusy extends Error {
  constructor(readonly dataDir: string, readonly owner: LockInfo) {
    super(
      `data dir ${dataDir} is in use by another skulk daemon (pid ${owner.pid}, API port ${owner.apiPort}, since ${owner.startedAt}); ` +
        `stop it first or start this one with another --data-dir`,
    );
    this.name = "DataDirBusy";
  }
}

export function lockPath(dataDir: string): string {
  return `${dataDir}/daemon.lock`;
}

function alive(pid: number): boolean {
  if (pid === Deno.pid) return true;
  if (Deno.build.os === "linux") {
    try {
      return !/\) Z /.test(Deno.readTextFileSync(`/proc/${pid}/stat`)); // a zombie has exited
    } catch {
      return false;
    }
  }
  try {
    Deno.kill(pid, "SIGCONT"); // Deno offers no signal 0; SIGCONT leaves a running process as it is
    return true;
  } catch (e) {
    return e instanceof Deno.errors.PermissionDenied;
  }
}

export function readLock(dataDir: string): LockInfo | null {
  try {
    const parsed = LockInfoSchema.safeParse(JSON.parse(Deno.readTextFileSync(lockPath(dataDir))));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The live owner of the data dir, or null when none runs. */
export function liveOwner(dataDir: string): LockInfo | null {
  const info = readLock(dataDir);
  return info && alive(info.pid) ? info : null;
}

export interface DataDirLock {
  info: LockInfo;
  /** Records the port actually bound (the API may ask the OS for any free port). */
  setPort(port: number): void;
  release(): void;
}

export function acquireLock(dataDir: string, apiHost: string, apiPort: number): DataDirLock {
  Deno.mkdirSync(dataDir, { recursive: true });
  const path = lockPath(dataDir);
  const info: LockInfo = { pid: Deno.pid, apiHost, apiPort, startedAt: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      // createNew is O_EXCL: of two daemons racing, exactly one creates the file.
      const f = Deno.openSync(path, { write: true, createNew: true, mode: 0o644 });
      f.writeSync(new TextEncoder().encode(JSON.stringify(info)));
      f.close();
      return {
        info,
        setPort: (port) => {
          info.apiPort = port;
          Deno.writeTextFileSync(`${path}.tmp`, JSON.stringify(info));
          Deno.renameSync(`${path}.tmp`, path);
        },
        release: () => {
          if (readLock(dataDir)?.pid === Deno.pid) Deno.removeSync(path);
        },
      };
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      const owner = readLock(dataDir);
      if (owner && alive(owner.pid)) throw new DataDirBusy(dataDir, owner);
      if (!owner) {
        // Unreadable: another daemon may be writing it right now; give it a moment before taking it.
        const age = Date.now() - Deno.statSync(path).mtime!.getTime();
        if (age < 2000) {
          throw new DataDirBusy(dataDir, { pid: -1, apiHost: "?", apiPort: 0, startedAt: "just now" });
        }
      }
      Deno.removeSync(path); // stale: its owner died without releasing
    }
  }
  throw new Error(`could not take ${path}`);
}
