/**
 * The master's commit point: up to which index a majority of the voting nodes hold its log, and callers
 * waiting, with a bound, for their event to get there. Timers only; the plane feeds it acknowledgements.
 */

/** An event the master indexed but could not get a majority to hold in time: not acknowledged, retry. */
export class NoQuorum extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NoQuorum";
  }
}

/**
 * No master can take the request right now: none is known (an election is under way), or the one asked
 * stopped being master or stopped answering mid-request. Retryable; `code` says which.
 */
export class NoMaster extends Error {
  constructor(message: string, readonly code: "no_master" | "master_changed" = "no_master") {
    super(message);
    this.name = "NoMaster";
  }
}

interface Waiter {
  idx: number;
  resolve: () => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class CommitTracker {
  #held = new Map<string, number>();
  #index = -1;
  #waiters = new Set<Waiter>();

  /** `rule` turns what each node holds into the commit index (`commitIndex` with the current voters). */
  constructor(private readonly rule: (held: Record<string, number>) => number) {}

  get index(): number {
    return this.#index;
  }

  heldBy(nodeId: string): number {
    return this.#held.get(nodeId) ?? -1;
  }

  /** A new session: followers prove again what they hold, and nothing counts as committed until they do. */
  reset(): void {
    this.#held.clear();
    this.#index = -1;
    this.update();
  }

  /** `nodeId` holds the master's history up to `idx`. */
  ack(nodeId: string, idx: number): void {
    if (idx <= this.heldBy(nodeId)) return;
    this.#held.set(nodeId, idx);
    this.update();
  }

  /** Recomputes the commit index (after an ack, an append or a change of voters) and wakes who it reached. */
  update(): void {
    this.#index = Math.max(this.#index, this.rule(Object.fromEntries(this.#held)));
    for (const w of this.#waiters) {
      if (w.idx <= this.#index) this.#settle(w).resolve();
    }
  }

  /** Resolves once `idx` is committed; rejects with NoQuorum (message from `why`) after `timeoutMs`. */
  wait(idx: number, timeoutMs: number, why: () => string): Promise<void> {
    if (idx <= this.#index) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        idx,
        resolve,
        reject,
        timer: setTimeout(() => this.#settle(w).reject(new NoQuorum(why())), timeoutMs),
      };
      this.#waiters.add(w);
    });
  }

  /** This node stopped being master: nobody waiting will be acknowledged by it. */
  failAll(message: string): void {
    for (const w of this.#waiters) this.#settle(w).reject(new NoQuorum(message));
  }

  #settle(w: Waiter): Waiter {
    clearTimeout(w.timer);
    this.#waiters.delete(w);
    return w;
  }
}
