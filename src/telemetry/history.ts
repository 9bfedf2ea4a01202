/**
 * Telemetry history: one `telemetry_samples` row per node per interval (default once a minute), pruned
 * past the retention window. The row summarises a reading; the full reading stays on the telemetry plane.
 */
import { lt } from "drizzle-orm";
import type { TelemetryEntry } from "../cluster/telemetry.ts";
import type { Db } from "../store/db.ts";
import { telemetrySamples } from "../store/schema.ts";
import type { NodeReading } from "./reading.ts";

export type SampleRow = typeof telemetrySamples.$inferInsert;

const sum = (xs: (number | null)[]): number | null => {
  const known = xs.filter((x): x is number => x !== null);
  return known.length ? known.reduce((a, b) => a + b, 0) : null;
};

/** A reading's history row; what the reading did not measure stays null. `cpu_load` is the 1-minute load average. */
export function sampleRow(r: NodeReading, takenAt: Date): SampleRow {
  const accs = r.system?.accelerators ?? [];
  const head = r.system?.accelerator ?? null;
  return {
    nodeId: r.nodeId,
    takenAt: takenAt.toISOString(),
    ramUsedBytes: r.memory ? r.memory.ramTotal.inBytes - r.memory.ramAvailable.inBytes : null,
    ramTotalBytes: r.memory?.ramTotal.inBytes ?? null,
    vramUsedBytes: sum(accs.map((a) => a.vramUsedBytes)),
    vramTotalBytes: sum(accs.map((a) => a.vramTotalBytes)),
    gpuUtilization: head?.utilizationRatio ?? r.system?.gpuUsage ?? null,
    temperatureCelsius: r.system?.temp ?? head?.temperatureCelsius ?? null,
    powerWatts: r.system?.sysPower ?? sum(accs.map((a) => a.powerWatts)),
    cpuLoad: r.system?.loadAverage?.[0] ?? null,
    diskAvailableBytes: r.disk?.available.inBytes ?? null,
  };
}

/** The entries heard from since the last sample: a silent node gets no rows, so gaps show as gaps. */
export function freshEntries(entries: [string, TelemetryEntry][], since: number): TelemetryEntry[] {
  return entries.map(([, e]) => e).filter((e) => e.receivedAt > since);
}

export async function recordSamples(db: Db, readings: NodeReading[], takenAt: Date): Promise<number> {
  if (readings.length === 0) return 0;
  await db.insert(telemetrySamples).values(readings.map((r) => sampleRow(r, takenAt)));
  return readings.length;
}

/** Deletes rows taken before `cutoff`; returns how many went. */
export async function pruneSamples(db: Db, cutoff: Date): Promise<number> {
  const res = await db.delete(telemetrySamples).where(lt(telemetrySamples.takenAt, cutoff.toISOString()));
  return res.rowsAffected;
}
