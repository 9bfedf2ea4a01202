/**
 * Static peers: the `--peer host:port` / SKULK_PEERS addresses an operator names, offered to the address
 * book like any discovered peer (useful across subnets where mDNS does not reach).
 */
export interface Discovery {
  name: string;
  start(found: (address: string) => void): Promise<void> | void;
  stop(): Promise<void> | void;
}

export function staticPeers(addresses: string[]): Discovery {
  return {
    name: "static",
    start: (found) => addresses.forEach(found),
    stop: () => {},
  };
}
