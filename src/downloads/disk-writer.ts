/**
 * The disk side of one download: appends buffers to the partial file and hashes them (sha256). It runs in a
 * worker (sink-worker.ts), or in the calling thread where a worker cannot start.
 */
import { createHash, type Hash } from "node:crypto";

async function writeAll(f: Deno.FsFile, chunk: Uint8Array): Promise<void> {
  let off = 0;
  while (off < chunk.length) off += await f.write(chunk.subarray(off));
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

// No fsync here: the writer runs at page-cache speed like any downloader, and the finished file is synced off
// the critical path and recorded as durable only then (durable.ts); a crash before that means a re-check.
export class DiskWriter {
  private constructor(
    private readonly file: Deno.FsFile,
    private readonly hash: Hash | null,
  ) {}

  /** Opens `path` for appending at `start`; with `hash`, the first `start` bytes are hashed first. */
  static async open(path: string, start: number, hash: boolean): Promise<DiskWriter> {
    const file = await Deno.open(path, { read: true, write: true });
    try {
      const h = hash ? createHash("sha256") : null;
      if (h && start > 0) await hashPrefix(file, start, h);
      await file.seek(start, Deno.SeekMode.Start);
      return new DiskWriter(file, h);
    } catch (e) {
      file.close();
      throw e;
    }
  }

  async write(buf: Uint8Array): Promise<void> {
    // The write runs on Deno's I/O threads while this thread hashes the same (unchanging) buffer.
    const writing = writeAll(this.file, buf);
    this.hash?.update(buf);
    await writing;
  }

  /** Closes the file and returns the sha256 (when asked for at open). */
  finish(): Promise<string | null> {
    this.close();
    return Promise.resolve(this.hash ? this.hash.digest("hex") : null);
  }

  /** Closes the file after a failure. */
  abandon(): Promise<void> {
    this.close();
    return Promise.resolve();
  }

  private close(): void {
    try {
      this.file.close();
    } catch { /* closed already */ }
  }
}

/** What the network side asks of the disk side; buffers travel transferred, never copied. */
export type SinkRequest =
  | { type: "open"; path: string; start: number; hash: boolean }
  | { type: "write"; buf: ArrayBuffer; length: number }
  | { type: "finish" };

export type SinkReply =
  | { type: "opened" }
  | { type: "written"; buf: ArrayBuffer; length: number }
  | { type: "finished"; sha256: string | null }
  | { type: "error"; message: string };

/**
 * Serves requests strictly in order (each write lands after the one before it) on one DiskWriter. After a failure
 * nothing more is written, so the file keeps a clean prefix, and the failure is the one reply left.
 */
export function diskServer(reply: (r: SinkReply) => void): (msg: SinkRequest) => void {
  let writer: DiskWriter | null = null;
  let queue: Promise<unknown> = Promise.resolve();
  let failed = false;
  const handle = async (msg: SinkRequest): Promise<SinkReply> => {
    switch (msg.type) {
      case "open":
        writer = await DiskWriter.open(msg.path, msg.start, msg.hash);
        return { type: "opened" };
      case "write":
        await writer!.write(new Uint8Array(msg.buf, 0, msg.length));
        return { type: "written", buf: msg.buf, length: msg.length };
      case "finish":
        return { type: "finished", sha256: await writer!.finish() };
    }
  };
  return (msg) => {
    queue = queue.then(async () => {
      if (failed) return;
      try {
        reply(await handle(msg));
      } catch (err) {
        failed = true;
        await writer?.abandon();
        reply({ type: "error", message: String((err as Error)?.message ?? err) });
      }
    });
  };
}
