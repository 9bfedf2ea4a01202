/**
 * `skulk models pull ID` and `skulk models rm ID`: through the daemon's API when one runs on the data dir
 * (progress from its `/state`), else directly on the models dir with the same DownloadManager.
 */
import type { Command } from "commander";
import { loadConfig } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import type { DownloadProgress } from "../cluster/downloads.ts";
import { downloadModelId } from "../cluster/downloads.ts";
import { clearFailures, failureAction, recordFailure } from "../downloads/failures.ts";
import { DownloadCancelled } from "../downloads/errors.ts";
import { DownloadManager } from "../downloads/manager.ts";
import { managerSettings } from "../downloads/plane.ts";
import { modelsDir as modelsDirOf } from "../worker/model-files.ts";
import { Catalog } from "../models/catalog.ts";
import { HubClient, hubOptions } from "../models/hub.ts";
import { loadOrCreateIdentity } from "../node/identity.ts";
import { liveOwner } from "../node/lock.ts";
import { openStore } from "../store/db.ts";
import { CliError, formatBytes, getJson, nodeUrl } from "./common.ts";
import { modelIdProblem, quoted, repoPathProblem } from "../security/ids.ts";

interface Flags {
  dataDir?: string;
  modelsDir?: string;
  config?: string;
  url?: string;
  ggufFile?: string;
}

