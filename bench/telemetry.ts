/**
 * Telemetry costs: the CPU time of one full reading (target <= 20 ms) on this host and on the fixture
 * trees, and the rows and bytes per hour the telemetry history adds at its default rate vs every reading.
 */
import process from "node:process";
import { resolveConfig } from "../src/config/load.ts";
import { openStore } from "../src/store/db.ts";
import { type CollectOptions, Collector } from "../src/telemetry/collect.ts";
import { recordSamples } from "../src/telemetry/history.ts";
import type { Address } from "../src/telemetry/network.ts";

const N = 200;
const FIXTURES = new URL("../tests/fixtures/sysfs/", import.meta.url).pathname;

async function cpuPerReading(label: string, o: CollectOptions): Promise<number> {
  const c = new Collector(o);
  await c.read(); // first reading reads identity facts once and opens NVML if present
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await c.read();
  const wall = (performance.now() - t0) / N;
  const cpu = process.cpuUsage(cpu0);
  c.close();
  const ms = (cpu.user + cpu.system) / 1000 / N;
  console.log(
    `${label.padEnd(28)} cpu ${ms.toFixed(2)} ms/reading  wall ${
      wall.toFixed(2)
    } ms/reading  (${N} readings)`,
  );
  return ms;
}

const base = { nodeId: "bench", friendlyName: "bench", apiAddress: null, worker: true };
const dir = Deno.makeTempDirSync({ prefix: "skulk-bench-telemetry-" });
try {
  console.log("== CPU time of one full reading (target <= 20 ms)");
  const host = await cpuPerReading("this host", { ...base, modelsDir: dir });
  for (const m of ["strix-halo", "thunderbolt-box", "wifi-laptop", "plain-server"]) {
    const root = `${FIXTURES}${m}`;
    const addresses = JSON.parse(Deno.readTextFileSync(`${root}/addresses.json`)) as Address[];
    await cpuPerReading(`fixture ${m}`, { ...base, modelsDir: root, root, addresses, os: "linux" });
  }
  console.log(
    `host reading ${host <= 20 ? "meets" : "MISSES"} the 20 ms target (${
      (host / 20 * 100).toFixed(0)
    }% of it)`,
  );

  console.log("\n== telemetry history growth per node");
  const reading = await new Collector({ ...base, modelsDir: dir }).read();
  const { config } = resolveConfig({ flags: {}, env: { HOME: dir } });
  const interval = config.telemetryHistoryInterval;
  const retentionH = config.telemetryHistoryRetention;
  const measure = async (everySeconds: number, hours: number) => {
    const store = await openStore(`${dir}/db-${everySeconds}`);
    const pages = async () => {
      await store.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
      const pc = Number((await store.client.execute("PRAGMA page_count")).rows[0][0]);
      const ps = Number((await store.client.execute("PRAGMA page_size")).rows[0][0]);
      return pc * ps;
    };
    const before = await pages();
    const rows = Math.round(hours * 3600 / everySeconds);
    const start = Date.parse("2026-01-01T00:00:00Z");
    // one row per sample with its own timestamp, so the (node, time) index grows as it does in life
    for (let i = 0; i < rows; i++) {
      await recordSamples(store.db, [reading], new Date(start + i * everySeconds * 1000));
    }
    const grown = (await pages()) - before;
    store.close();
    return { rowsPerHour: rows / hours, bytesPerHour: grown / hours };
  };
  const def = await measure(interval, 24);
  const every = await measure(2, 2);
  console.log(
    `default (every ${interval} s):   ${def.rowsPerHour.toFixed(0)} rows/h, ${
      (def.bytesPerHour / 1024).toFixed(1)
    } KiB/h, ` +
      `${(def.bytesPerHour * retentionH / 1024 / 1024).toFixed(2)} MiB held at ${retentionH} h retention`,
  );
  console.log(
    `every reading (every 2 s): ${every.rowsPerHour.toFixed(0)} rows/h, ${
      (every.bytesPerHour / 1024).toFixed(1)
    } KiB/h, ` +
      `${(every.bytesPerHour * retentionH / 1024 / 1024).toFixed(2)} MiB held at ${retentionH} h retention`,
  );
  console.log(
    `default rate writes ${
      (every.bytesPerHour / def.bytesPerHour).toFixed(0)
    }x fewer bytes than sampling every reading; ` +
      `${(def.bytesPerHour / def.rowsPerHour).toFixed(0)} bytes/row incl. index`,
  );
} finally {
  Deno.removeSync(dir, { recursive: true });
}
