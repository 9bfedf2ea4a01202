/**
 * The OpenAPI document at `/api/openapi.json`: route modules describe themselves here (method, path,
 * summary, request and response schemas) and the document is generated from those zod schemas.
 */
import { z } from "zod";
import { VERSION } from "../version.ts";

export interface RouteDoc {
  method: "get" | "post" | "put" | "delete" | "head";
  path: string;
  summary: string;
  tag: string;
  body?: z.ZodType;
  response?: z.ZodType;
  query?: Record<string, string>;
}

const routes: RouteDoc[] = [];

export function describe(doc: RouteDoc): void {
  if (!routes.some((r) => r.method === doc.method && r.path === doc.path)) routes.push(doc);
}

function schema(s: z.ZodType): unknown {
  try {
    return z.toJSONSchema(s, { unrepresentable: "any", io: "input" });
  } catch {
    return {};
  }
}

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of [...routes].sort((a, b) => a.path.localeCompare(b.path))) {
    const path = r.path.replace(/:(\w+)\{[^}]*\}|:(\w+)/g, (_, a, b) => `{${a ?? b}}`);
    const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    }));
    for (const [name, description] of Object.entries(r.query ?? {})) {
      params.push({ name, in: "query", required: false, schema: { type: "string" }, description } as never);
    }
    paths[path] ??= {};
    paths[path][r.method] = {
      summary: r.summary,
      tags: [r.tag],
      ...(params.length ? { parameters: params } : {}),
      ...(r.body
        ? { requestBody: { required: true, content: { "application/json": { schema: schema(r.body) } } } }
        : {}),
      responses: {
        "200": {
          description: "OK",
          ...(r.response ? { content: { "application/json": { schema: schema(r.response) } } } : {}),
        },
        default: {
          description: "Error envelope",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        },
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Skulk API",
      version: VERSION,
      description: "Wire-compatible with upstream Skulk 1.3 control API.",
    },
    paths,
    components: {
      schemas: {
        Error: {
          type: "object",
          properties: {
            error: {
              type: "object",
              properties: {
                message: { type: "string" },
                type: { type: "string" },
                param: { type: ["string", "null"] },
                code: { type: ["integer", "string"] },
              },
              required: ["message", "type", "param", "code"],
            },
          },
          required: ["error"],
        },
      },
    },
  };
}
