/**
 * The downloads plane: builds the node's DownloadManager from config and environment, publishes its
 * progress as `NodeDownloadProgress` events, keeps `download_failures` in step, and re-advertises disk at start.
 */
import type { Config } from "../config/schema.ts";
import { makeEvent } from "../cluster/events.ts";
import { downloadModelId } from "../cluster/downloads.ts";
import type { Plane } from "../daemon/node.ts";
import { logger } from "../log/mod.ts";
import { modelsDir } from "../worker/model-files.ts";
import { HubClient, hubOptionsFromEnv } from "../models/hub.ts";
import type { NodeContext } from "../node/context.ts";
import { isDiskFailure } from "./disk.ts";
import { clearFailures, failureRecorder, openFailures } from "./failures.ts";
import { DownloadManager } from "./manager.ts";
import { DEFAULT_RETRY } from "./retry.ts";

const log = logger("downloads");

const truthy = (v: string | undefined) =>
  v !== undefined && ["1", "true", "yes", "on"].includes(v.trim().toLowerCase());

/** Offline when either upstream's `SKULK_OFFLINE` or huggingface_hub's `HF_HUB_OFFLINE` says so. */
export function offlineFromEnv(env: Record<string, string | undefined>): boolean {
  return truthy(env.HF_HUB_OFFLINE) || truthy(env.SKULK_OFFLINE);
}

function positiveInt(v: string | undefined, fallback: number): number {
  const n = Number(v);
  return Number.isInteger(n) && n > 0 ? n : fallback;
}

/** Manager settings from the environment (the parallel-file cap and the retry backoff are tunable there). */
export function managerSettings(env: Record<string, string | undefined>) {
  return {
    offline: offlineFromEnv(env),
    maxParallelFiles: positiveInt(env.SKULK_DOWNLOAD_MAX_FILES, 8),
    retry: {
      ...DEFAULT_RETRY,
      attempts: positiveInt(env.SKULK_DOWNLOAD_ATTEMPTS, DEFAULT_RETRY.attempts),
      baseMs: positiveInt(env.SKULK_DOWNLOAD_RETRY_BASE_MS, DEFAULT_RETRY.baseMs),
    },
  };
}

export function downloadPlane(
  config: Config,
  env: Record<string, string | undefined> = Deno.env.toObject(),
): Plane {
  let manager: DownloadManager | undefined;
  return {
    name: "downloads",
    async start(ctx: NodeContext) {
      const db = ctx.store.db;
      ctx.log.onApplied(failureRecorder(db));
      manager = new DownloadManager({
        nodeId: ctx.nodeId,
        modelsDir: modelsDir(config),
        hub: new HubClient(hubOptionsFromEnv(env)),
        ...managerSettings(env),
        emit: (p) => ctx.submit(makeEvent("NodeDownloadProgress", { downloadProgress: p })),
        currentRecord: (modelId) =>
          (ctx.log.state.downloads[ctx.nodeId] ?? []).find((p) => downloadModelId(p) === modelId),
        onDiskCheckPassed: async (modelId) => {
          const open = await openFailures(db, { nodeId: ctx.nodeId, modelId });
          if (open.some((r) => isDiskFailure(r.error))) {
            await clearFailures(db, ctx.nodeId, modelId, "disk space is now sufficient");
          }
        },
      });
      ctx.downloads = manager;
      const n = await manager.readvertise();
      if (n > 0) log.info("re-advertised {n} model(s) from {dir}", { n, dir: manager.modelsDir });
      const resumed = await manager.resumeInterrupted();
      if (resumed.length > 0) {
        log.info("resuming {n} download(s) the last run left unfinished: {models}", {
          n: resumed.length,
          models: resumed.join(", "),
        });
      }
      if (manager.offline) {
        log.info("offline mode: downloads use only what is on disk in {dir}", { dir: manager.modelsDir });
      }
    },
    async stop() {
      await manager?.stop();
    },
  };
}
