/**
 * The downloads plane: builds the node's DownloadManager from its config, publishes its
 * progress as `NodeDownloadProgress` events, keeps `download_failures` in step, and re-advertises disk at start.
 */
import type { Config } from "../config/schema.ts";
import { makeEvent } from "../cluster/events.ts";
import { downloadModelId } from "../cluster/downloads.ts";
import type { Plane } from "../node/plane.ts";
import { logger } from "../log/mod.ts";
import { modelsDir } from "../worker/model-files.ts";
import { HubClient, hubOptions } from "../models/hub.ts";
import type { NodeContext } from "../node/context.ts";
import { isDiskFailure } from "./disk.ts";
import { clearFailures, failureRecorder, openFailures } from "./failures.ts";
import { DownloadManager } from "./manager.ts";
import { DEFAULT_RETRY } from "./retry.ts";

const log = logger("downloads");

export type DownloadSettings = Pick<
  Config,
  "offline" | "downloadMaxFiles" | "downloadAttempts" | "downloadRetryBaseMs" | "downloadHttp"
>;

/** The manager's tunables from the resolved Config (offline mode, parallel files, retry backoff, HTTP client). */
export function managerSettings(config: DownloadSettings) {
  return {
    offline: config.offline,
    maxParallelFiles: config.downloadMaxFiles,
    retry: { ...DEFAULT_RETRY, attempts: config.downloadAttempts, baseMs: config.downloadRetryBaseMs },
    httpClient: config.downloadHttp,
  };
}

export function downloadPlane(config: Config): Plane<NodeContext> {
  let manager: DownloadManager | undefined;
  return {
    name: "downloads",
    async start(ctx: NodeContext) {
      const db = ctx.store.db;
      ctx.log.onApplied(failureRecorder(db));
      manager = new DownloadManager({
        nodeId: ctx.nodeId,
        modelsDir: modelsDir(config),
        hub: new HubClient(hubOptions(config)),
        ...managerSettings(config),
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
