/**
 * The network side's handle on a download's disk side: gathers body chunks into 4 MiB buffers and hands each,
 * without copying, to a Worker (sink-worker.ts) that writes, hashes and syncs it, then hands it back for reuse.
 */

import { diskServer, type SinkReply, type SinkRequest } from "./disk-writer.ts";
import { logger } from "../log/mod.ts";

const BUFFER_BYTES = 4 * 1024 * 1024;
/** Buffers in flight: one filling here, the others queued for or being written there. Memory is fixed at 4 x 4 MiB. */
const BUFFERS = 4;

const log = logger("downloads");
let workerUnavailable = false;

export class FileSink {
  /** Requests to the disk side: a worker, or this thread where a worker could not start. */
  private send: (msg: SinkRequest, transfer?: Transferable[]) => void;
  private worker: Worker | null;
  /** The worker itself failed (did not load, or died), as opposed to reporting a disk error. */
  private crashed = false;
  private readonly free: ArrayBuffer[] = [];
  private current: Uint8Array;
  private fill = 0;
  /** Bytes the worker has written (the partial file's length, as far as this side knows). */
  private written: number;
  private queued: number;
  private waiters: ((reply: SinkReply) => void)[] = [];
  private failure: Error | null = null;
  private freed: (() => void) | null = null;

  private constructor(
    start: number,
    private readonly onWritten: (bytesOnDisk: number) => void,
    inThread: boolean,
  ) {
    if (inThread) {
      this.worker = null;
      const serve = diskServer((r) => this.receive(r));
      this.send = (msg) => serve(msg);
    } else {
      // A literal URL beside the module; `deno compile` embeds it through `--include` (see the Makefile).
      const worker = new Worker(new URL("./sink-worker.ts", import.meta.url).href, { type: "module" });
      worker.onmessage = (e: MessageEvent<SinkReply>) => this.receive(e.data);
      worker.onerror = (e: ErrorEvent) => {
        e.preventDefault();
        this.crashed = true;
        this.fail(new Error(`download writer failed: ${e.message}`));
      };
      this.worker = worker;
      this.send = (msg, transfer = []) => worker.postMessage(msg, transfer);
    }
    this.written = start;
    this.queued = start;
    for (let i = 0; i < BUFFERS; i++) this.free.push(new ArrayBuffer(BUFFER_BYTES));
    this.current = new Uint8Array(this.free.pop()!);
  }

  /**
   * Opens `path` at `start`, in a new worker unless `inThread` (a worker costs 30-80 ms to start: more than a
   * small file takes); with `hash`, the first `start` bytes are hashed first.
   */
  static async open(
    path: string,
    start: number,
    hash: boolean,
    onWritten: (bytesOnDisk: number) => void,
    inThread = false,
  ): Promise<FileSink> {
    const sink = new FileSink(start, onWritten, inThread || workerUnavailable);
    try {
      await sink.request({ type: "open", path, start, hash });
      return sink;
    } catch (e) {
      sink.close();
      if (!sink.crashed) throw e;
      // A worker that cannot start (a binary built without its module) costs speed, not the download.
      workerUnavailable = true;
      log.warn("download writer worker unavailable; writing and hashing in the main thread", {
        error: String(e),
      });
      return FileSink.open(path, start, hash, onWritten, true);
    }
  }

  /** Bytes handed to the sink so far, counting from the start of the file. */
  get offset(): number {
    return this.queued + this.fill;
  }

  /** Copies `chunk` in; waits only when every buffer is still queued for the disk. */
  async push(chunk: Uint8Array): Promise<void> {
    let used = 0;
    while (used < chunk.length) {
      const n = Math.min(chunk.length - used, BUFFER_BYTES - this.fill);
      this.current.set(chunk.subarray(used, used + n), this.fill);
      this.fill += n;
      used += n;
      if (this.fill === BUFFER_BYTES) await this.flush();
    }
  }

  /** Hands the filled part of the current buffer to the worker. */
  async flush(): Promise<void> {
    this.throwIfFailed();
    if (this.fill === 0) return;
    const length = this.fill;
    const buf = this.current.buffer as ArrayBuffer;
    this.fill = 0;
    this.queued += length;
    this.send({ type: "write", buf, length }, [buf]);
    while (this.free.length === 0) {
      this.throwIfFailed();
      await new Promise<void>((r) => (this.freed = r));
    }
    this.current = new Uint8Array(this.free.pop()!);
  }

  /** Writes what is buffered, waits for the disk, and returns the sha256 (when asked for at open). */
  async finish(): Promise<string | null> {
    await this.flush();
    const reply = await this.request({ type: "finish" });
    return reply.type === "finished" ? reply.sha256 : null;
  }

  /** Waits until everything handed over so far is on disk (or the worker failed), without throwing. */
  async settle(): Promise<void> {
    try {
      await this.flush();
      await this.request({ type: "finish" });
    } catch { /* the caller is already handling a failure */ }
  }

  close(): void {
    this.worker?.terminate();
  }

  private request(msg: SinkRequest): Promise<SinkReply> {
    this.throwIfFailed();
    // Replies come in request order; "written" replies are consumed by receive(), the others by a waiter.
    const reply = new Promise<SinkReply>((resolve) => this.waiters.push(resolve));
    this.send(msg);
    return reply.then((r) => {
      if (r.type === "error") throw new Error(r.message);
      return r;
    });
  }

  private receive(reply: SinkReply): void {
    if (reply.type === "written") {
      this.written += reply.length;
      this.free.push(reply.buf);
      this.onWritten(this.written);
      this.wake();
      return;
    }
    if (reply.type === "error") {
      this.fail(new Error(reply.message));
      return;
    }
    this.waiters.shift()?.(reply);
  }

  private fail(e: Error): void {
    this.failure ??= e;
    for (const w of this.waiters.splice(0)) w({ type: "error", message: e.message });
    this.wake();
  }

  private wake(): void {
    const f = this.freed;
    this.freed = null;
    f?.();
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }
}
