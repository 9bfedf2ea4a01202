/**
 * Composes one node: takes the data dir's lock, opens the store, loads identity and the event log,
 * starts telemetry and the API, and shuts all of it down in reverse order on SIGINT/SIGTERM.
 */
import { type AppExtras, createApp } from "../api/app.ts";
import { CommandDesk } from "../app/desk.ts";
import { decidePorts } from "../app/ports.ts";
import { EventLog } from "../cluster/log.ts";
import type { ClusterState } from "../cluster/state.ts";
import { TelemetryView } from "../cluster/telemetry.ts";
import { withClusterConfig } from "../config/edit.ts";
import type { Config } from "../config/schema.ts";
import { backendTags, findEngines } from "../engines/discovery.ts";
import { speechBackendTags } from "../engines/dispatch.ts";
import { engineSettings } from "../engines/settings.ts";
import { lineFields, logger } from "../log/mod.ts";
import { FlightRecorder } from "../diagnostics/recorder.ts";
import { registerDiagnosticsMetrics } from "../diagnostics/metrics.ts";
import { metricsOf } from "../metrics/node.ts";
import { Catalog } from "../models/catalog.ts";
import { followCustomCardEvents, loadCustomCardsInto } from "../models/custom.ts";
import type { NodeContext } from "../node/context.ts";
import { loadOrCreateIdentity } from "../node/identity.ts";
import { acquireLock } from "../node/lock.ts";
import type { Plane } from "../node/plane.ts";
import { openStore } from "../store/db.ts";
import { recordHistory, recordNode } from "../store/history.ts";
import { runningOf } from "../serving/running.ts";
import { Collector } from "../telemetry/collect.ts";
import { firstIpv4 } from "../telemetry/network.ts";
import { VERSION } from "../version.ts";
import { Worker } from "../worker/worker.ts";

const log = logger("daemon");

export interface RunningNode {
  ctx: NodeContext;
  url: string;
  port: number;
  /** Resolves when the node has fully stopped. */
  finished: Promise<void>;
  shutdown(reason?: string): Promise<void>;
}

export interface StartOptions {
  config: Config;
  configPath: string;
  planes?: Plane<NodeContext>[];
  extras?: AppExtras;
  /** Telemetry cadence (ms); tests shorten it. */
  telemetryIntervalMs?: number;
}

export class PortInUse extends Error {
  constructor(host: string, port: number) {
    super(`API port ${port} on ${host} is already in use; stop what holds it or pass --api-port`);
    this.name = "PortInUse";
  }
}

/**
 * Keeps `ctx.config` the node's own settings with the cluster-scope values of the log over them: at start
 * (a restarted node keeps what the cluster set) and on every `ClusterConfigChanged` or snapshot reset.
 * The planes read `ctx.config` when they act, so a change applies while running.
 */
function followClusterConfig(ctx: NodeContext): void {
  const own = { ...ctx.config };
  const apply = (state: ClusterState) =>
    Object.assign(ctx.config, withClusterConfig(own, state.clusterConfig ?? {}));
  apply(ctx.log.state);
  ctx.log.onApplied((ie, _before, after) => {
    if ("ClusterConfigChanged" in ie.event) apply(after);
  });
  ctx.log.onReset(apply);
}

export async function startNode(opts: StartOptions): Promise<RunningNode> {
  const { config } = opts;
  const lock = acquireLock(config.dataDir, config.apiHost, config.apiPort);
  let store: Awaited<ReturnType<typeof openStore>> | undefined;
  try {
    store = await openStore(config.dataDir);
    const identity = await loadOrCreateIdentity(config.dataDir);
    const nodeId = identity.nodeId;
    lineFields.nodeId = nodeId;
    log.info("node {nodeId} ({friendlyName}) starting, Skulk {version}, data dir {dataDir}{fresh}", {
      nodeId,
      friendlyName: config.friendlyName,
      version: VERSION,
      dataDir: config.dataDir,
      fresh: identity.created ? " (new node id)" : "",
    });
    const eventLog = new EventLog(store.db, `${nodeId}/0`, store.path);
    const replayed = await eventLog.load();
    if (replayed > 0) log.info("replayed {n} events from the local log", { n: replayed });
    const s = store;
    eventLog.onApplied((ie, before) => recordHistory(s.db, ie, before));

    const ctx: NodeContext = {
      nodeId,
      config,
      configPath: opts.configPath,
      store,
      log: eventLog,
      telemetry: new TelemetryView(),
      catalog: Catalog.bundled(),
      startedAt: Date.now(),
      masterNodeId: () => nodeId,
      submit: async (event) => {
        await eventLog.append(event);
      },
      whenCaughtUp: () => Promise.resolve(),
      flight: new FlightRecorder(nodeId, config.flightRecorderSize),
    };
    ctx.commands = new CommandDesk(decidePorts(ctx), ctx.flight);
    followClusterConfig(ctx);
    await loadCustomCardsInto(store.db, ctx.catalog);
    followCustomCardEvents(eventLog, store.db, ctx.catalog);
    return await serve(ctx, lock, opts);
  } catch (e) {
    store?.close();
    lock.release();
    throw e;
  }
}

