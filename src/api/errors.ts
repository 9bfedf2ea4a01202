/**
 * Domain errors and their one HTTP mapping: every 4xx and 5xx leaves as upstream's envelope
 * `{"error": {"message", "type", "param", "code"}}`. Handlers throw; app.ts renders.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { DomainError, type DomainKind, NoMaster, NoQuorum } from "../app/errors.ts";
import { UntrustedInputError } from "../security/ids.ts";
import { ToolRequestError } from "../serving/forced-tools.ts";
import { ServingError, type ServingKind } from "../serving/errors.ts";

const REASONS: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly opts: { type?: string; param?: string | null; code?: string | number; retryAfter?: number } = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export const badRequest = (message: string, param?: string) =>
  new ApiError(400, message, { param: param ?? null });
export const notFound = (message: string) => new ApiError(404, message);
export const conflict = (message: string) => new ApiError(409, message);
export const unavailable = (message: string) => new ApiError(503, message);

/** Each domain error's status: refusals of the request are 4xx, "not now" is a retryable 503. */
const DOMAIN_STATUS: Record<DomainKind, { status: ContentfulStatusCode; code?: string; retry?: boolean }> = {
  Invalid: { status: 400 },
  Refused: { status: 400 },
  NotFound: { status: 404 },
  NotPlaced: { status: 404 },
  Conflict: { status: 409 },
  NotReady: { status: 503, code: "not_ready", retry: true },
  Pending: { status: 503, code: "not_ready", retry: true },
  Busy: { status: 503, code: "command_queue_full", retry: true },
};

/**
 * Each data-plane refusal's status. One that names a request field is an OpenAI `invalid_request_error`, as
 * clients of the speech routes expect; the others keep the status's reason as their type.
 */
const SERVING_STATUS: Record<
  ServingKind,
  { status: ContentfulStatusCode; code?: string; type?: string; retryAfter?: number }
> = {
  Invalid: { status: 400 },
  NotPlaced: { status: 404, code: "model_not_found" },
  NotReady: { status: 503 },
  Busy: { status: 503 },
  // OpenAI's clients back off on a 429 whose type names the rate limit, after Retry-After.
  Overloaded: { status: 429, code: "queue_full", type: "rate_limit_exceeded", retryAfter: 1 },
  EngineFailed: { status: 502 },
};

/**
 * The HTTP form of an error a handler let through: ApiErrors as they are, domain errors by their kind, and
 * an event no majority of the voting nodes took in time, or no master to take it, as a retryable 503 (it was
 * not acknowledged, so the client may retry, through this node or another).
 */
export function toApiError(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  if (err instanceof UntrustedInputError) {
    return new ApiError(400, err.message, { param: err.field, type: "invalid_request_error" });
  }
  if (err instanceof ToolRequestError) {
    return new ApiError(400, err.message, { param: err.param, type: "invalid_request_error" });
  }
  if (err instanceof ServingError) {
    const m = SERVING_STATUS[err.kind];
    return new ApiError(m.status, err.message, {
      ...(err.param ? { param: err.param, type: "invalid_request_error" } : {}),
      ...(m.code ? { code: m.code } : {}),
      ...(m.type ? { type: m.type } : {}),
      ...(m.retryAfter ? { retryAfter: m.retryAfter } : {}),
    });
  }
  if (err instanceof DomainError) {
    const m = DOMAIN_STATUS[err.kind];
    return new ApiError(m.status, err.message, {
      param: err.param,
      type: m.status === 503 ? "service_unavailable" : undefined,
      ...(m.code ? { code: m.code } : {}),
      ...(m.retry ? { retryAfter: 1 } : {}),
    });
  }
  if (err instanceof NoMaster) {
    return new ApiError(503, err.message, { type: "service_unavailable", code: err.code, retryAfter: 1 });
  }
  if (err instanceof NoQuorum) {
    return new ApiError(503, err.message, { type: "service_unavailable", code: "no_quorum", retryAfter: 1 });
  }
  return null;
}

export interface ErrorEnvelope {
  error: { message: string; type: string; param: string | null; code: number | string };
}

export function envelope(status: number, message: string, opts: ApiError["opts"] = {}): ErrorEnvelope {
  return {
    error: {
      message,
      type: opts.type ?? REASONS[status] ?? "Error",
      param: opts.param ?? null,
      code: opts.code ?? status,
    },
  };
}

export function errorResponse(c: Context, err: ApiError): Response {
  if (err.opts.retryAfter !== undefined) c.header("Retry-After", String(err.opts.retryAfter));
  return c.json(envelope(err.status, err.message, err.opts), err.status);
}

/** Says which fields are wrong and why, in one line a user can act on. */
export function describeZodError(error: z.ZodError): { message: string; param: string | null } {
  const parts = error.issues.slice(0, 5).map((i) => {
    const path = i.path.map(String).join(".");
    return path ? `${path}: ${i.message}` : i.message;
  });
  const first = error.issues[0]?.path.map(String).join(".");
  return { message: parts.join("; "), param: first || null };
}

/** Parses a JSON body against a schema; malformed JSON and bad fields are 400s that name the problem. */
export async function readJson<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  return (await readJsonWithRaw(c, schema)).body;
}

/** readJson that also returns the body's text, for handlers that pass the request on unchanged. */
export async function readJsonWithRaw<S extends z.ZodType>(
  c: Context,
  schema: S,
): Promise<{ raw: string; body: z.infer<S> }> {
  const raw = await c.req.text();
  if (raw.trim() === "") throw badRequest("request body is empty; send a JSON object");
  let json: unknown;
  try {
    json = parseJsonBody(raw);
  } catch (e) {
    throw badRequest(
      e instanceof JsonBodyError ? e.message : `request body is not valid JSON: ${(e as Error).message}`,
    );
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const { message, param } = describeZodError(parsed.error);
    throw new ApiError(400, `invalid request: ${message}`, { param, type: "invalid_request_error" });
  }
  return { raw, body: parsed.data };
}

/**
 * The deepest nesting a JSON body may have. Real requests (chat with tool schemas) stay far below it; code past
 * the boundary that recurses (YAML writing, structuredClone) overflows its stack on a body nested ~10k deep.
 */
export const MAX_JSON_DEPTH = 64;

export class JsonBodyError extends Error {
  override name = "JsonBodyError";
}

/** JSON.parse that first refuses nesting deeper than MAX_JSON_DEPTH (a scan of the text, which cannot overflow). */
export function parseJsonBody(text: string): unknown {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // backslash: the next character is escaped
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) {
        throw new JsonBodyError(`request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
      }
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return JSON.parse(text);
}
