/**
 * The API's guards at its edge: which browser origins may call it (CORS, cross-site writes, WebSockets),
 * the headers every answer carries, and request bodies' size limit and read deadline. app.ts mounts them.
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { cors } from "hono/cors";
import type { Config } from "../config/schema.ts";
import type { ApiEnv } from "./env.ts";
import { ApiError, errorResponse } from "./errors.ts";
import { UPLOAD_PATHS } from "./routes/audio.ts";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Headers an allowlisted page's script may read from an answer. */
const EXPOSED = [
  "X-Request-Id",
  "Retry-After",
  "X-Audio-Sample-Rate",
  "X-Audio-Channels",
  "X-Audio-Sample-Format",
  "X-Audio-Voice",
];

export interface OriginRequest {
  method: string;
  /** The `Origin` header, when sent. */
  origin?: string;
  /** The `Sec-Fetch-Site` header, when sent. */
  fetchSite?: string;
  /** The `Host` header: the authority the client used to reach this node. */
  host?: string;
  websocket: boolean;
}

/** Whether an Origin names the authority the request was sent to (the page was served by this node). */
export function isOwnOrigin(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  try {
    return new URL(origin).host === new URL(`http://${host}`).host;
  } catch {
    return false;
  }
}

/**
 * Pure: null when a request may go on, else who is refused. Reads and preflights always pass (CORS keeps
 * their answers from foreign pages); writes and WebSockets from a page on another origin do not, because a
 * browser sends a form or text/plain POST, and opens a WebSocket, without asking CORS first.
 */
export function refusedOrigin(req: OriginRequest, allowed: readonly string[]): string | null {
  if (SAFE_METHODS.has(req.method) && !req.websocket) return null;
  if (allowed.includes("*")) return null;
  if (req.origin !== undefined) {
    if (isOwnOrigin(req.origin, req.host) || allowed.includes(req.origin)) return null;
    return req.origin;
  }
  // Without Origin, only a browser's own word that the page is cross-site refuses: curl and SDKs send neither.
  return req.fetchSite === "cross-site" ? "a cross-site page (Sec-Fetch-Site: cross-site)" : null;
}

function refusal(who: string): ApiError {
  return new ApiError(
    403,
    `requests from ${who} are refused: only this node's own pages and the origins in api.cors_origins (SKULK_CORS_ORIGINS) may change it or open sockets`,
    { type: "permission_error", code: "origin_not_allowed" },
  );
}

/**
 * CORS for the allowlist only (a foreign origin gets no Access-Control-* header, so its script cannot read
 * answers), `*` explicitly without credentials, then the refusal of foreign writes and WebSockets.
 */
export function originGuards(config: Pick<Config, "corsOrigins">): MiddlewareHandler<ApiEnv>[] {
  // Read per request: the list is cluster-wide and a `ClusterConfigChanged` event replaces it while running.
  const listed = cors({ origin: (o) => o, credentials: true, exposeHeaders: EXPOSED, maxAge: 600 });
  const star = cors({ origin: "*", exposeHeaders: EXPOSED, maxAge: 600 });
  const corsFor: MiddlewareHandler<ApiEnv> = (c, next) => {
    const origin = c.req.header("origin");
    const allowed = config.corsOrigins;
    if (allowed.includes("*")) return star(c, next);
    if (origin !== undefined && allowed.includes(origin)) return listed(c, next);
    // A preflight from elsewhere is refused outright, so the page's console says why.
    if (c.req.method === "OPTIONS" && origin !== undefined && c.req.header("access-control-request-method")) {
      if (!isOwnOrigin(origin, c.req.header("host"))) throw refusal(origin);
    }
    return next();
  };
  const writes: MiddlewareHandler<ApiEnv> = (c, next) => {
    const who = refusedOrigin({
      method: c.req.method,
      origin: c.req.header("origin"),
      fetchSite: c.req.header("sec-fetch-site"),
      host: c.req.header("host"),
      websocket: (c.req.header("upgrade") ?? "").toLowerCase() === "websocket",
    }, config.corsOrigins);
    if (who !== null) throw refusal(who);
    return next();
  };
  return [corsFor, writes];
}

