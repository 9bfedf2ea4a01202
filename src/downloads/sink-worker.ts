/**
 * The disk side of one download, run in a Worker (see sink.ts): appends the buffers the network side hands over,
 * hashes them (sha256) and flushes dirty pages every 16 MiB, so the thread reading the socket only copies bytes.
 */
/// <reference lib="deno.worker" />
import { createHash, type Hash } from "node:crypto";
import type { SinkReply, SinkRequest } from "./sink.ts";

const SYNC_EVERY_BYTES = 16 * 1024 * 1024;

let file: Deno.FsFile | null = null;
let path = "";
let hash: Hash | null = null;
let unsynced = 0;
// Through a second handle: Deno runs one op at a time per file resource, and a sync on the writing handle would
// hold up the next write; fdatasync on any handle flushes the file's pages.
let syncing: Promise<void> | null = null;

async function syncThroughSecondHandle(): Promise<void> {
  using f = await Deno.open(path, { read: true });
  await f.syncData();
}

/** Feeds the first `length` bytes of the file into the hash (to continue hashing a resumed partial). */
async function hashPrefix(f: Deno.FsFile, length: number, h: Hash): Promise<void> {
  const buf = new Uint8Array(1 << 20);
  await f.seek(0, Deno.SeekMode.Start);
  let left = length;
  while (left > 0) {
    const n = await f.read(buf.subarray(0, Math.min(buf.length, left)));
    if (n === null) throw new Error(`partial file ended before ${length} bytes while rehashing`);
    h.update(buf.subarray(0, n));
    left -= n;
  }
}

async function writeAll(f: Deno.FsFile, chunk: Uint8Array): Promise<void> {
  let off = 0;
  while (off < chunk.length) off += await f.write(chunk.subarray(off));
}

async function handle(msg: SinkRequest): Promise<SinkReply> {
  switch (msg.type) {
    case "open": {
      path = msg.path;
      file = await Deno.open(path, { read: true, write: true });
      hash = msg.hash ? createHash("sha256") : null;
      if (hash && msg.start > 0) await hashPrefix(file, msg.start, hash);
      await file.seek(msg.start, Deno.SeekMode.Start);
      return { type: "opened" };
    }
    case "write": {
      const buf = new Uint8Array(msg.buf, 0, msg.length);
      // The write runs on Deno's I/O threads while this thread hashes the same (unchanging) buffer.
      const writing = writeAll(file!, buf);
      hash?.update(buf);
      await writing;
      unsynced += msg.length;
      if (unsynced >= SYNC_EVERY_BYTES && syncing === null) {
        unsynced = 0;
        syncing = syncThroughSecondHandle().finally(() => (syncing = null));
      }
      return { type: "written", buf: msg.buf, length: msg.length };
    }
    case "finish": {
      await syncing;
      file?.close();
      file = null;
      return { type: "finished", sha256: hash ? hash.digest("hex") : null };
    }
  }
}

// Requests are handled strictly in order: each write lands after the one before it.
let queue: Promise<unknown> = Promise.resolve();
let failed = false;
self.onmessage = (e: MessageEvent<SinkRequest>) => {
  queue = queue.then(async () => {
    if (failed) return; // after a failure nothing more is written: the file keeps a clean prefix
    try {
      const reply = await handle(e.data);
      self.postMessage(reply, reply.type === "written" ? [reply.buf] : []);
    } catch (err) {
      failed = true;
      await (syncing as Promise<void> | null)?.catch(() => {});
      self.postMessage(
        { type: "error", message: String((err as Error)?.message ?? err) } satisfies SinkReply,
      );
    }
  });
};
