/**
 * Composes the HTTP API: request ids, access log, optional bearer-key auth, the route modules, and the
 * one place errors become upstream's envelope. Handlers receive the NodeContext through `c.var.node`.
 */
import { type Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { matchedRoutes } from "hono/route";
import { Refused } from "../app/errors.ts";
import { metricsOf, noteArrival, notedOf } from "../metrics/node.ts";
import { logger, withLogContext } from "../log/mod.ts";
import type { NodeContext } from "../node/context.ts";
import { apiKeyAuth } from "./auth.ts";
import type { ApiEnv } from "./env.ts";
import { envelope, errorResponse, toApiError } from "./errors.ts";
import { bodyGuards, noSniff, originGuards } from "./guards.ts";
import { openApiDocument } from "./openapi.ts";
import { QUEUE_HEADER, slotsOf } from "./slots.ts";
import { customModelRoutes } from "./routes/custom-models.ts";
import { configRoutes } from "./routes/config.ts";
import { dashboardRoutes, isDashboardFile } from "./routes/dashboard.ts";
import { instanceRoutes } from "./routes/instances.ts";
import { downloadRoutes } from "./routes/downloads.ts";
import { modelRoutes } from "./routes/models.ts";
import { openaiRoutes } from "./routes/openai.ts";
import { anthropicRoutes } from "./routes/anthropic.ts";
import { responsesRoutes } from "./routes/responses.ts";
import { ollamaRoutes } from "./routes/ollama.ts";
import { audioRoutes } from "./routes/audio.ts";
import { realtimeRoutes } from "./routes/realtime.ts";
import { nodeRoutes } from "./routes/node.ts";
import { placementRoutes } from "./routes/placement.ts";
import { stateRoutes } from "./routes/state.ts";
import { clusterRoutes } from "./routes/cluster.ts";
import { runnerRoutes } from "./routes/runners.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { diagnosticsRoutes } from "./routes/diagnostics.ts";
import { extensionRoutes, observeChatResponses } from "./extensions.ts";
import { traceRequests, traceRoutes } from "./routes/traces.ts";

const log = logger("api");
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const QUIET = new Set(["/healthz", "/state", "/node_id"]);

export interface AppExtras {
  /** Route modules added by later planes (instances, OpenAI, cluster peers, dashboard). */
  mount?: (app: Hono<ApiEnv>) => void;
}

/**
 * The route pattern that answered (`/instance/:id`, never the raw path, so ids do not become labels);
 * `unmatched` when only the catch-all middlewares matched.
 */
function routeLabel(c: Context<ApiEnv>): string {
  const path = matchedRoutes(c).at(-1)?.path;
  return path && path !== "*" && path !== "/*" ? path : "unmatched";
}

export function createApp(node: NodeContext, extras: AppExtras = {}): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  // Made now, not at the first scrape: it counts the log's events from the node's start.
  const metrics = metricsOf(node, () => slotsOf(node));

  app.use("*", async (c, next) => {
    const incoming = c.req.header("x-request-id");
    const id = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set("requestId", id);
    c.set("node", node);
    noteArrival(c);
    const t0 = performance.now();
    // Every line logged while the request is served carries its id (logtape's implicit context).
    await withLogContext({ requestId: id }, next);
    const noted = notedOf(c);
    metrics.request({
      route: routeLabel(c),
      method: c.req.method,
      status: c.res.status,
      model: noted?.model,
      instance: noted?.instance,
    });
    c.res.headers.set("X-Request-Id", id);
    // How long the request waited for its instance's engine (set on the node whose engine served it).
    if (noted?.queuedMs !== undefined) c.res.headers.set(QUEUE_HEADER, String(Math.round(noted.queuedMs)));
    const ms = Math.round(performance.now() - t0);
    const line = { requestId: id, method: c.req.method, path: c.req.path, status: c.res.status, ms };
    // Peer traffic runs several times a second per node; it is logged at debug unless it fails.
    if ((QUIET.has(c.req.path) || c.req.path.startsWith("/cluster/peer/")) && c.res.status < 400) {
      log.debug("{method} {path} {status} {ms}ms", line);
    } else log.info("{method} {path} {status} {ms}ms", line);
  });
  app.use("*", noSniff);
  // Before the key check: a page on a foreign origin is refused even when it holds the key.
  for (const guard of originGuards(node.config)) app.use("*", guard);
  app.use("*", bodyGuards(node.config));

  const key = node.config.apiKey;
  if (key) {
    app.use(
      "*",
      apiKeyAuth(key, (c) =>
        c.req.path === "/healthz" || c.req.path.startsWith("/cluster/peer/") ||
        // the page asks for the key itself
        (c.req.method === "GET" && isDashboardFile(c.req.path))),
    );
  }

  // Extensions see each chat answer as its client got it: this wraps whatever the chat routes return.
  app.use("*", observeChatResponses);
  // After the key check: it reuses that check's verdict on a forwarded request's signature.
  app.use("*", traceRequests);

  app.get("/api/openapi.json", (c) => c.json(openApiDocument()));
  app.route("/", nodeRoutes);
  app.route("/", runnerRoutes);
  app.route("/", stateRoutes);
  app.route("/", modelRoutes);
  // Before instanceRoutes: /instance/previews and /instance/placement must not be read as /instance/:id.
  app.route("/", placementRoutes);
  app.route("/", instanceRoutes);
  app.route("/", openaiRoutes);
  app.route("/", anthropicRoutes);
  app.route("/", responsesRoutes);
  app.route("/", ollamaRoutes);
  app.route("/", audioRoutes);
  app.route("/", realtimeRoutes);
  app.route("/", customModelRoutes);
  app.route("/", configRoutes);
  app.route("/", clusterRoutes);
  app.route("/", dashboardRoutes);
  app.route("/", downloadRoutes);
  app.route("/", metricsRoutes);
  app.route("/", diagnosticsRoutes);
  app.route("/", extensionRoutes);
  app.route("/", traceRoutes);
  extras.mount?.(app);

  app.notFound((c) =>
    c.json(envelope(404, `no route for ${c.req.method} ${c.req.path}; see /api/openapi.json`), 404)
  );
  app.onError((err, c) => {
    if (err instanceof Refused) metrics.refused();
    const known = toApiError(err);
    if (known) return errorResponse(c, known);
    if (err instanceof HTTPException) {
      return c.json(envelope(err.status, err.message || "request refused"), err.status);
    }
    log.error("unhandled error on {method} {path} (request {requestId}): {error}", {
      method: c.req.method,
      path: c.req.path,
      requestId: c.var.requestId,
      error: (err as Error).stack ?? String(err),
    });
    return c.json(envelope(500, `internal error (request id ${c.var.requestId}); see the node's log`), 500);
  });
  return app;
}
