/**
 * The log file: JSON lines appended to `<data-dir>/logs/skulk.log`, rotated by size to `.1` (newest) … and
 * at most N files kept. Lines are buffered briefly and written within half a second, so a capture's log tail
 * holds what was just logged.
 */

const enc = new TextEncoder();

/**
 * Hand-written rather than @logtape/file's rotating sink: that one writes its buffer only when a later record
 * arrives (a quiet node's last lines stay in memory) and fsyncs every write; a log line needs neither.
 */
export class RotatingFile {
  #file: Deno.FsFile;
  #size: number;
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  readonly #chunk: number;
  readonly #timer: ReturnType<typeof setInterval>;
  #closed = false;

  constructor(readonly path: string, readonly maxBytes: number, readonly files: number, flushMs = 500) {
    Deno.mkdirSync(path.replace(/\/[^/]*$/, "") || ".", { recursive: true });
    this.#file = Deno.openSync(path, { append: true, create: true });
    this.#size = this.#file.statSync().size;
    // A file passes its bound only by a single line longer than a quarter of it.
    this.#chunk = Math.max(1, Math.min(8192, Math.floor(maxBytes / 4)));
    this.#timer = setInterval(() => this.flush(), flushMs);
    Deno.unrefTimer(this.#timer);
  }

  write(line: string): void {
    if (this.#closed) return;
    const bytes = enc.encode(line);
    if (this.#pendingBytes + bytes.length > this.#chunk) this.flush();
    this.#pending.push(bytes);
    this.#pendingBytes += bytes.length;
  }

  flush(): void {
    if (this.#pending.length === 0) return;
    const out = new Uint8Array(this.#pendingBytes);
    let at = 0;
    for (const b of this.#pending) (out.set(b, at), at += b.length);
    this.#pending = [];
    this.#pendingBytes = 0;
    try {
      if (this.#size > 0 && this.#size + out.length > this.maxBytes) this.#rotate();
      let written = 0;
      while (written < out.length) written += this.#file.writeSync(out.subarray(written));
      this.#size += out.length;
    } catch {
      // A full or vanished disk must not take the node down with it; stderr still has every line.
    }
  }

  #rotate(): void {
    this.#file.close();
    const rotated = (i: number) => `${this.path}.${i}`;
    try {
      Deno.removeSync(rotated(this.files - 1));
    } catch { /* fewer files so far */ }
    for (let i = this.files - 2; i >= 1; i--) {
      try {
        Deno.renameSync(rotated(i), rotated(i + 1));
      } catch { /* not there yet */ }
    }
    Deno.renameSync(this.path, rotated(1));
    this.#file = Deno.openSync(this.path, { append: true, create: true });
    this.#size = 0;
  }

  close(): void {
    if (this.#closed) return;
    clearInterval(this.#timer);
    this.flush();
    this.#closed = true;
    this.#file.close();
  }
}
