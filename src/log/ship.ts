/**
 * Ships log lines to a log store over HTTP: VictoriaLogs' JSON-lines insert or Loki's push API, in batches,
 * with exponential backoff while the store is down and a bounded buffer that drops the oldest lines first.
 */
import { z } from "zod";

export const IngestFormatSchema = z.enum(["victorialogs", "loki"]);
export type IngestFormat = z.infer<typeof IngestFormatSchema>;

/** One line as buffered: its JSON text plus what Loki needs apart (its time in ns, its level label). */
export interface ShipLine {
  json: string;
  timeNs: string;
  level: string;
}

export interface ShipperOptions {
  /** The store's base URL (`http://host:9428`), or a full insert URL (a path other than `/` is kept). */
  url: string;
  format: IngestFormat;
  /** Sent as `Authorization: Bearer`; never logged, never in a stat or an error. */
  token: string | null;
  /**
   * Lines held at most while the store is slow or down (plus the one batch being sent); past it the oldest
   * are dropped (and counted).
   */
  bufferLines: number;
  batchLines: number;
  /** How often a partial batch is sent. */
  intervalMs: number;
  /** Labels Loki streams carry (the node's id); VictoriaLogs reads `nodeId` from each line. */
  labels: () => Record<string, string>;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  timeoutMs?: number;
  /** Told once when shipping starts failing and once when it works again (never per attempt). */
  onStateChange?: (ok: boolean, error: string | null) => void;
}

export interface ShipStats {
  url: string;
  format: IngestFormat;
  shipped: number;
  dropped: number;
  /** Lines the store refused outright (a 4xx other than 408/429): dropped, not retried. */
  rejected: number;
  buffered: number;
  bufferLines: number;
  failuresInARow: number;
  lastError: string | null;
  lastShippedAt: string | null;
}

/** The path and query each format posts to when the URL names none. */
const DEFAULT_PATH: Record<IngestFormat, string> = {
  victorialogs: "/insert/jsonline?_stream_fields=nodeId,logger&_msg_field=msg&_time_field=ts",
  loki: "/loki/api/v1/push",
};

export function ingestUrl(base: string, format: IngestFormat): string {
  const u = new URL(base);
  if (u.pathname !== "/" || u.search) return u.toString();
  return `${u.origin}${DEFAULT_PATH[format]}`;
}

/** The request body of one batch in the store's format. */
export function batchBody(
  format: IngestFormat,
  lines: readonly ShipLine[],
  labels: Record<string, string>,
): { body: string; contentType: string } {
  if (format === "victorialogs") {
    return { body: lines.map((l) => l.json).join("\n") + "\n", contentType: "application/stream+json" };
  }
  // One Loki stream per level: the labels stay few (node, job, level), the line keeps every field.
  const byLevel = new Map<string, [string, string][]>();
  for (const l of lines) {
    const values = byLevel.get(l.level) ?? [];
    values.push([l.timeNs, l.json]);
    byLevel.set(l.level, values);
  }
  const streams = [...byLevel].map(([level, values]) => ({
    stream: { job: "skulk", ...labels, level },
    values,
  }));
  return { body: JSON.stringify({ streams }), contentType: "application/json" };
}

/** A FIFO with O(1) push and shift, bounded by its owner. */
class Queue<T> {
  #items: (T | undefined)[] = [];
  #head = 0;
  get length(): number {
    return this.#items.length - this.#head;
  }
  push(v: T): void {
    this.#items.push(v);
  }
  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const v = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return v;
  }
  take(n: number): T[] {
    const out: T[] = [];
    while (out.length < n && this.length > 0) out.push(this.shift()!);
    return out;
  }
  unshiftAll(vs: T[]): void {
    this.#items = [...vs, ...this.#items.slice(this.#head)];
    this.#head = 0;
  }
}

export class Shipper {
  readonly #o: Required<Omit<ShipperOptions, "onStateChange">> & Pick<ShipperOptions, "onStateChange">;
  readonly #url: string;
  readonly #queue = new Queue<ShipLine>();
  #shipped = 0;
  #dropped = 0;
  #rejected = 0;
  #failures = 0;
  #lastError: string | null = null;
  #lastShippedAt: string | null = null;
  readonly #timer: ReturnType<typeof setInterval>;
  #sending: Promise<void> | null = null;
  #retryAt = 0;
  #closed = false;
  /** Set by close: no request may run past it (a store that accepts and never answers must not hold a shutdown). */
  #deadline = Infinity;
  /** Lines of the batch being sent: still held (they go back to the front if the send fails). */
  #inFlight = 0;