async function serve(
  ctx: NodeContext,
  lock: ReturnType<typeof acquireLock>,
  opts: StartOptions,
): Promise<RunningNode> {
  const { config } = ctx;
  const app = createApp(ctx, opts.extras);
  registerDiagnosticsMetrics(metricsOf(ctx).registry, ctx.flight);
  ctx.handle = async (req) => await app.fetch(req);
  const abort = new AbortController();
  let server: Deno.HttpServer<Deno.NetAddr>;
  try {
    // Deno.serve binds before it returns, so a busy port throws here and server.addr is the real port.
    server = Deno.serve({
      hostname: config.apiHost,
      port: config.apiPort,
      signal: abort.signal,
      onListen: () => {},
    }, app.fetch);
  } catch (e) {
    if (e instanceof Deno.errors.AddrInUse) throw new PortInUse(config.apiHost, config.apiPort);
    throw e;
  }
  const port = server.addr.port;
  lock.setPort(port);
  const shownHost = config.apiHost === "0.0.0.0" || config.apiHost === "::" ? "127.0.0.1" : config.apiHost;
  const url = `http://${shownHost}:${port}`;
  if (!config.apiKey && !["127.0.0.1", "localhost", "::1"].includes(config.apiHost)) {
    log.warn(
      "the API listens on {host}:{port} beyond loopback with no API key; anyone who can reach it can control this node (set SKULK_API_KEY)",
      { host: config.apiHost, port },
    );
  }

  // Telemetry: the local reading, refreshed on a timer; the version counter makes it last-write-wins.
  // Versions start from the clock so a restarted node's readings replace those of its previous run.
  let version = Date.now();
  const engines = engineSettings(config);
  const found = config.worker ? await findEngines(engines) : null;
  const engine = found && {
    llamaServer: found.llamaServer,
    llamaCppBuild: found.build,
    // A node without ggml-rpc-server cannot lend memory, whatever its build speaks.
    rpcProtocol: found.rpcServer ? found.rpcProtocol : null,
    backends: [...backendTags(found), ...speechBackendTags(engines)],
  };
  const wildcard = config.apiHost === "0.0.0.0" || config.apiHost === "::";
  const apiAddress = `${wildcard ? firstIpv4() ?? shownHost : shownHost}:${port}`;
  const collector = new Collector({
    nodeId: ctx.nodeId,
    friendlyName: config.friendlyName,
    apiAddress,
    worker: config.worker,
    modelsDir: config.modelsDir ?? `${config.dataDir}/models`,
    engine,
    memoryLimit: config.memoryLimit,
  });
  const sample = async () => {
    const reading = {
      ...await collector.read(),
      running: runningOf(ctx).driven(ctx.nodeId),
      links: ctx.cluster?.links() ?? [],
    };
    version = Math.max(version + 1, Date.now());
    ctx.telemetry.offer(reading, version, Date.now());
    return reading;
  };
  const first = await sample();
  await recordNode(ctx.store.db, first, new Date());
  let inventoryAt = Date.now();
  const timer = setInterval(async () => {
    try {
      const r = await sample();
      if (Date.now() - inventoryAt >= 60_000) {
        inventoryAt = Date.now();
        await recordNode(ctx.store.db, r, new Date());
      }
    } catch (e) {
      log.warn("telemetry reading failed: {error}", { error: (e as Error).message });
    }
  }, opts.telemetryIntervalMs ?? 2000);

  const planes = opts.planes ?? [];
  const started: Plane<NodeContext>[] = [];
  for (const p of planes) {
    if (p instanceof Worker) ctx.worker = p;
    await p.start(ctx);
    started.push(p);
  }

  let stopping: Promise<void> | undefined;
  let resolveFinished!: () => void;
  const finished = new Promise<void>((r) => (resolveFinished = r));
  const shutdown = (reason = "shutdown requested"): Promise<void> => {
    stopping ??= (async () => {
      log.info("shutting down: {reason}", { reason });
      clearInterval(timer);
      collector.close();
      // Stop accepting, let in-flight requests finish, then stop the planes and close the store.
      await server.shutdown();
      for (const p of started.reverse()) {
        try {
          await p.stop();
        } catch (e) {
          log.error("stopping {plane} failed: {error}", { plane: p.name, error: (e as Error).message });
        }
      }
      try {
        await recordNode(ctx.store.db, (ctx.telemetry.get(ctx.nodeId)?.reading) ?? first, new Date());
      } catch { /* the store may already be unusable; nothing to lose */ }
      ctx.store.close();
      lock.release();
      log.info("stopped");
      resolveFinished();
    })();
    return stopping;
  };
  log.info("API listening on {url}", { url });
  return { ctx, url, port, finished, shutdown };
}
