/**
 * Domain errors and their one HTTP mapping: every 4xx and 5xx leaves as upstream's envelope
 * `{"error": {"message", "type", "param", "code"}}`. Handlers throw; app.ts renders.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { UntrustedInputError } from "../security/ids.ts";
import { ToolRequestError } from "../serving/forced-tools.ts";

const REASONS: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  422: "Unprocessable Entity",
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

/** The HTTP form of an error a handler let through: ApiErrors as they are, domain refusals of input as 400s. */
export function toApiError(err: unknown): ApiError | null {
  if (err instanceof ApiError) return err;
  if (err instanceof UntrustedInputError) {
    return new ApiError(400, err.message, { param: err.field, type: "invalid_request_error" });
  }
  if (err instanceof ToolRequestError) {
    return new ApiError(400, err.message, { param: err.param, type: "invalid_request_error" });
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
    json = JSON.parse(raw);
  } catch (e) {
    throw badRequest(`request body is not valid JSON: ${(e as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const { message, param } = describeZodError(parsed.error);
    throw new ApiError(400, `invalid request: ${message}`, { param, type: "invalid_request_error" });
  }
  return { raw, body: parsed.data };
}
