/**
 * Admission to an instance's engine on the node that drives it: as many requests run as the engine has
 * slots, a bounded FIFO waits beyond them, and one more is refused (Overloaded), so a burst never queues
 * unseen and without bound inside the engine.
 */
import { ServingError } from "./errors.ts";

/** A request let in: how long it waited for a slot, and the release that hands the slot on (idempotent). */
export interface Admitted {
  waitedMs: number;
  release: () => void;
}

interface Waiter {
  resolve: () => void;
  reject: (e: unknown) => void;
}

class Gate {
  running = 0;
  readonly waiting: Waiter[] = [];
}

export class Admission {
  readonly #gates = new Map<string, Gate>();

  /** `slots`: the engine's parallel slots; `queue`: requests that may wait beyond them. */
  constructor(readonly slots: number, readonly queue: number) {}

  /** Requests waiting per instance now (the metrics' queue depth). */
  depths(): { instance: string; waiting: number }[] {
    return [...this.#gates].map(([instance, g]) => ({ instance, waiting: g.waiting.length }));
  }

  /** Requests running or waiting on the instance (what the router counts for this node's own instances). */
  load(instanceId: string): number {
    const g = this.#gates.get(instanceId);
    return g ? g.running + g.waiting.length : 0;
  }

  /**
   * Takes a slot of the instance, waiting in line for one when all are busy; refuses with Overloaded when
   * the line is full, and stops waiting (rejecting with the signal's reason) when the client goes.
   */
  async enter(instanceId: string, signal?: AbortSignal): Promise<Admitted> {
    const gate = this.#gates.get(instanceId) ?? new Gate();
    this.#gates.set(instanceId, gate);
    const t0 = performance.now();
    if (gate.running < this.slots) {
      gate.running++;
    } else if (gate.waiting.length >= this.queue) {
      throw new ServingError(
        "Overloaded",
        `instance ${instanceId} is busy: its ${this.slots} engine slots run and ${this.queue} requests wait ` +
          `(inference.queue_depth); retry shortly`,
      );
    } else {
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          resolve: () => (signal?.removeEventListener("abort", gone), resolve()),
          reject,
        };
        const gone = () => {
          const i = gate.waiting.indexOf(waiter);
          if (i >= 0) gate.waiting.splice(i, 1);
          this.#tidy(instanceId, gate);
          reject(signal?.reason ?? new Error("the client went away while queued"));
        };
        if (signal?.aborted) return gone();
        signal?.addEventListener("abort", gone, { once: true });
        gate.waiting.push(waiter);
      });
    }
    let held = true;
    return {
      waitedMs: performance.now() - t0,
      release: () => {
        if (!held) return;
        held = false;
        // The slot passes straight to the first in line; `running` stays as it is.
        const next = gate.waiting.shift();
        if (next) next.resolve();
        else gate.running--;
        this.#tidy(instanceId, gate);
      },
    };
  }

  #tidy(instanceId: string, gate: Gate): void {
    if (gate.running === 0 && gate.waiting.length === 0) this.#gates.delete(instanceId);
  }
}
