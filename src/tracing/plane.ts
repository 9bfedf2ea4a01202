/**
 * The daemon plane of tracing: prunes traces older than `tracing.retention_days` a minute after start and
 * hourly after that, and writes what is still buffered when the node stops.
 */
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

  start(ctx: NodeContext): void {
    this.#ctx = ctx;
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

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    await this.#busy;
    if (this.#ctx) await spanWriterOf(this.#ctx.store).flush();
  }
}
