/**
 * The log outputs' figures on a node's Prometheus registry: lines shipped, dropped and buffered, and the
 * flight recorder's fill, read when Prometheus scrapes.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { shippingStats } from "../log/mod.ts";
import type { FlightRecorder } from "./recorder.ts";

/** A counter whose value is read from elsewhere at scrape time (it only ever grows there). */
function readCounter(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

export function registerDiagnosticsMetrics(registry: Registry, flight: FlightRecorder | undefined): void {
  readCounter(
    registry,
    "skulk_log_lines_shipped_total",
    "Log lines the log store accepted",
    () => shippingStats()?.shipped ?? 0,
  );
  readCounter(
    registry,
    "skulk_log_lines_dropped_total",
    "Log lines dropped unshipped: the oldest when the buffer was full, and batches the store refused",
    () => shippingStats()?.dropped ?? 0,
  );
  new Gauge({
    name: "skulk_log_ship_buffered_lines",
    help: "Log lines waiting to be shipped",
    registers: [registry],
    collect() {
      this.set(shippingStats()?.buffered ?? 0);
    },
  });
  readCounter(
    registry,
    "skulk_flight_recorder_entries_total",
    "Entries noted in this node's flight recorder (it keeps the newest diagnostics.flight_recorder_size)",
    () => flight?.noted ?? 0,
  );
}
