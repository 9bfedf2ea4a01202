/**
 * The telemetry plane's store: the last reading of every node, last-write-wins per origin by a version
 * counter, with the local receipt time that liveness is judged by. Never part of the event log.
 */
import type { NodeReading } from "../telemetry/reading.ts";

export interface TelemetryEntry {
  reading: NodeReading;
  /** The origin's own counter; a higher version replaces a lower one. */
  version: number;
  /** When this node last heard from the origin (ms since epoch, local clock). */
  receivedAt: number;
  /**
   * The version of the first reading held here with the current network interfaces: connectivity
   * changes rarely, so gossip sends it only to a peer whose copy is older than this (gossip.ts).
   */
  networkVersion: number;
}

/** Readings are sorted at the source, so equal connectivity serialises equally. */
function sameNetwork(a: NodeReading, b: NodeReading): boolean {
  return JSON.stringify(a.network) === JSON.stringify(b.network);
}

export class TelemetryView {
  readonly #entries = new Map<string, TelemetryEntry>();

  /** Applies a reading if it is newer than what is held; returns whether it changed anything. */
  offer(reading: NodeReading, version: number, now: number): boolean {
    const cur = this.#entries.get(reading.nodeId);
    if (cur && cur.version >= version) {
      if (cur.version === version) cur.receivedAt = Math.max(cur.receivedAt, now);
      return false;
    }
    const networkVersion = cur && sameNetwork(cur.reading, reading) ? cur.networkVersion : version;
    this.#entries.set(reading.nodeId, { reading, version, receivedAt: now, networkVersion });
    return true;
  }

  get(nodeId: string): TelemetryEntry | undefined {
    return this.#entries.get(nodeId);
  }

  entries(): [string, TelemetryEntry][] {
    return [...this.#entries.entries()];
  }

  remove(nodeId: string): void {
    this.#entries.delete(nodeId);
  }
}
