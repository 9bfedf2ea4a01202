/**
 * One HTTP/1.1 request written byte for byte on a fresh loopback connection, for tests that must send what
 * fetch would rewrite: `..` and `%2E%2E` segments, backslashes, odd content types, bodies the server refuses.
 */

export interface RawRequest {
  method: string;
  /** The request target exactly as sent (no normalisation, no encoding). */
  target: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

export type RawOutcome =
  | { kind: "response"; status: number; headers: Headers; body: string; ms: number }
  /** No complete answer within the deadline: the connection was closed. */
  | { kind: "hang"; ms: number }
  /** The connection failed before a status line arrived (reset, refused). */
  | { kind: "error"; message: string; ms: number };

const enc = new TextEncoder();
const dec = new TextDecoder();
/** Enough of a body to say what went wrong; the rest is read and dropped. */
const KEEP_BODY = 4096;

/** Sends the request with `Connection: close` and reads the answer to its end, or gives up at `timeoutMs`. */
export async function rawRequest(port: number, req: RawRequest, timeoutMs: number): Promise<RawOutcome> {
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  const body = typeof req.body === "string" ? enc.encode(req.body) : req.body;
  const headers: Record<string, string> = { host: `127.0.0.1:${port}`, connection: "close", ...req.headers };
  if (body) headers["content-length"] = String(body.length);
  const head = `${req.method} ${req.target} HTTP/1.1\r\n` +
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n";

  let conn: Deno.TcpConn;
  try {
    conn = await Deno.connect({ hostname: "127.0.0.1", port });
  } catch (e) {
    return { kind: "error", message: (e as Error).message, ms: ms() };
  }
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      conn.close();
    } catch { /* already closed */ }
  }, timeoutMs);
  // The server may answer (413, 401) and close before the body is all written: writing runs beside reading,
  // and a failed write only matters when no answer comes.
  const writing = (async () => {
    const bytes = body ? concat(enc.encode(head), body) : enc.encode(head);
    let at = 0;
    while (at < bytes.length) at += await conn.write(bytes.subarray(at));
  })().catch(() => undefined);

  // The answer is complete when its framing says so (Content-Length, or the last chunk): a server may answer
  // early (413, 401) and keep the connection open while the unread body drains, as clients expect.
  const reader = new ResponseReader();
  const buf = new Uint8Array(64 * 1024);
  let failure: string | null = null;
  try {
    while (!reader.done) {
      const n = await conn.read(buf);
      if (n === null) {
        reader.end();
        break;
      }
      reader.push(buf.subarray(0, n));
    }
  } catch (e) {
    if (!timedOut) failure = (e as Error).message;
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer or the peer */ }
  }
  await writing;
  if (timedOut) return { kind: "hang", ms: ms() };
  if (!reader.head) {
    return { kind: "error", message: failure ?? "the connection closed before a status line", ms: ms() };
  }
  return { kind: "response", ...reader.head, body: dec.decode(reader.kept), ms: ms() };
}

/** Parses one HTTP/1.1 response as bytes arrive: the head, then the body by its framing (first bytes kept). */
class ResponseReader {
  head: { status: number; headers: Headers } | null = null;
  done = false;
  kept: Uint8Array = new Uint8Array(0);
  #pending: Uint8Array = new Uint8Array(0);
  /** Body bytes still expected under Content-Length; null: chunked or until close. */
  #remaining: number | null = null;
  #chunked = false;
  /** Within a chunked body: bytes of the current chunk left (then its CRLF), or -1 while reading a size line. */
  #chunkLeft = -1;

  push(bytes: Uint8Array): void {
    this.#pending = concat(this.#pending, bytes);
    if (!this.head && !this.#readHead()) return;
    this.#readBody();
  }

  /** The peer closed: a body framed by the close is complete. */
  end(): void {
    this.done = true;
  }

  #readHead(): boolean {
    const text = dec.decode(this.#pending.subarray(0, Math.min(this.#pending.length, 256 * 1024)));
    const at = text.indexOf("\r\n\r\n");
    if (at < 0) return false;
    const lines = text.slice(0, at).split("\r\n");
    const m = lines[0].match(/^HTTP\/1\.[01] (\d{3})/);
    const headers = new Headers();
    for (const line of lines.slice(1)) {
      const i = line.indexOf(":");
      if (i > 0) headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
    }
    this.head = { status: m ? Number(m[1]) : 0, headers };
    this.#pending = this.#pending.subarray(enc.encode(text.slice(0, at + 4)).length);
    this.#chunked = /chunked/i.test(headers.get("transfer-encoding") ?? "");
    const length = headers.get("content-length");
    if (!this.#chunked && length !== null) this.#remaining = Number(length);
    if (this.head.status === 204 || this.head.status === 304) this.#remaining = 0;
    return true;
  }

  #keep(bytes: Uint8Array): void {
    if (this.kept.length < KEEP_BODY) {
      this.kept = concat(this.kept, bytes.subarray(0, KEEP_BODY - this.kept.length));
    }
  }

  #readBody(): void {
    if (!this.#chunked) {
      this.#keep(this.#pending);
      if (this.#remaining !== null) {
        this.#remaining -= this.#pending.length;
        if (this.#remaining <= 0) this.done = true;
      }
      this.#pending = new Uint8Array(0);
      return;
    }
    while (!this.done) {
      if (this.#chunkLeft < 0) {
        const line = dec.decode(this.#pending.subarray(0, Math.min(this.#pending.length, 1024)));
        const at = line.indexOf("\r\n");
        if (at < 0) return;
        const size = parseInt(line.slice(0, at), 16);
        this.#pending = this.#pending.subarray(at + 2);
        if (!(size > 0)) {
          this.done = true; // the last chunk (trailers are not read)
          return;
        }
        this.#chunkLeft = size;
      }
      const take = Math.min(this.#chunkLeft, this.#pending.length);
      this.#keep(this.#pending.subarray(0, take));
      this.#chunkLeft -= take;
      this.#pending = this.#pending.subarray(take);
      // The chunk's data, then its CRLF; either may still be on its way.
      if (this.#chunkLeft > 0 || this.#pending.length < 2) return;
      this.#pending = this.#pending.subarray(2);
      this.#chunkLeft = -1;
    }
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}