/** Pure: one line of progress for a record (`[#####-----]  50%  1.0 GB / 2.0 GB  12.0 MB/s  ETA 1m20s`). */
export function progressLine(p: DownloadProgress, width = 30): string {
  let done = 0, total = 0, speed = 0, eta = 0;
  let label = "";
  if ("DownloadOngoing" in p) {
    const d = p.DownloadOngoing.downloadProgress;
    [done, total, speed, eta] = [d.downloaded.inBytes, d.total.inBytes, d.speed, d.etaMs];
    label = `${d.completedFiles}/${d.totalFiles} files`;
  } else if ("DownloadPending" in p) {
    [done, total] = [p.DownloadPending.downloaded.inBytes, p.DownloadPending.total.inBytes];
    label = "starting";
  } else if ("DownloadCompleted" in p) {
    [done, total] = [p.DownloadCompleted.total.inBytes, p.DownloadCompleted.total.inBytes];
    label = "done";
  } else return `failed: ${p.DownloadFailed.errorMessage}`;
  const frac = total > 0 ? Math.min(1, done / total) : 0;
  const filled = Math.round(frac * width);
  const pct = `${(frac * 100).toFixed(0).padStart(3)}%`;
  const rate = speed > 0 ? `  ${formatBytes(speed)}/s` : "";
  const s = Math.round(eta / 1000);
  const etaText = speed > 0 && eta > 0
    ? `  ETA ${s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`}`
    : "";
  return `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${pct}  ${formatBytes(done)} / ${
    formatBytes(total)
  }${rate}${etaText}  ${label}`;
}

function printer() {
  const tty = Deno.stderr.isTerminal();
  const enc = new TextEncoder();
  let lastLine = "";
  return {
    show(line: string) {
      if (line === lastLine) return;
      lastLine = line;
      Deno.stderr.writeSync(enc.encode(tty ? `\r\x1b[2K${line}` : `${line}\n`));
    },
    end() {
      if (tty && lastLine) Deno.stderr.writeSync(enc.encode("\n"));
    },
  };
}

function configOf(flags: Flags): Config {
  return loadConfig({ dataDir: flags.dataDir, modelsDir: flags.modelsDir, config: flags.config }).config;
}

async function pullViaDaemon(url: string, modelId: string, flags: Flags): Promise<void> {
  const nodeId = await getJson<string>(`${url}/node_id`);
  const body = flags.ggufFile ? JSON.stringify({ gguf_file: flags.ggufFile }) : "{}";
  await getJson(`${url}/store/models/${modelId}/download`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json" },
  });
  const out = printer();
  for (;;) {
    const state = await getJson<{ downloads: Record<string, DownloadProgress[]> }>(`${url}/state`);
    const rec = (state.downloads[nodeId] ?? []).find((p) => downloadModelId(p) === modelId);
    if (rec) out.show(progressLine(rec));
    if (rec && "DownloadCompleted" in rec) {
      out.end();
      console.log(`${modelId}: complete in ${rec.DownloadCompleted.modelDirectory}`);
      return;
    }
    if (rec && "DownloadFailed" in rec) {
      out.end();
      throw new CliError(`${modelId}: download failed: ${rec.DownloadFailed.errorMessage}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function pullDirect(config: Config, modelId: string, flags: Flags): Promise<void> {
  const catalog = Catalog.bundled();
  const found = catalog.get(modelId);
  if (!found) {
    throw new CliError(
      `model ${modelId} is not in the catalogue; run 'skulk models --search ...' to find its id`,
    );
  }
  const card = flags.ggufFile ? { ...found, gguf_file: flags.ggufFile } : found;
  const store = await openStore(config.dataDir);
  const { nodeId } = await loadOrCreateIdentity(config.dataDir);
  const out = printer();
  let previous: DownloadProgress | undefined;
  const manager = new DownloadManager({
    nodeId,
    modelsDir: modelsDirOf(config),
    hub: new HubClient(hubOptions(config)),
    ...managerSettings(config),
    // A terminal shows finer steps than the cluster's event throttle allows.
    throttle: { minStep: 0, minIntervalMs: 200, heartbeatMs: 1000 },
    emit: async (p) => {
      const action = failureAction(p, previous);
      previous = p;
      if (action.kind === "record") {
        await recordFailure(store.db, action.nodeId, action.modelId, action.error);
      }
      if (action.kind === "clear") {
        await clearFailures(store.db, action.nodeId, action.modelId, action.reason);
      }
      out.show(progressLine(p));
    },
  });
  const onSignal = () => void manager.cancel(modelId, "interrupted");
  Deno.addSignalListener("SIGINT", onSignal);
  try {
    const dir = await manager.ensure(card);
    out.end();
    console.log(`${modelId}: complete in ${dir}`);
  } catch (e) {
    out.end();
    if (e instanceof DownloadCancelled) {
      throw new CliError(`${modelId}: ${e.message}; run the same command to resume`, 130);
    }
    throw new CliError(`${modelId}: download failed: ${(e as Error).message}`);
  } finally {
    Deno.removeSignalListener("SIGINT", onSignal);
    await manager.stop();
    store.close();
  }
}

async function rmDirect(config: Config, modelId: string): Promise<boolean> {
  const { nodeId } = await loadOrCreateIdentity(config.dataDir);
  const manager = new DownloadManager({
    nodeId,
    modelsDir: modelsDirOf(config),
    hub: new HubClient(hubOptions(config)),
    emit: async () => {},
  });
  return await manager.remove(modelId);
}

/** The id (and pinned file) as given, or a CliError naming what is wrong with them. */
function checkedArgs(modelId: string, ggufFile?: string): void {
  const problem = modelIdProblem(modelId);
  if (problem) throw new CliError(`model id ${quoted(modelId)} ${problem}`, 2);
  const fileProblem = ggufFile === undefined ? null : repoPathProblem(ggufFile);
  if (fileProblem) throw new CliError(`--gguf-file ${quoted(ggufFile!)} ${fileProblem}`, 2);
}

const common = (c: Command) =>
  c.option("--data-dir <dir>", "data dir of the node (env SKULK_DATA_DIR)")
    .option(
      "--models-dir <dir>",
      "models dir when no daemon runs (env SKULK_MODELS_DIR, default <data-dir>/models)",
    )
    .option("--config <file>", "skulk.yaml to read")
    .option("--url <url>", "a running node's API to ask instead of the one on the data dir");

export function registerPull(models: Command): void {
  common(
    models.command("pull")
      .description(
        "download a model's files onto this node, with a progress bar (resumes a partial download)",
      )
      .argument("<model-id>", "catalogue model id, e.g. unsloth/Llama-3.2-1B-Instruct-GGUF")
      .option("--gguf-file <path>", "pin another quant of a GGUF repo (repo-relative path)"),
  )
    .action(async (modelId: string, flags: Flags) => {
      checkedArgs(modelId, flags.ggufFile);
      const config = configOf(flags);
      if (flags.url || liveOwner(config.dataDir)) return await pullViaDaemon(nodeUrl(flags), modelId, flags);
      await pullDirect(config, modelId, flags);
    });
  common(
    models.command("rm")
      .description(
        "delete a model's downloaded files from this node, cancelling its download (the card stays; 'models remove' deletes a custom card)",
      )
      .argument("<model-id>", "model id"),
  )
    .action(async (modelId: string, flags: Flags) => {
      checkedArgs(modelId);
      const config = configOf(flags);
      if (flags.url || liveOwner(config.dataDir)) {
        await getJson(`${nodeUrl(flags)}/store/models/${modelId}`, { method: "DELETE" });
      } else if (!(await rmDirect(config, modelId))) {
        throw new CliError(`${modelId} has no files in ${modelsDirOf(config)}`);
      }
      console.log(`${modelId}: deleted`);
    });
}
