/**
 * The log and diagnostics settings as config resolution reads them: a bad log store URL is a clear
 * configuration error (never a crash), the token is a secret, the outputs follow the settings.
 */
import { describe, expect, it } from "vitest";
import { ConfigError, resolveConfig } from "../../src/config/load.ts";
import { logOutputsOf } from "../../src/log/outputs.ts";

const base = { flags: {}, yaml: null };

function problems(env: Record<string, string>): string[] {
  try {
    resolveConfig({ ...base, env: { HOME: "/home/u", ...env } });
    return [];
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
}

describe("log settings", () => {
  it("refuses a log store URL that is not http(s), has credentials, or is no URL, naming the setting", () => {
    for (const url of ["not a url", "ftp://store:21", "http://user:pw@store:9428", "://"]) {
      const p = problems({ SKULK_LOGGING_INGEST_URL: url });
      expect(p.length, url).toBe(1);
      expect(p[0]).toContain("logging.ingest_url");
      expect(p[0]).toContain("must be an http(s) URL without credentials");
    }
    expect(problems({ SKULK_LOGGING_INGEST_URL: "http://127.0.0.1:9428" })).toEqual([]);
  });

  it("builds the outputs from the settings: the file in the data dir, shipping only with a URL", () => {
    const { config } = resolveConfig({
      ...base,
      env: {
        HOME: "/home/u",
        SKULK_DATA_DIR: "/srv/skulk",
        SKULK_LOG_FILE_MAX_BYTES: "2MiB",
        SKULK_LOG_FILE_COUNT: "3",
        SKULK_LOGGING_INGEST_URL: "http://loki:3100",
        SKULK_LOGGING_INGEST_FORMAT: "loki",
        SKULK_LOGGING_INGEST_TOKEN: "tok-123",
      },
    });
    expect(logOutputsOf(config)).toEqual({
      file: { path: "/srv/skulk/logs/skulk.log", maxBytes: 2 * 1024 * 1024, files: 3 },
      ingest: {
        url: "http://loki:3100",
        format: "loki",
        token: "tok-123",
        bufferLines: 10_000,
        batchLines: 500,
        intervalMs: 1000,
      },
    });
    const off = resolveConfig({ ...base, env: { HOME: "/home/u", SKULK_LOG_FILE: "0" } }).config;
    expect(logOutputsOf(off)).toEqual({ file: null, ingest: null });
    expect(problems({ SKULK_LOG_FILE_COUNT: "1" })[0]).toContain("logging.file_count");
    expect(problems({ SKULK_FLIGHT_RECORDER_SIZE: "0" })[0]).toContain("diagnostics.flight_recorder_size");
  });
});
