/**
 * mDNS discovery: announces `_skulk._tcp` with TXT namespace, version and API port, and offers every
 * answering node of our namespace and version to the address book. Pure parsing lives in `peerFromAnswers`.
 */
import mdnsFactory from "multicast-dns";
import { logger } from "../../log/mod.ts";
import { VERSION } from "../../version.ts";
import type { Discovery } from "./static-peers.ts";

const log = logger("mdns");
export const SERVICE = "_skulk._tcp.local";
/** Queries repeat this often, so a node that starts later or a healed link is found again quickly. */
const QUERY_EVERY_MS = 5000;

interface Answer {
  name: string;
  type: string;
  data: unknown;
}
interface Packet {
  questions?: { name: string; type: string }[];
  answers?: Answer[];
  additionals?: Answer[];
}
interface Mdns {
  on(event: "query" | "response", f: (p: Packet) => void): void;
  on(event: "error" | "warning", f: (e: Error) => void): void;
  query(q: { questions: { name: string; type: string }[] }): void;
  respond(r: { answers: Answer[]; additionals?: Answer[] }): void;
  destroy(): void;
}

export interface Advert {
  nodeId: string;
  namespace: string;
  version: string;
  host: string;
  port: number;
}

const txtOf = (a: Advert) => [`ns=${a.namespace}`, `v=${a.version}`, `port=${a.port}`, `id=${a.nodeId}`];

/** The records a node answers with: PTR to its instance, SRV with the port, TXT with namespace and version, A. */
export function advertRecords(a: Advert): Answer[] {
  const instance = `${a.nodeId}.${SERVICE}`;
  const target = `${a.nodeId.slice(-12).toLowerCase()}.local`;
  return [
    { name: SERVICE, type: "PTR", data: instance },
    { name: instance, type: "SRV", data: { port: a.port, target } },
    { name: instance, type: "TXT", data: txtOf(a) },
    { name: target, type: "A", data: a.host },
  ];
}

/** Pure: the peer an mDNS response describes, when it is a Skulk node of this namespace and version. */
export function peerFromAnswers(
  records: Answer[],
  namespace: string,
  version: string,
): { address: string; nodeId: string } | { refused: string } | null {
  const txt = records.find((r) => r.type === "TXT" && r.name.endsWith(SERVICE));
  if (!txt) return null;
  const fields = Object.fromEntries(
    (txt.data as (Uint8Array | string)[]).map((d) =>
      (typeof d === "string" ? d : new TextDecoder().decode(d)).split("=", 2)
    ),
  ) as Record<string, string>;
  const a = records.find((r) => r.type === "A");
  if (!a || !fields.port || !fields.id) return null;
  if (fields.ns !== namespace) {
    return {
      refused: `node ${fields.id} at ${a.data} is in namespace '${fields.ns}', not ours ('${namespace}')`,
    };
  }
  if (fields.v !== version) {
    return { refused: `node ${fields.id} at ${a.data} runs Skulk ${fields.v}, not ours (${version})` };
  }
  return { address: `${a.data}:${fields.port}`, nodeId: fields.id };
}

export function mdnsDiscovery(
  o: { namespace: string; apiAddress: string | null; nodeId: string },
): Discovery {
  let m: Mdns | null = null;
  let timer: ReturnType<typeof setInterval> | undefined;
  const seen = new Set<string>();
  return {
    name: "mdns",
    start(found) {
      const [host, port] = (o.apiAddress ?? "").split(":");
      if (!host || host.startsWith("127.")) {
        log.info(
          "mDNS off: the API binds loopback only, so peers could not reach the address we would announce",
        );
        return;
      }
      const advert: Advert = {
        nodeId: o.nodeId,
        namespace: o.namespace,
        version: VERSION,
        host,
        port: Number(port),
      };
      try {
        m = (mdnsFactory as unknown as (opts: object) => Mdns)({ reuseAddr: true });
      } catch (e) {
        log.warn("mDNS unavailable ({error}); use --peer host:port", { error: (e as Error).message });
        return;
      }
      m.on("error", (e) => log.debug("mDNS error: {error}", { error: e.message }));
      m.on("warning", (e) => log.debug("mDNS warning: {error}", { error: e.message }));
      m.on("query", (q) => {
        if (q.questions?.some((x) => x.name === SERVICE)) m?.respond({ answers: advertRecords(advert) });
      });
      m.on("response", (r) => {
        const p = peerFromAnswers([...(r.answers ?? []), ...(r.additionals ?? [])], o.namespace, VERSION);
        if (!p) return;
        const key = "refused" in p ? p.refused : p.address;
        if ("refused" in p) {
          if (!seen.has(key)) log.warn("mDNS: ignoring {why}", { why: p.refused });
        } else if (p.nodeId !== o.nodeId) {
          if (!seen.has(key)) log.info("mDNS found node {nodeId} at {address}", p);
          found(p.address);
        }
        seen.add(key);
      });
      const ask = () => m?.query({ questions: [{ name: SERVICE, type: "PTR" }] });
      ask();
      timer = setInterval(ask, QUERY_EVERY_MS);
    },
    stop() {
      clearInterval(timer);
      m?.destroy();
      m = null;
    },
  };
}
