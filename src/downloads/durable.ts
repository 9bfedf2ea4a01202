/**
 * Durability of finished downloads: a verified file is renamed into place unsynced, so a download ends at
 * page-cache speed, and synced here in the background; the manifest marks it `synced` only after that.
 */
import { dirname } from "node:path";

/** fdatasync of the file, then fsync of its directory (which holds the rename). */
export async function syncToDisk(path: string): Promise<void> {
  {
    using f = await Deno.open(path, { read: true });
    await f.syncData();
  }
  using d = await Deno.open(dirname(path), { read: true });
  await d.sync();
}

const key = (path: string, mtimeMs: number) => `${path}\u0000${mtimeMs}`;

/** The syncs this process started: which are in flight, and which content (path at an mtime) reached the disk. */
export class Syncs {
  readonly #inFlight = new Map<string, Promise<boolean>>();
  readonly #done = new Set<string>();

  constructor(private readonly sync: (path: string) => Promise<void> = syncToDisk) {}

  /** Syncs `path` (its content as of `mtimeMs`); resolves true once it is on disk, false when the sync failed. */
  start(path: string, mtimeMs: number): Promise<boolean> {
    const p = this.sync(path).then(
      () => (this.#done.add(key(path, mtimeMs)), true),
      () => false,
    );
    this.#inFlight.set(path, p);
    p.finally(() => this.#inFlight.get(path) === p && this.#inFlight.delete(path));
    return p;
  }

  isSynced(path: string, mtimeMs: number): boolean {
    return this.#done.has(key(path, mtimeMs));
  }

  /** Waits for the sync of `path` in flight, if any. */
  async settle(path: string): Promise<void> {
    await this.#inFlight.get(path);
  }

  /** Waits for every sync in flight (a clean stop leaves nothing to re-check). */
  async drain(): Promise<void> {
    await Promise.all(this.#inFlight.values());
  }
}
