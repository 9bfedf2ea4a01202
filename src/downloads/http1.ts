/**
 * A small HTTP/1.1 GET for model file bodies: one connection per request (TCP, or TLS for https), redirects
 * followed, Content-Length, chunked and close-delimited bodies read straight from the socket.
 */
// Why not fetch: its body streams cost the reading thread about twice the CPU per byte of plain socket reads,
// and a download that shares two cores with the hub and the engines is CPU-bound. Listings and proxied setups
// still use fetch.

export interface BodyReader {
  /** The next bytes, valid until the following read (the caller copies them out). */
  read(): Promise<{ done: boolean; value?: Uint8Array }>;
  /** Closes the connection; a pending read then ends as done. */
  cancel(): void;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  /** The URL that answered, after redirects. */
  url: string;
  body: BodyReader;
}

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_REDIRECTS = 10;
/** What one socket read may fill (a read often brings 100-200 KiB); fetch's BYOB reads use the same size. */
export const LANDING_BYTES = 1 << 20;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const PROXY_VARS = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/** downloads.http_client: `auto` (this client where it can serve the URL) or `fetch` always. */
export type HttpClient = "auto" | "fetch";

/**
 * This client serves plain http(s) URLs where no proxy is configured (fetch honours proxies; this does not)
 * and the `client` setting does not ask for fetch (a way out should a server need what this lacks).
 */
export function rawHttpUsable(
  url: string,
  client: HttpClient,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): boolean {
  const scheme = new URL(url).protocol;
  return (scheme === "http:" || scheme === "https:") && !PROXY_VARS.some((v) => env[v]) && client !== "fetch";
}

type Conn = Deno.TcpConn | Deno.TlsConn;

/**
 * GET `url`, following redirects (Authorization is not sent to another origin, as fetch does). `caCerts` adds
 * trusted roots for TLS (tests); otherwise the roots fetch uses are used.
 */
export async function httpGet(
  url: string,
  headers: Headers,
  signal?: AbortSignal,
  caCerts?: string[],
): Promise<RawResponse> {
  let current = new URL(url);
  const sent = new Headers(headers);
  for (let hop = 0;; hop++) {
    const res = await getOnce(current, sent, signal, caCerts);
    const location = res.headers.get("location");
    if (!REDIRECTS.has(res.status) || location === null) return res;
    res.body.cancel();
    if (hop >= MAX_REDIRECTS) throw new Error(`more than ${MAX_REDIRECTS} redirects from ${url}`);
    const next = new URL(location, current);
    if (next.origin !== current.origin) sent.delete("authorization");
    current = next;
  }
}

