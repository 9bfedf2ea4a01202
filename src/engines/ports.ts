/**
 * Ports for engines: a band (24000-31999) outside the OS ephemeral range, so an engine never races a
 * client socket for its port, and never two listeners on one port from this node.
 */
export const PORT_BAND = { first: 24000, last: 31999 } as const;

export class PortAllocator {
  readonly #held = new Set<number>();
  #next: number;

  constructor(readonly first = PORT_BAND.first, readonly last = PORT_BAND.last, seed = Deno.pid) {
    // Start at a pid-derived offset so two daemons on one host rarely probe the same ports first.
    this.#next = first + (seed % (last - first + 1));
  }

  /** A port in the band that nothing listens on now (checked by binding it), held until released. */
  allocate(hostname = "127.0.0.1"): number {
    const span = this.last - this.first + 1;
    for (let i = 0; i < span; i++) {
      const port = this.first + ((this.#next - this.first + i) % span);
      if (this.#held.has(port)) continue;
      try {
        const l = Deno.listen({ hostname, port });
        l.close();
      } catch {
        continue;
      }
      this.#held.add(port);
      this.#next = port + 1 > this.last ? this.first : port + 1;
      return port;
    }
    throw new Error(`no free port in ${this.first}-${this.last} on ${hostname}`);
  }

  release(port: number): void {
    this.#held.delete(port);
  }
}
