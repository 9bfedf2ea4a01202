/**
 * Temperatures from hwmon (`/sys/class/hwmon/hwmon*\/temp*_input`) and thermal zones, and the one CPU
 * figure upstream shows as `temp`. A node without sensors reports an empty list and a null CPU temperature.
 */
import type { Temperature } from "./reading.ts";
import type { FsRoot } from "./root.ts";

/** Disconnected sensors read -273, 0 or 255 °C style sentinels; only plausible values are kept. */
const plausible = (c: number) => c > -40 && c < 150 && c !== 0;

export function readTemperatures(fs: FsRoot): Temperature[] {
  const out: Temperature[] = [];
  for (const hw of fs.list("sys/class/hwmon")) {
    const dir = `sys/class/hwmon/${hw}`;
    const sensor = fs.text(`${dir}/name`)?.trim() || hw;
    for (const f of fs.list(dir)) {
      const m = f.match(/^temp(\d+)_input$/);
      if (!m) continue;
      const milli = fs.number(`${dir}/${f}`);
      if (milli === null || !plausible(milli / 1000)) continue;
      out.push({
        sensor,
        label: fs.text(`${dir}/temp${m[1]}_label`)?.trim() || `temp${m[1]}`,
        celsius: milli / 1000,
      });
    }
  }
  for (const z of fs.list("sys/class/thermal").filter((n) => n.startsWith("thermal_zone"))) {
    const milli = fs.number(`sys/class/thermal/${z}/temp`);
    if (milli === null || !plausible(milli / 1000)) continue;
    out.push({
      sensor: "thermal_zone",
      label: fs.text(`sys/class/thermal/${z}/type`)?.trim() || z,
      celsius: milli / 1000,
    });
  }
  return out.sort((a, b) =>
    a.sensor.localeCompare(b.sensor) || a.label.localeCompare(b.label) || a.celsius - b.celsius
  );
}

const CPU_HWMON = new Set(["k10temp", "zenpower", "coretemp", "cpu_thermal", "cpu-thermal"]);
const CPU_ZONES = new Set(["x86_pkg_temp", "cpu-thermal", "cpu_thermal", "soc_thermal", "cpu0-thermal"]);

/** The hottest CPU package sensor (hwmon first, thermal zones next); null when none is a CPU sensor. */
export function cpuTemperature(temps: Temperature[]): number | null {
  const hw = temps.filter((t) => CPU_HWMON.has(t.sensor));
  const pool = hw.length ? hw : temps.filter((t) => t.sensor === "thermal_zone" && CPU_ZONES.has(t.label));
  return pool.length ? Math.max(...pool.map((t) => t.celsius)) : null;
}
