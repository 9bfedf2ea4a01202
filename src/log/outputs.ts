/**
 * Where a daemon's log lines go besides stderr, from its settings: the rotating file in the data dir and
 * the log store they are shipped to.
 */
import type { Config } from "../config/schema.ts";
import type { LogOutputs } from "./mod.ts";

export const logFilePath = (dataDir: string): string => `${dataDir}/logs/skulk.log`;

export function logOutputsOf(config: Config): LogOutputs {
  return {
    file: config.logFile
      ? { path: logFilePath(config.dataDir), maxBytes: config.logFileMaxBytes, files: config.logFileCount }
      : null,
    ingest: config.logIngestUrl
      ? {
        url: config.logIngestUrl,
        format: config.logIngestFormat,
        token: config.logIngestToken,
        bufferLines: config.logIngestBuffer,
        batchLines: config.logIngestBatch,
        intervalMs: config.logIngestIntervalMs,
      }
      : null,
  };
}
