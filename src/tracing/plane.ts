/**
 * The daemon plane of tracing: prunes traces older than `tracing.retention_days` a minute after start and
 * hourly after that, and writes what is still buffered when the node stops.
 */
import { makeEvent } from "../cluster/events.ts";
import { logger } from "../log/mod.ts";
import type { NodeContext } from "../node/context.ts";
import type { Plane } from "../node/plane.ts";
import { spanWriterOf } from "./recorder.ts";
import { pruneTraces } from "./store.ts";

const log = logger("tracing");

export const FIRST_PRUNE_MS = 60_000;
export const PRUNE_EVERY_MS = 3600_000;

/** The moment before which traces go; null keeps every age (a retention of 0 days or less). */
export function retentionCutoff(days: number, now: number): Date | null {
  return days > 0 ? new Date(now - days * 86_400_000) : null;
}

export class TracePlane implements Plane<NodeContext> {
  readonly name = "tracing";
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ctx: NodeContext | undefined;
  #busy: Promise<void> = Promise.resolve();

  constructor(private readonly firstMs = FIRST_PRUNE_MS, private readonly everyMs = PRUNE_EVERY_MS) {}

  #stopped = false;
  #onStop: () => void = () => {};

  start(ctx: NodeContext): void {
    this.#ctx = ctx;
    const wanted = ctx.config.tracingEnabled;
    if (wanted !== null) this.#busy = this.applyStartSetting(ctx, wanted);
    const tick = () => {
      this.#busy = this.#busy.then(async () => void await this.prune(ctx));
      this.#timer = setTimeout(tick, this.everyMs);
    };
    this.#timer = setTimeout(tick, this.firstMs);
  }

  async prune(ctx: NodeContext, now = Date.now()): Promise<number> {
    try {
      await spanWriterOf(ctx.store).flush();
      const gone = await pruneTraces(ctx.store.db, retentionCutoff(ctx.config.tracingRetentionDays, now));
      if (gone > 0) log.info("pruned {gone} trace spans", { gone });
      return gone;
    } catch (e) {
      log.warn("trace pruning failed: {error}", { error: (e as Error).message });
      return 0;
    }
  }

  /**
   * `tracing.enabled` at start: once this node leads (it may take the election a moment) it submits the
   * setting like `PUT /v1/tracing`; a node that does not lead within a minute leaves the cluster's as it is.
   */
  async applyStartSetting(ctx: NodeContext, enabled: boolean, attempts = 60, everyMs = 1000): Promise<void> {
    // Never waits past stop: a node that never catches up must still stop.
    const stopped = new Promise<void>((r) => this.#onStop = r);
    await Promise.race([ctx.whenCaughtUp(), stopped]);
    for (let i = 0; i < attempts && !this.#stopped; i++) {
      if (ctx.masterNodeId() === ctx.nodeId) {
        if (ctx.log.state.tracingEnabled === enabled) return;
        try {
          await ctx.submit(makeEvent("TracingStateChanged", { enabled }));
          log.info("cluster tracing set {state} (tracing.enabled)", { state: enabled ? "on" : "off" });
          return;
        } catch (e) {
          log.debug("tracing.enabled not applied yet: {error}", { error: (e as Error).message });
        }
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#onStop();
    clearTimeout(this.#timer);
    await this.#busy;
    if (this.#ctx) await spanWriterOf(this.#ctx.store).flush();
  }
}
