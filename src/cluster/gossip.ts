/**
 * The telemetry plane's exchange: node statuses (heartbeat, election claim, log position) and readings,
 * each last-write-wins per origin by version, swapped as bounded push-pull deltas with a few peers.
 */
import { z } from "zod";
import { type NodeReading, NodeReadingSchema } from "../telemetry/reading.ts";
import type { TelemetryEntry, TelemetryView } from "./telemetry.ts";

export const SessionSchema = z.object({ master: z.string(), clock: z.number().int().nonnegative() }).strict();
export type Session = z.infer<typeof SessionSchema>;

/** A node's small, frequently refreshed record: its heartbeat (`hb`, the origin's clock) and its election view. */
export const NodeStatusSchema = z.object({
  nodeId: z.string(),
  hb: z.number(),
  startedAt: z.number(),
  forceMaster: z.boolean(),
  lastIdx: z.number().int(),
  /** The election clock of the session that indexed the event at `lastIdx` (-1 for an empty log). */
  lastTerm: z.number().int(),
  /** The id of the event at `lastIdx`, so the master can tell that this node holds its history that far. */
  lastEventId: z.string().nullable(),
  apiAddress: z.string().nullable(),
  /** The session this node leads (master === nodeId) or follows; null while it has no master. */
  session: SessionSchema.nullable(),
}).strict();
export type NodeStatus = z.infer<typeof NodeStatusSchema>;

const Digest = z.record(z.string(), z.number());
/** `networkOmitted`: the receiver already holds this connectivity, so the reading travels without it. */
const ReadingEntry = z.object({
  reading: NodeReadingSchema,
  version: z.number(),
  networkOmitted: z.literal(true).optional(),
})
  .strict();

export const GossipMessageSchema = z.object({
  statuses: z.array(NodeStatusSchema).max(1024),
  readings: z.array(ReadingEntry).max(1024),
  /** What the sender holds, so the receiver can answer with exactly what the sender lacks. */
  digest: z.object({ statuses: Digest, readings: Digest, networks: Digest.default({}) }).strict(),
}).strict();
export type GossipMessage = z.infer<typeof GossipMessageSchema>;

/** Bounds on one message; the rest follows in the next rounds. */
export const MAX_STATUSES = 256;
export const MAX_READINGS = 24;

/** Pure: the entries the holder of `remote` lacks, largest lag first, at most `limit`. */
export function deltas<T>(
  local: { id: string; version: number; value: T }[],
  remote: Record<string, number>,
  limit: number,
): T[] {
  return local
    .filter((e) => e.version > (remote[e.id] ?? -Infinity))
    .sort((a, b) => (remote[a.id] ?? -Infinity) - (remote[b.id] ?? -Infinity))
    .slice(0, limit)
    .map((e) => e.value);
}

interface StatusEntry {
  status: NodeStatus;
  /** Local time at which `hb` last advanced: what freshness is judged by. */
  receivedAt: number;
}

/** Holds every known node's status and merges gossip into it and the TelemetryView; no I/O. */
export class GossipState {
  readonly #statuses = new Map<string, StatusEntry>();
  /** Versions at which a node was timed out: older copies still circulating must not resurrect it. */
  readonly #tombstones = new Map<string, { hb: number; version: number }>();

  constructor(readonly selfId: string, readonly telemetry: TelemetryView) {}

  offerStatus(s: NodeStatus, now: number): boolean {
    if (s.hb <= (this.#tombstones.get(s.nodeId)?.hb ?? -Infinity)) return false;
    const cur = this.#statuses.get(s.nodeId);
    if (cur && cur.status.hb >= s.hb) return false;
    this.#statuses.set(s.nodeId, { status: s, receivedAt: now });
    // A newer heartbeat also means the node's last reading is still current.
    const t = this.telemetry.get(s.nodeId);
    if (t) this.telemetry.offer(t.reading, t.version, now);
    return true;
  }

  offerReading(reading: NodeReading, version: number, now: number): boolean {
    if (version <= (this.#tombstones.get(reading.nodeId)?.version ?? -Infinity)) return false;
    return this.telemetry.offer(reading, version, now);
  }

  /** Merges a message; returns how many entries were new. */
  merge(m: GossipMessage, now: number): number {
    let n = 0;
    for (const s of m.statuses) if (s.nodeId !== this.selfId && this.offerStatus(s, now)) n++;
    for (const r of m.readings) {
      if (r.reading.nodeId === this.selfId) continue;
      let reading = r.reading;
      if (r.networkOmitted) {
        const held = this.telemetry.get(reading.nodeId);
        if (!held) continue; // the sender thought we held its connectivity; the next full copy brings it
        reading = { ...reading, network: held.reading.network };
      }
      if (this.offerReading(reading, r.version, now)) n++;
    }
    return n;
  }

  /** The message for a peer whose holdings are `remote` (empty when unknown: then only our own entries go). */
  messageFor(remote: GossipMessage["digest"] | null): GossipMessage {
    const st = [...this.#statuses.values()].map((e) => ({
      id: e.status.nodeId,
      version: e.status.hb,
      value: e.status,
    }));
    // Connectivity rides along only when the peer's copy is older than the last change of it.
    const sendsNetwork = (id: string, e: TelemetryEntry) =>
      (remote?.networks?.[id] ?? -Infinity) < e.networkVersion;
    const rd = this.telemetry.entries().map(([id, e]) => ({
      id,
      version: e.version,
      value: sendsNetwork(id, e)
        ? { reading: e.reading, version: e.version }
        : { reading: { ...e.reading, network: null }, version: e.version, networkOmitted: true as const },
    }));
    const only = (id: string) => remote !== null || id === this.selfId;
    return {
      statuses: deltas(st.filter((e) => only(e.id)), remote?.statuses ?? {}, MAX_STATUSES),
      readings: deltas(rd.filter((e) => only(e.id)), remote?.readings ?? {}, MAX_READINGS),
      digest: this.digest(),
    };
  }

  /** Answers a peer's message: merges what it brought and returns what it lacks. */
  gossipReply(m: GossipMessage, now: number): GossipMessage {
    this.merge(m, now);
    return this.messageFor(m.digest);
  }

  digest(): GossipMessage["digest"] {
    return {
      statuses: Object.fromEntries([...this.#statuses].map(([id, e]) => [id, e.status.hb])),
      readings: Object.fromEntries(this.telemetry.entries().map(([id, e]) => [id, e.version])),
      networks: Object.fromEntries(this.telemetry.entries().map(([id, e]) => [id, e.networkVersion])),
    };
  }

  status(id: string): StatusEntry | undefined {
    return this.#statuses.get(id);
  }

  statuses(): StatusEntry[] {
    return [...this.#statuses.values()];
  }

  /** Statuses heard (directly or relayed) within `windowMs`, this node's own always included. */
  fresh(now: number, windowMs: number): NodeStatus[] {
    return this.statuses().filter((e) => e.status.nodeId === this.selfId || now - e.receivedAt <= windowMs)
      .map((e) => e.status);
  }

  /** Treats a node as silent now (its connections are refused), without forgetting it. */
  suspect(id: string): void {
    const e = this.#statuses.get(id);
    if (e) e.receivedAt = -Infinity;
  }

  /** Forgets a timed-out node until it speaks again with a newer heartbeat. */
  forget(id: string): void {
    const s = this.#statuses.get(id);
    const t = this.telemetry.get(id);
    this.#tombstones.set(id, { hb: s?.status.hb ?? -Infinity, version: t?.version ?? -Infinity });
    this.#statuses.delete(id);
    this.telemetry.remove(id);
  }
}
