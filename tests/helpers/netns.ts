/**
 * A private L2 segment made of network namespaces for multi-node tests: a bridge inside its own hub
 * namespace, one namespace per node on it, and one veth from the test's namespace so the test can reach
 * the nodes. Nothing routes beyond it; `remove()` deletes all of it (also after a failure).
 */
function ip(...args: string[]): void {
  const out = new Deno.Command("ip", { args, stdout: "null", stderr: "piped" }).outputSync();
  if (!out.success) throw new Error(`ip ${args.join(" ")}: ${new TextDecoder().decode(out.stderr).trim()}`);
}

/** True when this process may create network namespaces (root, iproute2 present, kernel support). */
export function netnsAvailable(): boolean {
  const probe = `skprobe${Math.floor(Math.random() * 1e6)}`;
  try {
    ip("netns", "add", probe);
    ip("netns", "del", probe);
    return true;
  } catch {
    return false;
  }
}

export interface Segment {
  /** The namespace of node i and its address. */
  node(i: number): { netns: string; address: string };
  linkDown(i: number): void;
  linkUp(i: number): void;
  /**
   * Cuts node i off from the other nodes (both ways, packets dropped by blackhole routes) while the test's
   * own door onto the segment still reaches every node, so a client can keep talking to both sides.
   */
  isolate(i: number): void;
  /** Undoes `isolate(i)`. */
  rejoin(i: number): void;
  remove(): void;
}

export function makeSegment(nodes: number): Segment {
  const tag = Math.floor(Math.random() * 1e5).toString(36);
  const net = `10.213.${1 + Math.floor(Math.random() * 250)}`;
  const hub = `skh-${tag}`;
  const ns = (i: number) => `skn-${tag}-${i}`;
  const port = (i: number) => `skv${tag}${i}`;
  const made: string[] = [];
  const remove = () => {
    for (const n of made.reverse()) {
      try {
        ip("netns", "del", n);
      } catch { /* already gone */ }
    }
    made.length = 0;
  };
  try {
    ip("netns", "add", hub);
    made.push(hub);
    ip("-n", hub, "link", "add", "br0", "type", "bridge");
    ip("-n", hub, "link", "set", "br0", "up");
    // The test's own door onto the segment; deleting the hub namespace deletes its peer and so the pair.
    ip("link", "add", `skt${tag}`, "type", "veth", "peer", "name", "up0", "netns", hub);
    ip("-n", hub, "link", "set", "up0", "master", "br0", "up");
    ip("addr", "add", `${net}.254/24`, "dev", `skt${tag}`);
    ip("link", "set", `skt${tag}`, "up");
    for (let i = 0; i < nodes; i++) {
      ip("netns", "add", ns(i));
      made.push(ns(i));
      ip("-n", hub, "link", "add", port(i), "type", "veth", "peer", "name", "eth0", "netns", ns(i));
      ip("-n", hub, "link", "set", port(i), "master", "br0", "up");
      ip("-n", ns(i), "addr", "add", `${net}.${i + 1}/24`, "dev", "eth0");
      ip("-n", ns(i), "link", "set", "eth0", "up");
      ip("-n", ns(i), "link", "set", "lo", "up");
      // mDNS multicast leaves through the segment, never anywhere else.
      ip("-n", ns(i), "route", "add", "224.0.0.0/4", "dev", "eth0");
    }
  } catch (e) {
    remove();
    throw e;
  }
  return {
    node: (i) => ({ netns: ns(i), address: `${net}.${i + 1}` }),
    linkDown: (i) => ip("-n", hub, "link", "set", port(i), "down"),
    linkUp: (i) => ip("-n", hub, "link", "set", port(i), "up"),
    isolate: (i) => {
      for (let j = 0; j < nodes; j++) {
        if (j === i) continue;
        ip("-n", ns(i), "route", "add", "blackhole", `${net}.${j + 1}/32`);
        ip("-n", ns(j), "route", "add", "blackhole", `${net}.${i + 1}/32`);
      }
    },
    rejoin: (i) => {
      for (let j = 0; j < nodes; j++) {
        if (j === i) continue;
        ip("-n", ns(i), "route", "del", "blackhole", `${net}.${j + 1}/32`);
        ip("-n", ns(j), "route", "del", "blackhole", `${net}.${i + 1}/32`);
      }
    },
    remove,
  };
}
