/**
 * One file from a URL to disk: streamed into `<dest>.partial` (resumed with `Range`), checked for size and
 * sha256 while it streams, synced, then renamed into place. Memory use is one network chunk, whatever the size.
 */
import { createHash, type Hash } from "node:crypto";
import { dirname } from "node:path";
import { DownloadError } from "./errors.ts";

export interface FetchFileOptions {
  url: string;
  dest: string;
  /** Expected size in bytes, when the hub says. */
  size: number | null;
  /** Expected lowercase hex sha256, when the hub says. */
  sha256: string | null;
  headers?: Headers;
  signal?: AbortSignal;
  /** Called with the bytes now in the partial file (after each chunk, and once at the start). */
  onBytes?: (bytesOnDisk: number) => void;
  /** Abort a response that sends nothing for this long (a stalled connection is retried). */
  readTimeoutMs?: number;
}

export interface FetchFileResult {
  bytes: number;
  /** Bytes that were already in the partial file and were not fetched again. */
  resumedFrom: number;
}

const SYNC_EVERY_BYTES = 16 * 1024 * 1024;
const WRITE_BUFFER_BYTES = 4 * 1024 * 1024;
const FLUSH_INTERVAL_MS = 250;

export const partialPath = (dest: string) => `${dest}.partial`;

async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

/** Feeds the first `length` bytes of a file into a hash (to continue hashing a resumed partial). */
async function hashPrefix(file: Deno.FsFile, length: number, hash: Hash): Promise<void> {
  const buf = new Uint8Array(1 << 20);
  await file.seek(0, Deno.SeekMode.Start);
  let left = length;
  while (left > 0) {
    const n = await file.read(buf.subarray(0, Math.min(buf.length, left)));
    if (n === null) {
      throw new DownloadError(`partial file ended before ${length} bytes while rehashing`, "retry");
    }
    hash.update(buf.subarray(0, n));
    left -= n;
  }
}

/** The sha256 of a whole file, streamed. */
export async function sha256File(path: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  using file = await Deno.open(path, { read: true });
  const buf = new Uint8Array(1 << 20);
  for (;;) {
    signal?.throwIfAborted();
    const n = await file.read(buf);
    if (n === null) break;
    hash.update(buf.subarray(0, n));
  }
  return hash.digest("hex");
}

async function syncHandle(path: string): Promise<void> {
  using f = await Deno.open(path, { read: true });
  await f.syncData();
}

async function writeAll(file: Deno.FsFile, chunk: Uint8Array): Promise<void> {
  let off = 0;
  while (off < chunk.length) off += await file.write(chunk.subarray(off));
}

function isNoSpace(e: unknown): boolean {
  const msg = String((e as Error)?.message ?? e);
  return /no space left|os error 28|ENOSPC|quota exceeded|os error 122/i.test(msg);
}

/**
 * Fetches `url` into `dest`. Throws DownloadError: kind "retry" for what another attempt may fix (5xx,
 * resets, stalls, a short body, a bad hash), "fatal" for what it will not (401/403/404), "disk" for a full disk
 * (the partial file is removed then, so a full disk leaves nothing behind).
 */
export async function fetchFile(o: FetchFileOptions): Promise<FetchFileResult> {
  const partial = partialPath(o.dest);
  await Deno.mkdir(dirname(o.dest), { recursive: true });
  let start = (await sizeOf(partial)) ?? 0;
  if (o.size !== null && start > o.size) start = 0; // larger than the file can be: not a prefix of it
  const file = await Deno.open(partial, { read: true, write: true, create: true });
  try {
    // Another download of this file (another process on the same models dir) waits here rather than interleaving.
    await file.lock(true);
    if (start === 0) await file.truncate(0);
    const hash = o.sha256 ? createHash("sha256") : null;
    if (hash && start > 0) await hashPrefix(file, start, hash);
    await file.seek(start, Deno.SeekMode.Start);
    o.onBytes?.(start);
    const resumedFrom = start;
    let written = start;
    if (o.size === null || start < o.size) {
      written = await streamInto(o, file, start, hash);
    }
    if (o.size !== null && written !== o.size) {
      throw new DownloadError(`body ended at ${written} of ${o.size} bytes`, "retry");
    }
    if (hash) {
      const got = hash.digest("hex");
      if (got !== o.sha256) {
        await file.truncate(0);
        throw new DownloadError(
          `sha256 mismatch (expected ${o.sha256}, got ${got}); the file is fetched again`,
          "retry",
        );
      }
    }
    await file.syncData();
    file.close();
    await Deno.rename(partial, o.dest);
    return { bytes: written, resumedFrom };
  } catch (e) {
    try {
      file.close();
    } catch { /* already closed */ }
    if (isNoSpace(e) || (e instanceof DownloadError && e.kind === "disk")) {
      await Deno.remove(partial).catch(() => {});
      throw new DownloadError(`disk full while writing ${o.dest}: ${(e as Error).message}`, "disk");
    }
    throw e;
  }
}

