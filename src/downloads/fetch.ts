/**
 * One file from a URL to disk: streamed into `<dest>.partial` (resumed with `Range`), checked for size and
 * sha256 while it streams (in a worker, sink.ts), then renamed into place. Memory use is fixed, whatever the size.
 * It does not fsync: the caller records the file as not yet durable and syncs it off the critical path (durable.ts).
 */
import { createHash } from "node:crypto";
import { dirname } from "node:path";
import { DownloadError } from "./errors.ts";
import {
  type BodyReader,
  type HttpClient,
  httpGet,
  LANDING_BYTES,
  rawHttpUsable,
  type RawResponse,
} from "./http1.ts";
import { FileSink } from "./sink.ts";

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
  /** downloads.http_client: `fetch` keeps our HTTP/1.1 client out of the way. */
  httpClient?: HttpClient;
}

export interface FetchFileResult {
  bytes: number;
  /** Bytes that were already in the partial file and were not fetched again. */
  resumedFrom: number;
  /** The content's sha256, computed while streaming even when the hub gave none (the record a later check uses). */
  sha256: string;
}

const FLUSH_INTERVAL_MS = 250;
/** Below this many bytes to fetch, writing and hashing stay in this thread (a worker takes 30-80 ms to start). */
const WORKER_FROM_BYTES = 1 << 20;

export const partialPath = (dest: string) => `${dest}.partial`;

async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await Deno.stat(path)).size;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
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