async function getOnce(
  url: URL,
  headers: Headers,
  signal: AbortSignal | undefined,
  caCerts: string[] | undefined,
): Promise<RawResponse> {
  signal?.throwIfAborted();
  const tls = url.protocol === "https:";
  const port = Number(url.port || (tls ? 443 : 80));
  const hostname = url.hostname.replace(/^\[|\]$/g, "");
  const conn: Conn = tls
    ? await Deno.connectTls({ hostname, port, ...(caCerts ? { caCerts } : {}) })
    : await Deno.connect({ hostname, port });
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    try {
      conn.close();
    } catch { /* closed already */ }
  };
  const onAbort = () => close();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`, "Connection: close"];
    for (const [k, v] of headers) {
      if (!["host", "connection", "content-length", "transfer-encoding"].includes(k)) {
        lines.push(`${k}: ${v}`);
      }
    }
    if (!headers.has("user-agent")) lines.push("User-Agent: skulk");
    if (!headers.has("accept-encoding")) lines.push("Accept-Encoding: identity");
    await writeAll(conn, new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n"));
    const head = await readHead(conn);
    const body = bodyOf(conn, head, close, () => signal?.removeEventListener("abort", onAbort));
    return { status: head.status, headers: head.headers, url: url.href, body };
  } catch (e) {
    signal?.removeEventListener("abort", onAbort);
    close();
    if (signal?.aborted) throw signal.reason ?? e;
    throw e;
  }
}

async function writeAll(conn: Conn, data: Uint8Array): Promise<void> {
  for (let off = 0; off < data.length;) off += await conn.write(data.subarray(off));
}

interface Head {
  status: number;
  headers: Headers;
  /** Body bytes that arrived with the head. */
  rest: Uint8Array;
}

/** Pure: the status line and headers of a response head (without the blank line), or why it is not one. */
export function parseHead(text: string): { status: number; headers: Headers } {
  const [statusLine, ...lines] = text.split("\r\n");
  const m = statusLine.match(/^HTTP\/1\.[01] (\d{3})(?: .*)?$/);
  if (!m) throw new Error(`not an HTTP/1.x response: ${JSON.stringify(statusLine.slice(0, 80))}`);
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(":");
    if (colon <= 0) throw new Error(`malformed response header: ${JSON.stringify(line.slice(0, 80))}`);
    headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  return { status: Number(m[1]), headers };
}

async function readHead(conn: Conn): Promise<Head> {
  const buf = new Uint8Array(MAX_HEAD_BYTES);
  let filled = 0;
  for (;;) {
    const n = await conn.read(buf.subarray(filled));
    if (n === null) throw new Error("connection closed before the response head");
    filled += n;
    const end = indexOfBlankLine(buf, filled);
    if (end >= 0) {
      const { status, headers } = parseHead(new TextDecoder().decode(buf.subarray(0, end)));
      // 1xx answers precede the real one; none is expected for a GET without Expect, but they are skipped.
      if (status >= 100 && status < 200) {
        buf.copyWithin(0, end + 4, filled);
        filled -= end + 4;
        continue;
      }
      return { status, headers, rest: buf.slice(end + 4, filled) };
    }
    if (filled === buf.length) throw new Error(`response head larger than ${MAX_HEAD_BYTES} bytes`);
  }
}

function indexOfBlankLine(buf: Uint8Array, length: number): number {
  for (let i = 0; i + 3 < length; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) return i;
  }
  return -1;
}

/** A byte source over the socket that first yields what arrived with the head. */
class Source {
  private readonly landing = new Uint8Array(LANDING_BYTES);
  constructor(private readonly conn: Conn, private pending: Uint8Array) {}

  /** Up to `max` bytes (a view, valid until the next call), or null at the end of the stream. */
  async next(max = LANDING_BYTES): Promise<Uint8Array | null> {
    if (this.pending.length > 0) {
      const out = this.pending.subarray(0, max);
      this.pending = this.pending.subarray(out.length);
      return out;
    }
    const n = await this.conn.read(this.landing.subarray(0, Math.min(max, LANDING_BYTES)));
    return n === null ? null : this.landing.subarray(0, n);
  }

  /** One CRLF-terminated line of chunk framing (at most 4 KiB), without the CRLF. */
  async line(): Promise<string> {
    let acc = new Uint8Array(0);
    for (;;) {
      const chunk = await this.next(4096);
      if (chunk === null) throw new Error("connection closed inside chunked framing");
      const grown = new Uint8Array(acc.length + chunk.length);
      grown.set(acc);
      grown.set(chunk, acc.length);
      acc = grown;
      for (let i = 0; i + 1 < acc.length; i++) {
        if (acc[i] === 13 && acc[i + 1] === 10) {
          this.unread(acc.subarray(i + 2));
          return new TextDecoder().decode(acc.subarray(0, i));
        }
      }
      if (acc.length > 4096) throw new Error("chunk framing line too long");
    }
  }

  /** Puts back bytes read past the line, ahead of any still pending. */
  private unread(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    const joined = new Uint8Array(bytes.length + this.pending.length);
    joined.set(bytes);
    joined.set(this.pending, bytes.length);
    this.pending = joined;
  }
}

function bodyOf(conn: Conn, head: Head, close: () => void, done: () => void): BodyReader {
  const src = new Source(conn, head.rest);
  let cancelled = false;
  let ended = false;
  const finish = () => {
    done();
    close();
  };
  const chunked = /(^|,)\s*chunked\s*$/i.test(head.headers.get("transfer-encoding") ?? "");
  const declared = head.headers.get("content-length");
  let left = chunked || declared === null ? Infinity : Number(declared);
  if (!chunked && declared !== null && !(Number.isInteger(left) && left >= 0)) {
    finish();
    throw new Error(`bad content-length ${declared}`);
  }

  const readPlain = async (): Promise<Uint8Array | null> => {
    if (left === 0) return null;
    const got = await src.next(Math.min(LANDING_BYTES, left));
    if (got === null) {
      if (left !== Infinity) {
        throw new Error(`connection closed with ${left} bytes of the body still to come`);
      }
      return null;
    }
    if (left !== Infinity) left -= got.length;
    return got;
  };

  let chunkLeft = 0;
  let crlfDue = false;
  const readChunked = async (): Promise<Uint8Array | null> => {
    // The CRLF after a chunk's data is read on the next call: reading it sooner could reuse the buffer that
    // holds the bytes just returned.
    if (crlfDue) {
      if ((await src.line()) !== "") throw new Error("chunk not followed by CRLF");
      crlfDue = false;
    }
    if (chunkLeft === 0) {
      const size = parseInt((await src.line()).split(";")[0].trim(), 16);
      if (!Number.isFinite(size) || size < 0) throw new Error("malformed chunk size");
      if (size === 0) {
        while ((await src.line()) !== "") { /* trailers */ }
        return null;
      }
      chunkLeft = size;
    }
    const got = await src.next(Math.min(LANDING_BYTES, chunkLeft));
    if (got === null) throw new Error("connection closed inside a chunk");
    chunkLeft -= got.length;
    crlfDue = chunkLeft === 0;
    return got;
  };

  return {
    read: async () => {
      if (ended || cancelled) return { done: true };
      try {
        const value = chunked ? await readChunked() : await readPlain();
        if (value === null) {
          ended = true;
          finish();
          return { done: true };
        }
        return { done: false, value };
      } catch (e) {
        finish();
        if (cancelled) return { done: true };
        throw e;
      }
    },
    cancel: () => {
      cancelled = true;
      finish();
    },
  };
}
