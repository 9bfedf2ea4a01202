/**
 * Wires a node's metrics at the edge: one `Metrics` per NodeContext, its gauges read from the node at
 * scrape time, its control-plane counters fed by the log's applied events; routes and planes record through it.
 */
import { instanceBody } from "../cluster/instances.ts";
import type { PeerTransport } from "../cluster/peers.ts";
import type { NodeContext } from "../node/context.ts";
import { admissionOf } from "../serving/router.ts";
import { runningOf } from "../serving/running.ts";
import { incrementsOf } from "./events.ts";
import { generationOf, Metrics } from "./registry.ts";

const byNode = new WeakMap<NodeContext, Metrics>();

/** Peer paths counted under their own name; any other peer call counts as `other`. */
const PEER_KINDS = new Set(["gossip", "sync", "push", "submit", "command"]);

export function peerKind(path: string): string {
  const head = path.split(/[/?]/)[0];
  return PEER_KINDS.has(head) ? head : "other";
}

/** Counts each signed call to a peer, and its failures, by kind of call (the cluster plane wraps its transport). */
export function countedTransport(t: PeerTransport, metrics: Metrics): PeerTransport {
  return async (address, path, body, timeoutMs) => {
    try {
      const answer = await t(address, path, body, timeoutMs);
      metrics.peerCall(peerKind(path), true);
      return answer;
    } catch (e) {
      metrics.peerCall(peerKind(path), false);
      throw e;
    }
  };
}

/** The API's stream slots as the gauges read them (given by the API, which owns them). */
export interface SlotCounts {
  streams: { used: number; max: number };
  realtime: { used: number; max: number };
}
const NO_SLOTS: SlotCounts = { streams: { used: 0, max: 0 }, realtime: { used: 0, max: 0 } };

/**
 * The node's metrics, made (and subscribed to its log) on first use: the API makes them when it is
 * created, giving its slots; planes that record later get the same object.
 */
export function metricsOf(ctx: NodeContext, slots: () => SlotCounts = () => NO_SLOTS): Metrics {
  let m = byNode.get(ctx);
  if (m) return m;
  const own = () => ctx.telemetry.get(ctx.nodeId)?.reading;
  m = new Metrics({
    model: (id) =>
      ctx.catalog.get(id) !== undefined ||
      Object.values(ctx.log.state.instances).some((i) => instanceBody(i).shardAssignments.modelId === id),
    instance: (id) => id in ctx.log.state.instances,
  }, {
    inFlight: () => runningOf(ctx).driven(ctx.nodeId).map((r) => ({ instance: r.instanceId })),
    streams: () => slots().streams,
    realtime: () => slots().realtime,
    commandQueue: () => ctx.commands?.depth ?? 0,
    runnerPhases: () => ctx.worker?.runners().map((r) => r.phase) ?? [],
    memory: () => {
      const mem = own()?.memory;
      return mem ? { total: mem.ramTotal.inBytes, available: mem.ramAvailable.inBytes } : null;
    },
    accelerators: () => own()?.system?.accelerators ?? [],
    isMaster: () => ctx.masterNodeId() === ctx.nodeId,
    queued: () => admissionOf(ctx).depths(),
  });
  const metrics = m;
  ctx.log.onApplied((ie, before) => metrics.apply(incrementsOf(ie, before, ctx.nodeId)));
  byNode.set(ctx, m);
  return m;
}

/** What a route learnt about a request that its labels need: the model and instance it was routed to. */
interface Noted {
  arrivedAt: number;
  model?: string;
  instance?: string;
  /** Milliseconds it waited for a slot of its instance's engine (the API's `x-skulk-queue-ms`). */
  queuedMs?: number;
}
/**
 * Keyed by the request's hono Context, the one object every middleware and handler of a request shares
 * (a guard may replace the raw Request to bound its body).
 */
const noted = new WeakMap<object, Noted>();

/** Called by the API's first middleware: the request's arrival, for time to first token. */
export function noteArrival(req: object): void {
  noted.set(req, { arrivedAt: performance.now() });
}

/** Called by a route once it knows the model (and instance) a request names. */
export function noteTarget(req: object, model: string, instance?: string): void {
  const n = noted.get(req);
  if (n) (n.model = model, n.instance = instance ?? n.instance);
}

/** Called once a request was admitted to its instance's engine, with how long it waited. */
export function noteQueued(req: object, ms: number): void {
  const n = noted.get(req);
  if (n) n.queuedMs = ms;
}

export function notedOf(req: object): Noted | undefined {
  return noted.get(req);
}

/** Seconds since the request arrived (null when the middleware did not see it). */
export function sinceArrival(req: object): number | null {
  const n = noted.get(req);
  return n ? (performance.now() - n.arrivedAt) / 1000 : null;
}

/**
 * Watches a streamed generation's frames: the first non-empty one is its first token, and once the
 * stream is done the engine's usage and timings are recorded. Returns each frame unchanged.
 */
export function streamObserver(
  metrics: Metrics,
  req: object,
  model: string,
  read: () => { usage: unknown; timings: unknown },
): (text: string, done: boolean) => string {
  let ttft: number | null = null;
  let recorded = false;
  return (text, done) => {
    if (text && ttft === null) ttft = sinceArrival(req);
    if (done && !recorded) {
      recorded = true;
      const { usage, timings } = read();
      metrics.generation(generationOf(model, usage, timings, ttft));
    }
    return text;
  };
}