export function isNoSpace(e: unknown): boolean {
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
    // Only a non-empty partial is truncated: on ext4 a truncate to zero makes the file's last close start a
    // writeback of every byte written since (auto_da_alloc), which put 0.4-0.9 s per GB back on the critical path.
    if (start === 0 && (await file.stat()).size > 0) await file.truncate(0);
    o.onBytes?.(start);
    const resumedFrom = start;
    let written = start;
    let got: string | null;
    if (o.size === null || start < o.size) {
      ({ offset: written, sha256: got } = await streamInto(o, file, start));
    } else {
      got = await sha256File(partial, o.signal); // complete already: only the check is left
    }
    if (o.size !== null && written !== o.size) {
      throw new DownloadError(`body ended at ${written} of ${o.size} bytes`, "retry");
    }
    if (o.sha256 && got !== o.sha256) {
      await file.truncate(0);
      throw new DownloadError(
        `sha256 mismatch (expected ${o.sha256}, got ${got}); the file is fetched again`,
        "retry",
      );
    }
    if (got === null) throw new DownloadError("the download writer returned no sha256", "retry");
    file.close();
    await Deno.rename(partial, o.dest);
    return { bytes: written, resumedFrom, sha256: got };
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

/**
 * Reads a body in large pieces: a BYOB read fills a 1 MiB landing buffer with all the socket has (often 100-200
 * KiB, against 64 KiB chunks from a default reader, measured at 40 % less CPU). The bytes are copied out before
 * the next read, because a cancelled or failed BYOB read takes its buffer with it.
 */
function bodyReader(body: ReadableStream<Uint8Array>): BodyReader {
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch { /* not a byte stream: read its own chunks */ }
  if (!byob) {
    const plain = body.getReader();
    return { read: () => plain.read(), cancel: () => void plain.cancel().catch(() => {}) };
  }
  const reader = byob;
  let landing: Uint8Array<ArrayBuffer> = new Uint8Array(LANDING_BYTES);
  return {
    read: async () => {
      const { done, value } = await reader.read(landing);
      if (value) landing = new Uint8Array(value.buffer as ArrayBuffer);
      return { done, value: value && value.length > 0 ? value : undefined };
    },
    cancel: () => void reader.cancel().catch(() => {}),
  };
}

/** The file's GET: our HTTP/1.1 client where it can serve the URL (less CPU per byte), else fetch (proxies). */
async function get(
  url: string,
  headers: Headers,
  signal: AbortSignal | undefined,
  client: HttpClient,
): Promise<RawResponse> {
  if (rawHttpUsable(url, client)) return await httpGet(url, headers, signal);
  const res = await fetch(url, { headers, signal, redirect: "follow" });
  const empty: BodyReader = { read: () => Promise.resolve({ done: true }), cancel: () => {} };
  return {
    status: res.status,
    headers: res.headers,
    url: res.url,
    body: res.body ? bodyReader(res.body) : empty,
  };
}

async function streamInto(
  o: FetchFileOptions,
  file: Deno.FsFile,
  start: number,
): Promise<{ offset: number; sha256: string | null }> {
  const headers = new Headers(o.headers);
  if (start > 0) headers.set("range", `bytes=${start}-`);
  let res: RawResponse;
  try {
    res = await get(o.url, headers, o.signal, o.httpClient ?? "auto");
  } catch (e) {
    if (o.signal?.aborted) throw o.signal.reason ?? e;
    throw new DownloadError(`request failed: ${(e as Error).message}`, "retry");
  }
  if (res.status === 416 && start > 0) {
    // The partial is not a prefix the server recognises; start over.
    res.body.cancel();
    await file.truncate(0);
    throw new DownloadError(
      `server refused the resume range at ${start} bytes; restarting the file`,
      "retry",
    );
  }
  if (res.status < 200 || res.status > 299) {
    res.body.cancel();
    const fatal = res.status === 401 || res.status === 403 || res.status === 404;
    const why = res.status === 401 || res.status === 403
      ? "access refused: set HF_TOKEN to a token that can read this repo, or accept its license on the hub"
      : res.status === 404
      ? "not found on the hub"
      : "server error";
    throw new DownloadError(`HTTP ${res.status} for ${o.url}: ${why}`, fatal ? "fatal" : "retry");
  }
  const offset = start;
  if (start > 0 && res.status !== 206) {
    // The server ignored Range and sends the whole file: drop what we had, and start again with a fresh hash
    // (the running one would have begun from the partial's bytes).
    res.body.cancel();
    await file.truncate(0);
    throw new DownloadError(
      "server ignored the resume range; restarting the file with a fresh hash",
      "retry",
    );
  }
  if (res.status === 206) {
    const m = res.headers.get("content-range")?.match(/^bytes (\d+)-/);
    if (!m || Number(m[1]) !== start) {
      res.body.cancel();
      throw new DownloadError(
        `server answered range ${res.headers.get("content-range")} for a resume at ${start}`,
        "retry",
      );
    }
  }
  // The disk side (write, sha256) runs in a worker; this thread only reads the socket and copies.
  let sink: FileSink;
  try {
    const small = o.size !== null && o.size - offset < WORKER_FROM_BYTES;
    sink = await FileSink.open(partialPath(o.dest), offset, true, (at) => o.onBytes?.(at), small);
  } catch (e) {
    res.body.cancel();
    if (isNoSpace(e)) throw e;
    throw new DownloadError(`could not open the partial file: ${(e as Error).message}`, "retry");
  }
  const reader = res.body;
  // One watchdog per response, not a timer per chunk: a stalled connection is cancelled and retried.
  let lastData = performance.now();
  let flushedAt = lastData;
  let stalled = false;
  const timeoutMs = o.readTimeoutMs;
  const watchdog = timeoutMs
    ? setInterval(() => {
      if (performance.now() - lastData < timeoutMs) return;
      stalled = true;
      reader.cancel();
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
      if (!value) continue;
      lastData = performance.now();
      if (o.size !== null && sink.offset + value.length > o.size) {
        throw new DownloadError(`server sent more than the expected ${o.size} bytes`, "retry");
      }
      await sink.push(value);
      // A slow link still reaches the disk (and the progress records) often.
      if (lastData - flushedAt >= FLUSH_INTERVAL_MS) {
        flushedAt = lastData;
        await sink.flush();
      }
    }
    return { offset: sink.offset, sha256: await sink.finish() };
  } catch (e) {
    // What arrived before the failure is kept on disk, so the retry resumes after it.
    await sink.settle();
    if (o.signal?.aborted) throw o.signal.reason ?? e;
    if (e instanceof DownloadError || isNoSpace(e)) throw e;
    throw new DownloadError(`connection lost at ${sink.offset} bytes: ${(e as Error).message}`, "retry");
  } finally {
    clearInterval(watchdog);
    reader.cancel();
    sink.close();
  }
}
