/**
 * `skulk node info [--json]`: takes this machine's telemetry reading directly (no daemon needed) and
 * prints it, with the usable memory placement would count; `--json` prints the wire reading for scripts.
 */
import type { Command } from "commander";
import { loadConfig } from "../config/load.ts";
import { peerIdFromEd25519 } from "../node/identity.ts";
import { Collector } from "../telemetry/collect.ts";
import { linkPreference } from "../telemetry/network.ts";
import type { NodeReading } from "../telemetry/reading.ts";
import { type UsableMemory, usableMemory } from "../telemetry/usable.ts";
import { formatBytes } from "./common.ts";

/** The node id of the data dir, without creating one: a machine that never ran a node has none yet. */
async function existingNodeId(dataDir: string): Promise<string> {
  try {
    const file = JSON.parse(await Deno.readTextFile(`${dataDir}/node_key.json`)) as { publicKey: string };
    return peerIdFromEd25519(Uint8Array.from(atob(file.publicKey), (c) => c.charCodeAt(0)));
  } catch {
    return "";
  }
}

const pct = (
  r: number | null | undefined,
) => (r === null || r === undefined ? "not measured" : `${Math.round(r * 100)}%`);
const unit = (
  v: number | null | undefined,
  u: string,
) => (v === null || v === undefined ? "not measured" : `${+v.toFixed(1)} ${u}`);

export function formatReading(r: NodeReading, usable: UsableMemory): string {
  const lines: string[] = [];
  const id = r.identity;
  lines.push(`${id.friendlyName} (${r.nodeId || "no node id yet"})`);
  lines.push(`  machine   ${id.modelId}, ${id.chipId}, ${id.osVersion}`);
  const m = r.memory;
  lines.push(
    m
      ? `  memory    ${formatBytes(m.ramAvailable.inBytes)} available of ${formatBytes(m.ramTotal.inBytes)}` +
        (m.swapTotal && m.swapTotal.inBytes > 0
          ? `, swap ${formatBytes(m.swapAvailable?.inBytes)} free of ${formatBytes(m.swapTotal.inBytes)}`
          : "")
      : "  memory    not measured",
  );
  lines.push(
    `  usable    ${formatBytes(usable.bytes)} for a model (${usable.rule})` +
      (usable.offloadBytes !== null ? `, plus ${formatBytes(usable.offloadBytes)} RAM for CPU offload` : ""),
  );
  const s = r.system;
  lines.push(
    `  cpu       ${s?.cpuCount ?? "?"} threads, load ${
      s?.loadAverage?.map((x) => x.toFixed(2)).join(" ") ?? "not measured"
    }, ` +
      `busy ${pct(s?.cpuUsage)}, ${unit(s?.temp, "°C")}`,
  );
  const accs = s?.accelerators ?? [];
  if (accs.length === 0) lines.push("  gpu       none (CPU only)");
  for (const a of accs) {
    lines.push(
      `  gpu       ${a.vendor} ${a.name}${a.unifiedMemory ? " (unified memory)" : ""} via ${
        a.source ?? "?"
      }: ` +
        `VRAM ${formatBytes(a.vramUsedBytes)} used of ${formatBytes(a.vramTotalBytes)}` +
        (a.gttTotalBytes !== null
          ? `, GTT ${formatBytes(a.gttUsedBytes)} used of ${formatBytes(a.gttTotalBytes)}`
          : "") +
        `, busy ${pct(a.utilizationRatio)}, ${unit(a.temperatureCelsius, "°C")}, ${
          unit(a.powerWatts, "W")
        }, ${unit(a.clockMhz, "MHz")}`,
    );
  }
  lines.push(
    r.disk
      ? `  disk      ${formatBytes(r.disk.available.inBytes)} free of ${
        formatBytes(r.disk.total.inBytes)
      } at ${r.disk.path ?? "?"}`
      : "  disk      not measured",
  );
  const ifaces = [...(r.network?.interfaces ?? [])].sort((a, b) =>
    linkPreference(a.interfaceType) - linkPreference(b.interfaceType)
  );
  if (ifaces.length === 0) lines.push("  network   no addresses");
  for (const i of ifaces) {
    lines.push(`  network   ${i.name.padEnd(16)} ${i.interfaceType.padEnd(14)} ${i.ipAddress}`);
  }
  return lines.join("\n");
}

export function registerNode(program: Command): void {
  const node = program.command("node").description("this machine as a node");
  node.command("info")
    .description(
      "print this machine's telemetry reading (memory, accelerators, temperatures, disk, typed interfaces)",
    )
    .option("--json", "print the reading as JSON (the /state wire pieces plus usableMemory)")
    .option("--data-dir <dir>", "data dir (for the node id and the models dir)")
    .option("--config <file>", "skulk.yaml to read settings from")
    .option("--root <dir>", "read sysfs/procfs under this root instead of / (fixture trees)")
    .action(async (flags) => {
      const { config } = loadConfig({ dataDir: flags.dataDir, config: flags.config });
      const collector = new Collector({
        nodeId: await existingNodeId(config.dataDir),
        friendlyName: config.friendlyName,
        apiAddress: null,
        worker: config.worker,
        modelsDir: config.modelsDir ?? `${config.dataDir}/models`,
        root: flags.root,
      });
      try {
        // CPU busy share needs two counter snapshots; a quarter second apart is enough to be honest.
        await collector.read();
        await new Promise((r) => setTimeout(r, 250));
        const reading = await collector.read();
        const usable = usableMemory(reading);
        console.log(
          flags.json
            ? JSON.stringify({ ...reading, usableMemory: usable }, null, 2)
            : formatReading(reading, usable),
        );
      } finally {
        collector.close();
      }
    });
}