async function streamInto(
  o: FetchFileOptions,
  file: Deno.FsFile,
  start: number,
  hash: Hash | null,
): Promise<number> {
  const headers = new Headers(o.headers);
  if (start > 0) headers.set("range", `bytes=${start}-`);
  let res: Response;
  try {
    res = await fetch(o.url, { headers, signal: o.signal, redirect: "follow" });
  } catch (e) {
    if (o.signal?.aborted) throw o.signal.reason ?? e;
    throw new DownloadError(`request failed: ${(e as Error).message}`, "retry");
  }
  if (res.status === 416 && start > 0) {
    // The partial is not a prefix the server recognises; start over.
    await res.body?.cancel();
    await file.truncate(0);
    throw new DownloadError(
      `server refused the resume range at ${start} bytes; restarting the file`,
      "retry",
    );
  }
  if (!res.ok) {
    await res.body?.cancel();
    const fatal = res.status === 401 || res.status === 403 || res.status === 404;
    const why = res.status === 401 || res.status === 403
      ? "access refused: set HF_TOKEN to a token that can read this repo, or accept its license on the hub"
      : res.status === 404
      ? "not found on the hub"
      : "server error";
    throw new DownloadError(`HTTP ${res.status} for ${o.url}: ${why}`, fatal ? "fatal" : "retry");
  }
  let offset = start;
  if (start > 0 && res.status !== 206) {
    // The server ignored Range and sends the whole file: drop what we had.
    offset = 0;
    await file.truncate(0);
    await file.seek(0, Deno.SeekMode.Start);
    if (hash) {
      throw new DownloadError(
        "server ignored the resume range; restarting the file with a fresh hash",
        "retry",
      );
    }
  }
  if (res.status === 206) {
    const m = res.headers.get("content-range")?.match(/^bytes (\d+)-/);
    if (!m || Number(m[1]) !== start) {
      await res.body?.cancel();
      throw new DownloadError(
        `server answered range ${res.headers.get("content-range")} for a resume at ${start}`,
        "retry",
      );
    }
  }
  if (!res.body) return offset;
  const reader = res.body.getReader();
  // Network chunks (often 64 KiB) are gathered into one of two buffers; one buffer is written and hashed
  // while the other fills, so network, disk and hashing overlap in a fixed 2 x 4 MiB.
  const buffers = [new Uint8Array(WRITE_BUFFER_BYTES), new Uint8Array(WRITE_BUFFER_BYTES)];
  let current = 0;
  let fill = 0;
  let writing: Promise<void> = Promise.resolve();
  // Dirty pages are flushed as the file grows, so the final fsync before the rename finds little left to do.
  let syncing: Promise<void> | null = null;
  let unsynced = 0;
  let flushedAt = performance.now();
  const flush = async () => {
    if (fill === 0) return;
    flushedAt = performance.now();
    await writing;
    const buf = buffers[current].subarray(0, fill);
    const at = offset;
    writing = writeAll(file, buf).then(() => o.onBytes?.(at));
    // The write runs on Deno's I/O threads while this thread hashes the same (unchanging) buffer.
    hash?.update(buf);
    unsynced += fill;
    current = 1 - current;
    fill = 0;
    if (unsynced >= SYNC_EVERY_BYTES && syncing === null) {
      unsynced = 0;
      // Through a second handle: Deno runs one op at a time per file resource, and a sync on the writing
      // handle would hold up the next write; fdatasync on any handle flushes the file's pages.
      syncing = writing.then(() => syncHandle(partialPath(o.dest))).finally(() => (syncing = null));
    }
  };
  // One watchdog per response, not a timer per chunk: a stalled connection is cancelled and retried.
  let lastData = performance.now();
  let stalled = false;
  const timeoutMs = o.readTimeoutMs;
  const watchdog = timeoutMs
    ? setInterval(() => {
      if (performance.now() - lastData < timeoutMs) return;
      stalled = true;
      reader.cancel().catch(() => {});
    }, Math.min(1000, timeoutMs))
    : undefined;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (stalled) {
        throw new DownloadError(
          `no data for ${Math.round(timeoutMs! / 1000)} s; connection stalled`,
          "retry",
        );
      }
      if (done) break;
      lastData = performance.now();
      if (o.size !== null && offset + value.length > o.size) {
        throw new DownloadError(`server sent more than the expected ${o.size} bytes`, "retry");
      }
      let used = 0;
      while (used < value.length) {
        const n = Math.min(value.length - used, WRITE_BUFFER_BYTES - fill);
        buffers[current].set(value.subarray(used, used + n), fill);
        fill += n;
        used += n;
        offset += n;
        if (fill === WRITE_BUFFER_BYTES) await flush();
      }
      // A slow link still reaches the disk (and the progress records) often.
      if (fill > 0 && lastData - flushedAt >= FLUSH_INTERVAL_MS) await flush();
    }
    await flush();
    await writing;
    await syncing;
  } catch (e) {
    // What arrived before the failure is kept on disk, so the retry resumes after it.
    await flush().catch(() => {});
    await writing.catch(() => {});
    await (syncing as Promise<void> | null)?.catch(() => {});
    if (o.signal?.aborted) throw o.signal.reason ?? e;
    if (e instanceof DownloadError || isNoSpace(e)) throw e;
    throw new DownloadError(`connection lost at ${offset} bytes: ${(e as Error).message}`, "retry");
  } finally {
    clearInterval(watchdog);
    reader.cancel().catch(() => {});
  }
  return offset;
}
