/**
 * The dashboard, served from assets embedded at build time: `/` and the app's own paths answer the
 * single page; hashed files under /assets/ are cached for a year. Only exact paths, so no API route is shadowed.
 */
import { Hono } from "hono";
import { DASHBOARD_ASSETS } from "../../generated/dashboard.gen.ts";
import type { ApiEnv } from "../env.ts";

/** The single page's own routes (the app picks the view from the path). */
export const SPA_ROUTES = [
  "/",
  "/cluster",
  "/model-store",
  "/chat",
  "/operator",
  "/settings",
  "/observability",
] as const;

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml",
  png: "image/png",
  ico: "image/x-icon",
  json: "application/json",
  webmanifest: "application/manifest+json",
};

export function contentType(path: string): string {
  return TYPES[path.split(".").at(-1) ?? ""] ?? "application/octet-stream";
}

/** Files under /assets/ carry a content hash in their name, so they never change under one URL. */
export function cacheControl(path: string): string {
  return path.startsWith("/assets/") ? "public, max-age=31536000, immutable" : "no-cache";
}

function decode(base64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(base64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const files = new Map(DASHBOARD_ASSETS.map((a) => [a.path, a.base64]));
const decoded = new Map<string, Uint8Array<ArrayBuffer>>();

function asset(path: string): Uint8Array<ArrayBuffer> | undefined {
  const b64 = files.get(path);
  if (b64 === undefined) return undefined;
  let bytes = decoded.get(path);
  if (!bytes) decoded.set(path, bytes = decode(b64));
  return bytes;
}

/**
 * The page runs only its own bundle (no inline or foreign script), talks only to this node, and is never
 * framed. Inline styles stay allowed (the loading note and the meters set `style`); audio plays from blob: URLs.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "media-src 'self' blob:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** Sent with every dashboard file (nosniff comes from app.ts, on every answer). */
export const DASHBOARD_HEADERS: Record<string, string> = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
};

function serve(path: string): Response | undefined {
  const bytes = asset(path);
  if (!bytes) return undefined;
  return new Response(bytes, {
    headers: { ...DASHBOARD_HEADERS, "content-type": contentType(path), "cache-control": cacheControl(path) },
  });
}

/** Whether a path is the dashboard's own (a page or an embedded file): served without the API key. */
export function isDashboardFile(path: string): boolean {
  return (SPA_ROUTES as readonly string[]).includes(path) || files.has(path);
}

export const dashboardRoutes = new Hono<ApiEnv>();
for (const route of SPA_ROUTES) {
  dashboardRoutes.get(route, (c) =>
    serve("/index.html") ??
      c.text("the dashboard was not built into this program; run `make embed` and rebuild", 503));
}
for (const a of DASHBOARD_ASSETS) dashboardRoutes.get(a.path, () => serve(a.path)!);
