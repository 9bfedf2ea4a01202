/**
 * The daemon plane that writes telemetry history: every `telemetry.history_interval_seconds` it records
 * the nodes heard from since the last sample and prunes rows older than the retention window.
 */
import type { Plane } from "../node/plane.ts";
import { logger } from "../log/mod.ts";
import type { NodeContext } from "../node/context.ts";
import { freshEntries, pruneSamples, recordSamples } from "./history.ts";

const log = logger("telemetry");

export class TelemetryHistoryPlane implements Plane<NodeContext> {
  readonly name = "telemetry-history";
  #timer: ReturnType<typeof setInterval> | undefined;
  #last = 0;
  #busy: Promise<void> = Promise.resolve();

  start(ctx: NodeContext): void {
    const everyMs = ctx.config.telemetryHistoryInterval * 1000;
    if (everyMs <= 0) return;
    const retentionMs = ctx.config.telemetryHistoryRetention * 3600_000;
    const tick = async () => {
      const now = Date.now();
      try {
        const fresh = freshEntries(ctx.telemetry.entries(), this.#last);
        this.#last = now;
        await recordSamples(ctx.store.db, fresh.map((e) => e.reading), new Date(now));
        await pruneSamples(ctx.store.db, new Date(now - retentionMs));
      } catch (e) {
        log.warn("telemetry history sample failed: {error}", { error: (e as Error).message });
      }
    };
    this.#busy = tick();
    this.#timer = setInterval(() => {
      this.#busy = this.#busy.then(tick);
    }, everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#busy;
  }
}
