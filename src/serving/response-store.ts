/**
 * The Responses kept for `previous_response_id`: each stored response's whole conversation (its input, the
 * earlier turns it continued, and its output as input items), in memory, bounded by count, bytes and age.
 */

/** One kept response: the conversation a follow-up continues. */
export interface StoredResponse {
  /** Input items, in order, that replay the conversation up to and including this response's output. */
  items: unknown[];
}

export interface ResponseStoreLimits {
  /** Responses kept at most; the oldest goes first. */
  maxEntries: number;
  /** Bytes of kept conversations (as JSON) at most; the oldest go first. */
  maxBytes: number;
  /** How long a response is kept, in milliseconds. */
  ttlMs: number;
}

interface Entry {
  value: StoredResponse;
  bytes: number;
  expiresAt: number;
}

/** A bounded map of response id → conversation; a Map keeps insertion order, so the first key is the oldest. */
export class ResponseStore {
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  constructor(readonly limits: ResponseStoreLimits, readonly now: () => number = Date.now) {}

  get size(): number {
    return this.#entries.size;
  }

  /** Keeps a response; one larger than the byte bound alone is not kept (false). */
  put(id: string, value: StoredResponse): boolean {
    const bytes = JSON.stringify(value.items).length;
    if (bytes > this.limits.maxBytes || this.limits.maxEntries === 0) return false;
    this.#drop(id);
    this.#expire();
    while (
      this.#entries.size >= this.limits.maxEntries || this.#bytes + bytes > this.limits.maxBytes
    ) {
      this.#drop(this.#entries.keys().next().value!);
    }
    this.#entries.set(id, { value, bytes, expiresAt: this.now() + this.limits.ttlMs });
    this.#bytes += bytes;
    return true;
  }

  /** The kept response, or undefined when it was never kept here, has expired or was pushed out. */
  get(id: string): StoredResponse | undefined {
    const e = this.#entries.get(id);
    if (!e) return undefined;
    if (e.expiresAt <= this.now()) {
      this.#drop(id);
      return undefined;
    }
    return e.value;
  }

  #drop(id: string): void {
    const e = this.#entries.get(id);
    if (!e) return;
    this.#entries.delete(id);
    this.#bytes -= e.bytes;
  }

  /** Entries expire in insertion order (one TTL for all), so the sweep stops at the first live one. */
  #expire(): void {
    const now = this.now();
    for (const [id, e] of this.#entries) {
      if (e.expiresAt > now) break;
      this.#drop(id);
    }
  }
}

const byNode = new WeakMap<object, ResponseStore>();

/** The node's store, made on first use (keyed by the node's context object). */
export function responseStoreOf(node: object, limits: ResponseStoreLimits): ResponseStore {
  let s = byNode.get(node);
  if (!s) byNode.set(node, s = new ResponseStore(limits));
  return s;
}