/**
 * `nosniff` on every answer: a JSON or text answer is never run as a script or a page by a browser. Set
 * before the handler runs, so hono copies it onto whatever Response comes back, which also gives a Response
 * proxied from another node (immutable headers) mutable ones for the middlewares after it.
 */
export const noSniff: MiddlewareHandler<ApiEnv> = (c, next) => {
  c.res.headers.set("X-Content-Type-Options", "nosniff");
  return next();
};

/**
 * Errors the body's stream once `ms` pass before it ends: a client that sends headers and then too little
 * (or nothing) fails the read with 408 instead of holding the handler for ever. Only a body someone reads
 * expires; a handler that never asks for its body is not failed for it.
 */
function withDeadline(
  body: ReadableStream<Uint8Array>,
  ms: number,
  onExpire: () => ApiError,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const deadline = performance.now() + ms;
  let reading = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let expire: () => void = () => {};
  return new ReadableStream<Uint8Array>({
    start(controller) {
      expire = () => {
        clearTimeout(timer);
        const err = onExpire();
        controller.error(err);
        reader.cancel(err).catch(() => undefined);
      };
      timer = setTimeout(() => reading && expire(), ms);
    },
    async pull(controller) {
      reading = true;
      if (performance.now() >= deadline) return expire();
      try {
        const { done, value } = await reader.read();
        if (done) {
          clearTimeout(timer);
          controller.close();
        } else controller.enqueue(value);
      } catch (e) {
        clearTimeout(timer);
        controller.error(e);
      }
    },
    cancel(reason) {
      clearTimeout(timer);
      return reader.cancel(reason);
    },
  });
}

/**
 * Request bodies: every body must arrive within `api.body_timeout_seconds` of its headers (the audio uploads:
 * ten times that, for 25 MiB), and every body but the uploads (which check their own 25 MiB) is at most
 * `api.max_body_bytes`: a declared Content-Length is refused before anything is read, a chunked body once
 * it passes the limit (hono's bodyLimit does both).
 */
export function bodyGuards(config: Pick<Config, "maxBodyBytes" | "bodyTimeout">): MiddlewareHandler<ApiEnv> {
  const limitMiB = config.maxBodyBytes / (1024 * 1024);
  const shown = Number.isInteger(limitMiB) ? `${limitMiB} MiB` : `${config.maxBodyBytes} bytes`;
  const limit = bodyLimit({
    maxSize: config.maxBodyBytes,
    onError: () => {
      throw new ApiError(
        413,
        `request body exceeds this node's ${shown} limit (api.max_body_bytes, SKULK_MAX_BODY_BYTES)`,
        { type: "invalid_request_error", code: "body_too_large" },
      );
    },
  });
  return async (c: Context<ApiEnv>, next) => {
    const body = c.req.raw.body;
    if (!body) return next();
    const upload = UPLOAD_PATHS.includes(c.req.path);
    // Peer routes bound their bodies themselves (PEER_BODY_LIMIT, checked after the headers that need no body):
    // a sync answer's snapshot may outgrow a client body limit an operator lowers.
    const peer = c.req.path.startsWith("/cluster/peer/");
    const seconds = config.bodyTimeout * (upload ? 10 : 1);
    let expired: ApiError | undefined;
    const timed = withDeadline(body, seconds * 1000, () =>
      expired = new ApiError(
        408,
        `the request body did not arrive within ${seconds} s (api.body_timeout_seconds)`,
        { type: "invalid_request_error", code: "body_timeout" },
      ));
    c.req.raw = new Request(c.req.raw, { body: timed });
    try {
      if (upload || peer) await next();
      else await limit(c, next);
    } catch (e) {
      // bodyLimit reads a chunked body itself, so its 408 surfaces here rather than from a handler.
      if (!expired) throw e;
    }
    // Whatever a handler made of the failed read (some answer 400 or 422 for a body they could not parse),
    // the truth is that the body never came. Deno marks the answer `Connection: close`, but its HTTP/1
    // server keeps the socket while its read of the body is pending (docs/api.md): the request and its
    // handler are freed, the socket lasts until the client goes.
    if (expired) {
      const res = errorResponse(c, expired);
      res.headers.set("connection", "close"); // the rest of that body must not be read as a next request
      c.res = undefined;
      c.res = res;
    }
  };
}
