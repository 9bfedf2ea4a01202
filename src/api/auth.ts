/**
 * The API key check: a client's `Authorization: Bearer <key>` (or `x-api-key`) compared in constant time, or,
 * for a request another node forwarded, that node's peer signature instead (the client's key never leaves its node).
 */
import type { Context, MiddlewareHandler } from "hono";
import { createHash, timingSafeEqual } from "node:crypto";
import { FORWARDED_HEADER } from "../serving/forward.ts";
import type { ApiEnv } from "./env.ts";
import { ApiError } from "./errors.ts";
import { MAX_UPLOAD_BYTES } from "./routes/audio.ts";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * Constant-time: both sides are hashed to 32 bytes first, so neither the key's length nor the position of
 * the first differing byte shows in the time the comparison takes.
 */
export function keyMatches(presented: string, key: string): boolean {
  return timingSafeEqual(digest(presented), digest(key));
}

/**
 * Largest forwarded body read before its signature is checked: the biggest request a node forwards is an
 * audio upload (its own limit plus the multipart framing).
 */
const FORWARDED_BODY_LIMIT = MAX_UPLOAD_BYTES + 64 * 1024;

const unauthorized = () =>
  new ApiError(401, "a valid API key is required: send 'Authorization: Bearer <key>'", {
    type: "authentication_error",
  });

/** Reads the body up to the limit (declared length refused first), then puts it back for the handler. */
async function boundedBody(c: Context<ApiEnv>): Promise<Uint8Array> {
  const raw = c.req.raw;
  if (!raw.body) return new Uint8Array();
  const tooBig = () => new ApiError(413, `forwarded body larger than ${FORWARDED_BODY_LIMIT} bytes`);
  if (Number(raw.headers.get("content-length") ?? 0) > FORWARDED_BODY_LIMIT) throw tooBig();
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of raw.body) {
    total += chunk.length;
    if (total > FORWARDED_BODY_LIMIT) throw tooBig();
    parts.push(chunk);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  c.req.raw = new Request(raw, { body: out });
  return out;
}

/**
 * Verdicts by request context: a signature is accepted once (replay guard), so the key check and the
 * tracing middleware, which both ask, share one verification.
 */
const verdicts = new WeakMap<object, Promise<boolean>>();

/** True when the request is one another node of this cluster forwarded and signed (verified once per request). */
export function signedForward(c: Context<ApiEnv>): Promise<boolean> {
  let v = verdicts.get(c);
  if (!v) verdicts.set(c, v = verifyForward(c));
  return v;
}

async function verifyForward(c: Context<ApiEnv>): Promise<boolean> {
  const cluster = c.var.node.cluster;
  const by = c.req.header(FORWARDED_HEADER);
  if (!cluster || !by) return false;
  const early = cluster.precheck(c.req.raw.headers);
  if (early) return false;
  const url = new URL(c.req.url);
  const verdict = await cluster.verify({
    method: c.req.method,
    path: url.pathname + url.search,
    headers: c.req.raw.headers,
    body: await boundedBody(c),
  });
  return verdict.ok && verdict.nodeId === by;
}

export function apiKeyAuth(key: string, open: (c: Context<ApiEnv>) => boolean): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    if (open(c)) return await next();
    const auth = c.req.header("authorization") ?? "";
    // Anthropic's clients send the key as x-api-key; a bearer token, when there is one, is the one checked.
    const presented = auth.startsWith("Bearer ")
      ? auth.slice("Bearer ".length)
      : c.req.header("x-api-key") ?? null;
    if (presented !== null && keyMatches(presented, key)) return await next();
    if (presented === null && await signedForward(c)) {
      c.set("peer", c.req.header(FORWARDED_HEADER));
      return await next();
    }
    throw unauthorized();
  };
}