  constructor(o: ShipperOptions) {
    this.#o = { backoffBaseMs: 500, backoffMaxMs: 30_000, timeoutMs: 10_000, ...o };
    this.#url = ingestUrl(o.url, o.format);
    this.#timer = setInterval(() => this.#tick(), o.intervalMs);
    // The daemon's exit must not wait on this timer; close() sends what is left.
    Deno.unrefTimer(this.#timer);
  }

  /** Takes one line; never blocks and never throws (a sink is called for every log record). */
  push(line: ShipLine): void {
    if (this.#closed) return;
    this.#queue.push(line);
    if (this.#queue.length > this.#o.bufferLines) {
      this.#queue.shift();
      this.#dropped++;
    }
    if (this.#queue.length >= this.#o.batchLines) this.#tick();
  }

  stats(): ShipStats {
    return {
      url: this.#url.replace(/\?.*$/, ""),
      format: this.#o.format,
      shipped: this.#shipped,
      dropped: this.#dropped,
      rejected: this.#rejected,
      buffered: this.#queue.length + this.#inFlight,
      bufferLines: this.#o.bufferLines,
      failuresInARow: this.#failures,
      lastError: this.#lastError,
      lastShippedAt: this.#lastShippedAt,
    };
  }

  #tick(): void {
    if (this.#sending || this.#queue.length === 0 || Date.now() < this.#retryAt) return;
    this.#sending = this.#sendBatches().finally(() => (this.#sending = null));
  }

  /** Sends full batches back to back while they last and the store answers; one request at a time. */
  async #sendBatches(): Promise<void> {
    while (this.#queue.length > 0 && Date.now() >= this.#retryAt) {
      const batch = this.#queue.take(this.#o.batchLines);
      this.#inFlight = batch.length;
      const ok = await this.#send(batch).finally(() => (this.#inFlight = 0));
      if (!ok) return;
      if (this.#queue.length < this.#o.batchLines && !this.#closed) return; // the timer sends the rest
    }
  }

  async #send(batch: ShipLine[]): Promise<boolean> {
    const { body, contentType } = batchBody(this.#o.format, batch, this.#o.labels());
    const headers: Record<string, string> = { "content-type": contentType };
    if (this.#o.token) headers.authorization = `Bearer ${this.#o.token}`;
    let error: string;
    try {
      const res = await fetch(this.#url, {
        method: "POST",
        headers,
        body,
        signal: AbortSignal.timeout(Math.max(1, Math.min(this.#o.timeoutMs, this.#deadline - Date.now()))),
      });
      await res.body?.cancel();
      if (res.ok) {
        this.#shipped += batch.length;
        this.#lastShippedAt = new Date().toISOString();
        if (this.#failures > 0) this.#o.onStateChange?.(true, null);
        this.#failures = 0;
        this.#retryAt = 0;
        return true;
      }
      error = `the log store answered ${res.status}`;
      if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
        // Sending the same batch again would be refused again: it is dropped, and shipping goes on.
        this.#rejected += batch.length;
        this.#dropped += batch.length;
        this.#lastError = error;
        return true;
      }
    } catch (e) {
      error = `the log store is unreachable: ${(e as Error).message.split("\n")[0]}`;
    }
    // Back at the front, so order is kept; if the buffer filled meanwhile, the oldest lines go first.
    this.#queue.unshiftAll(batch);
    while (this.#queue.length > this.#o.bufferLines) {
      this.#queue.shift();
      this.#dropped++;
    }
    if (this.#failures === 0) this.#o.onStateChange?.(false, error);
    this.#failures++;
    this.#lastError = error;
    this.#retryAt = Date.now() +
      Math.min(this.#o.backoffMaxMs, this.#o.backoffBaseMs * 2 ** Math.min(this.#failures - 1, 30));
    return false;
  }

  /** Sends what is buffered (until `deadlineMs`), then stops. */
  async close(deadlineMs = 2000): Promise<void> {
    clearInterval(this.#timer);
    const end = Date.now() + deadlineMs;
    this.#deadline = end;
    this.#closed = true;
    // A send already under way had the ordinary timeout: it is waited for until the deadline only.
    if (this.#sending) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((r) => (timer = setTimeout(() => r("late"), deadlineMs)));
      const done = await Promise.race([this.#sending.then(() => "done" as const), late]);
      clearTimeout(timer);
      if (done === "late") return;
    }
    this.#retryAt = 0;
    while (this.#queue.length > 0 && Date.now() < end) {
      const before = this.#queue.length;
      await this.#sendBatches();
      if (this.#queue.length >= before) break; // the store is down: what is left is lost
      this.#retryAt = 0;
    }
  }
}
