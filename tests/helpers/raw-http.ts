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

  const chunks: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      // Keep the head and the first bytes of the body; count the rest.
      if (total < 64 * 1024 + KEEP_BODY) chunks.push(buf.slice(0, n));
      total += n;
    }
  } catch (e) {
    if (!timedOut && total === 0) {
      clearTimeout(timer);
      await writing;
      return { kind: "error", message: (e as Error).message, ms: ms() };
    }
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer or the peer */ }
  }
  await writing;
  if (timedOut) return { kind: "hang", ms: ms() };
  const text = dec.decode(concat(...chunks));
  const m = text.match(/^HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/);
  if (!m) {
    return {
      kind: "error",
      message: `no HTTP status line in ${JSON.stringify(text.slice(0, 200))}`,
      ms: ms(),
    };
  }
  const h = new Headers();
  for (const line of m[2].split("\r\n")) {
    const i = line.indexOf(":");
    if (i > 0) h.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  return { kind: "response", status: Number(m[1]), headers: h, body: m[3].slice(0, KEEP_BODY), ms: ms() };
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}
