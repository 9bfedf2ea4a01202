/** Telemetry history in a real SQLite file, and a real node process exposing its reading on /state, in SQLite and via the CLI. */
import { afterEach, describe, expect, it } from "vitest";
import { TelemetryView } from "../../src/cluster/telemetry.ts";
import { openStore, type Store } from "../../src/store/db.ts";
import { freshEntries, pruneSamples, recordSamples } from "../../src/telemetry/history.ts";
import { NodeReadingSchema } from "../../src/telemetry/reading.ts";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { FIXTURE_SYSFS as FIXTURES, fixtureReading } from "../helpers/telemetry.ts";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

describe("telemetry_samples", () => {
  it("records one summarised row per node and prunes rows past retention", async () => {
    const dir = tempDir();
    cleanup.push(() => Deno.removeSync(dir, { recursive: true }));
    const store: Store = await openStore(dir);
    cleanup.push(() => store.close());
    const [apu, server] = await Promise.all([fixtureReading("strix-halo"), fixtureReading("plain-server")]);
    const old = new Date("2026-01-01T00:00:00Z");
    const now = new Date("2026-01-09T00:00:00Z");
    expect(await recordSamples(store.db, [apu, server], old)).toBe(2);
    expect(await recordSamples(store.db, [apu, server], now)).toBe(2);
    const rows =
      (await store.client.execute("SELECT * FROM telemetry_samples WHERE taken_at = ? ORDER BY node_id", [
        now.toISOString(),
      ])).rows;
    expect(rows.map((r) => r.node_id)).toEqual(["plain-server", "strix-halo"]);
    const [srv, halo] = rows;
    expect(halo.vram_total_bytes).toBe(536870912);
    expect(halo.gpu_utilization).toBe(0.37);
    expect(halo.temperature_celsius).toBe(61.25);
    expect(halo.power_watts).toBe(48);
    expect(halo.ram_used_bytes).toBe((131_669_512 - 118_530_120) * 1024);
    expect(halo.cpu_load).toBe(1.52);
    // nothing measured is stored as NULL, never 0
    expect([srv.vram_total_bytes, srv.gpu_utilization, srv.temperature_celsius, srv.power_watts]).toEqual([
      null,
      null,
      null,
      null,
    ]);
    expect(await pruneSamples(store.db, new Date(now.getTime() - 168 * 3600_000))).toBe(2);
    expect((await store.client.execute("SELECT count(*) AS n FROM telemetry_samples")).rows[0].n).toBe(2);
  });

  it("samples only nodes heard from since the last sample", async () => {
    const view = new TelemetryView();
    const [a, b] = await Promise.all([fixtureReading("strix-halo"), fixtureReading("wifi-laptop")]);
    view.offer(a, 1, 1000);
    view.offer(b, 1, 5000);
    expect(freshEntries(view.entries(), 2000).map((e) => e.reading.nodeId)).toEqual(["wifi-laptop"]);
    expect(freshEntries(view.entries(), 0)).toHaveLength(2);
  });
});

describe("a running node", () => {
  it("serves its typed reading on /state, writes inventory and history rows, and `skulk node info` agrees", async () => {
    const d: Daemon = await startDaemon({ env: { SKULK_TELEMETRY_HISTORY_INTERVAL: "1" } });
    cleanup.push(() => Deno.removeSync(d.dataDir, { recursive: true }));
    cleanup.push(async () => void await d.kill());
    const state = await (await fetch(`${d.url}/state`)).json();
    const sys = state.nodeSystem[d.nodeId];
    expect(Array.isArray(sys.accelerators)).toBe(true);
    expect(sys.cpuCount).toBeGreaterThan(0);
    expect(state.nodeMemory[d.nodeId].ramTotal.inBytes).toBeGreaterThan(0);
    expect(state.nodeDisk[d.nodeId].available.inBytes).toBeGreaterThan(0);
    for (const i of state.nodeNetwork[d.nodeId].interfaces) {
      expect(["wifi", "ethernet", "maybe_ethernet", "thunderbolt", "vpn", "unknown"]).toContain(
        i.interfaceType,
      );
    }
    expect(await d.stop()).toBe(0);

    const sql = await skulk([
      "sql",
      "--json",
      "--data-dir",
      d.dataDir,
      "SELECT node_id, ram_total_bytes FROM telemetry_samples",
    ]);
    expect(sql.code).toBe(0);
    const rows = JSON.parse(sql.stdout) as { node_id: string; ram_total_bytes: number }[];
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows[0].node_id).toBe(d.nodeId);
    expect(rows[0].ram_total_bytes).toBe(state.nodeMemory[d.nodeId].ramTotal.inBytes);

    const info = await skulk(["node", "info", "--json", "--data-dir", d.dataDir]);
    expect(info.code).toBe(0);
    const reading = JSON.parse(info.stdout);
    expect(reading.nodeId).toBe(d.nodeId);
    expect(reading.usableMemory.rule).toMatch(/^(cpu|discrete|apu-unified|apple-unified)$/);
    const { usableMemory: _u, ...wire } = reading;
    expect(NodeReadingSchema.parse(wire)).toEqual(wire);
    expect(wire.memory.ramTotal.inBytes).toBe(state.nodeMemory[d.nodeId].ramTotal.inBytes);

    const text = await skulk(["node", "info", "--data-dir", d.dataDir, "--root", `${FIXTURES}strix-halo`]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain("AMD Radeon 8060S (Strix Halo) (unified memory) via sysfs");
    expect(text.stdout).toContain("(apu-unified)");
  });
});
