/**
 * AMD GPUs from sysfs (`/sys/class/drm/card*\/device`): VRAM and GTT totals and use, busy percent,
 * and the card's hwmon temperature, power and shader clock. An absent attribute is null, never zero.
 */
import type { Accelerator } from "../reading.ts";
import type { FsRoot } from "../root.ts";

const AMD_VENDOR = "0x1002";

/** PCI device ids of AMD APUs (integrated GPUs sharing system RAM); the marketing name is for display. */
const AMD_APUS: Record<string, string> = {
  "0x1586": "AMD Radeon 8060S (Strix Halo)",
  "0x150e": "AMD Radeon 890M (Strix Point)",
  "0x15bf": "AMD Radeon 780M (Phoenix)",
  "0x15c8": "AMD Radeon 740M (Phoenix2)",
  "0x1681": "AMD Radeon 680M (Rembrandt)",
  "0x164e": "AMD Radeon Graphics (Raphael)",
};

/**
 * An AMD GPU shares system RAM when its PCI id is a known APU, or (unknown ids) when its GTT window is
 * both larger than its VRAM carve and at least three quarters of RAM: the Strix Halo setup with
 * `amdgpu.gttsize` raised. A discrete card keeps the kernel's default GTT of half of RAM, so it stays out.
 */
export function isUnifiedAmd(
  deviceId: string | null,
  vramTotal: number | null,
  gttTotal: number | null,
  ramTotal: number | null,
) {
  if (deviceId !== null && deviceId in AMD_APUS) return true;
  if (vramTotal === null || gttTotal === null || ramTotal === null) return false;
  return gttTotal > vramTotal && gttTotal >= 0.75 * ramTotal;
}

/** The clock marked current (`*`) in `pp_dpm_sclk` ("1: 2900Mhz *"), in MHz. */
export function currentDpmClock(text: string | null): number | null {
  const line = text?.split("\n").find((l) => l.trim().endsWith("*"));
  const m = line?.match(/(\d+)\s*Mhz/i);
  return m ? Number(m[1]) : null;
}

function hwmonDir(fs: FsRoot, device: string): string | null {
  const first = fs.list(`${device}/hwmon`).find((n) => n.startsWith("hwmon"));
  return first ? `${device}/hwmon/${first}` : null;
}

/** Every AMD card under `class/drm`, in card order; connector entries (card0-DP-1) are skipped. */
export function readAmdGpus(fs: FsRoot, ramTotal: number | null): Accelerator[] {
  const out: Accelerator[] = [];
  const cards = fs.list("sys/class/drm").filter((n) => /^card\d+$/.test(n))
    .sort((a, b) => Number(a.slice(4)) - Number(b.slice(4)));
  for (const card of cards) {
    const dev = `sys/class/drm/${card}/device`;
    if (fs.text(`${dev}/vendor`)?.trim() !== AMD_VENDOR) continue;
    const deviceId = fs.text(`${dev}/device`)?.trim() ?? null;
    const vramTotal = fs.number(`${dev}/mem_info_vram_total`);
    const gttTotal = fs.number(`${dev}/mem_info_gtt_total`);
    const busy = fs.number(`${dev}/gpu_busy_percent`);
    const hw = hwmonDir(fs, dev);
    const milliC = hw ? fs.number(`${hw}/temp1_input`) : null;
    // Newer kernels report APU power as power1_input; discrete cards as power1_average (both µW).
    const microW = hw ? (fs.number(`${hw}/power1_average`) ?? fs.number(`${hw}/power1_input`)) : null;
    const hz = hw ? fs.number(`${hw}/freq1_input`) : null;
    const product = fs.text(`${dev}/product_name`)?.trim();
    out.push({
      vendor: "amd",
      name: product || (deviceId && AMD_APUS[deviceId]) || `AMD GPU ${deviceId ?? card}`,
      utilizationRatio: busy === null ? null : busy / 100,
      vramTotalBytes: vramTotal,
      vramUsedBytes: fs.number(`${dev}/mem_info_vram_used`),
      gttTotalBytes: gttTotal,
      gttUsedBytes: fs.number(`${dev}/mem_info_gtt_used`),
      powerWatts: microW === null ? null : microW / 1e6,
      temperatureCelsius: milliC === null ? null : milliC / 1000,
      clockMhz: hz !== null ? Math.round(hz / 1e6) : currentDpmClock(fs.text(`${dev}/pp_dpm_sclk`)),
      unifiedMemory: isUnifiedAmd(deviceId, vramTotal, gttTotal, ramTotal),
      source: "sysfs",
    });
  }
  return out;
}
