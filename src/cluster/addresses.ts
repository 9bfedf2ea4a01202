/**
 * The address book of one node: peer API addresses from discovery and from gossiped statuses, with a
 * short backoff for ones that fail, and the pure choice of whom to gossip with each round.
 */
export interface AddressEntry {
  address: string;
  /** Where it came from; discovered ones are kept, learned ones are dropped with their node. */
  source: "static" | "mdns" | "gossip";
  failures: number;
  retryAt: number;
}

export class AddressBook {
  readonly #entries = new Map<string, AddressEntry>();

  constructor(private readonly self: string | null) {}

  add(address: string, source: AddressEntry["source"]): void {
    if (address === this.self) return;
    const cur = this.#entries.get(address);
    if (!cur) this.#entries.set(address, { address, source, failures: 0, retryAt: 0 });
    else if (source !== "gossip") cur.source = source;
  }

  ok(address: string): void {
    const e = this.#entries.get(address);
    if (e) [e.failures, e.retryAt] = [0, 0];
  }

  /** Backs off exponentially to at most `maxMs`, so a dead static peer costs one request every few seconds. */
  failed(address: string, now: number, maxMs = 5000): void {
    const e = this.#entries.get(address);
    if (!e) return;
    e.failures++;
    // A learned address that has failed for about ten minutes belonged to a node that is gone for good.
    if (e.source === "gossip" && e.failures > 120) return void this.#entries.delete(address);
    e.retryAt = now + Math.min(maxMs, 250 * 2 ** Math.min(e.failures, 8));
  }

  ready(now: number): string[] {
    return [...this.#entries.values()].filter((e) => e.retryAt <= now).map((e) => e.address);
  }

  all(): AddressEntry[] {
    return [...this.#entries.values()];
  }
}

/** Pure: the master's address (a follower hears it every round) plus `fanout` others picked by `random`. */
export function pickTargets(
  ready: string[],
  master: string | null,
  fanout: number,
  random: () => number,
): string[] {
  const others = ready.filter((a) => a !== master);
  for (let i = others.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [others[i], others[j]] = [others[j], others[i]];
  }
  const picked = others.slice(0, fanout);
  return master && ready.includes(master) ? [master, ...picked] : picked;
}
