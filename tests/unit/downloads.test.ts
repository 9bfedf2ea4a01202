/** Pure parts of downloads: file selection per card, hub settings, backoff, throttle, disk verdict, failure actions. */
import { describe, expect, it } from "vitest";
import { failureAction, nodesWithFailedDownload } from "../../src/downloads/failures.ts";
import { backoffMs, isRetryable } from "../../src/downloads/retry.ts";
import { diskShortfall, isDiskFailure } from "../../src/downloads/disk.ts";
import { fileStatus } from "../../src/downloads/local.ts";
import * as progress from "../../src/downloads/progress.ts";
import { DownloadError } from "../../src/downloads/errors.ts";
import { fullShard } from "../../src/downloads/manager.ts";
import { progressLine } from "../../src/cli/pull.ts";
import { Catalog } from "../../src/models/catalog.ts";
import {
  FileSelectionError,
  filesForCard,
  HubError,
  type HubFile,
  hubOptions,
  hubStatusError,
  nextPage,
  parseTree,
  resolveUrl,
} from "../../src/models/hub.ts";
import { resolveConfig } from "../../src/config/load.ts";

const catalog = Catalog.bundled();
const card = (id: string) => {
  const c = catalog.get(id);
  if (!c) throw new Error(`no bundled card ${id}`);
  return c;
};
const f = (path: string, size = 10): HubFile => ({ path, size, sha256: null });

describe("filesForCard", () => {
  it("takes only the pinned quant and config.json of a GGUF repo", () => {
    const listing = [
      f("Llama-3.2-1B-Instruct-Q4_K_M.gguf"),
      f("Llama-3.2-1B-Instruct-Q8_0.gguf"),
      f("config.json"),
      f("README.md"),
    ];
    expect(filesForCard(card("unsloth/Llama-3.2-1B-Instruct-GGUF"), listing).map((x) => x.path))
      .toEqual(["Llama-3.2-1B-Instruct-Q4_K_M.gguf", "config.json"]);
  });

  it("takes the whole shard group of a split GGUF and nothing of other quants", () => {
    const listing = [
      f("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf"),
      f("qwen2.5-7b-instruct-q4_k_m-00002-of-00002.gguf"),
      f("qwen2.5-7b-instruct-q8_0-00001-of-00003.gguf"),
    ];
    expect(filesForCard(card("Qwen/Qwen2.5-7B-Instruct-GGUF"), listing).map((x) => x.path)).toEqual([
      "qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf",
      "qwen2.5-7b-instruct-q4_k_m-00002-of-00002.gguf",
    ]);
  });

  it("names the missing shard when a group is incomplete", () => {
    const listing = [f("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf")];
    expect(() => filesForCard(card("Qwen/Qwen2.5-7B-Instruct-GGUF"), listing)).toThrow(
      /00002-of-00002.*shard 2 of 2/,
    );
    expect(() => filesForCard(card("Qwen/Qwen2.5-7B-Instruct-GGUF"), listing)).toThrow(FileSelectionError);
  });

  it("adds the projector (smallest precision first) for a vision GGUF card, not for a text-only one", () => {
    const listing = [
      f("Qwen2-VL-2B-Instruct-Q4_K_M.gguf"),
      f("mmproj-Qwen2-VL-2B-Instruct-f32.gguf"),
      f("mmproj-Qwen2-VL-2B-Instruct-f16.gguf"),
    ];
    expect(filesForCard(card("bartowski/Qwen2-VL-2B-Instruct-GGUF"), listing).map((x) => x.path))
      .toEqual(["Qwen2-VL-2B-Instruct-Q4_K_M.gguf", "mmproj-Qwen2-VL-2B-Instruct-f16.gguf"]);
    const text = [f("Llama-3.2-1B-Instruct-Q4_K_M.gguf"), f("mmproj-x-f16.gguf")];
    expect(filesForCard(card("unsloth/Llama-3.2-1B-Instruct-GGUF"), text).map((x) => x.path)).toEqual([
      "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
    ]);
  });

  it("takes an MLX repo whole, except original/ and metal/", () => {
    const mlx = catalog.all().find((c) => c.gguf_file === undefined && c.tasks.includes("TextGeneration"))!;
    const listing = [
      f("model.safetensors"),
      f("config.json"),
      f("original/consolidated.pth"),
      f("metal/model.bin"),
      f("tokenizer.json"),
    ];
    expect(filesForCard(mlx, listing).map((x) => x.path)).toEqual([
      "model.safetensors",
      "config.json",
      "tokenizer.json",
    ]);
  });

  it("skips root-level safetensors of image cards", () => {
    const image = catalog.all().find((c) => c.tasks.includes("TextToImage"))!;
    const listing = [f("flux.safetensors"), f("transformer/a.safetensors"), f("model_index.json")];
    expect(filesForCard(image, listing).map((x) => x.path)).toEqual([
      "transformer/a.safetensors",
      "model_index.json",
    ]);
  });
});

describe("hub", () => {
  it("reads HF_ENDPOINT and HF_TOKEN, falling back to the token file", () => {
    const settings = (env: Record<string, string>) => resolveConfig({ flags: {}, env }).config;
    expect(hubOptions(settings({ HF_ENDPOINT: "http://mirror:8080/", HF_TOKEN: "hf_x" }), () => null))
      .toEqual({ endpoint: "http://mirror:8080", token: "hf_x", revision: "main" });
    expect(hubOptions(settings({ HUGGING_FACE_HUB_TOKEN: "hf_old" }), () => null).token).toBe("hf_old");
    expect(
      hubOptions(settings({ HOME: "/h" }), (p) => (p === "/h/.cache/huggingface/token" ? "hf_file" : null)),
    )
      .toEqual({ endpoint: "https://huggingface.co", token: "hf_file", revision: "main" });
  });

  it("builds resolve URLs with each path segment encoded", () => {
    expect(resolveUrl({ endpoint: "http://h", revision: "main" }, "org/repo", "dir/a b.gguf")).toBe(
      "http://h/org/repo/resolve/main/dir/a%20b.gguf",
    );
  });

  it("parses tree listings: LFS sha256 and size win, directories are dropped", () => {
    const sha = "a".repeat(64);
    expect(parseTree([
      { type: "directory", path: "d", size: 0 },
      { type: "file", path: "d/x.gguf", size: 134, lfs: { oid: sha, size: 5000 } },
      { type: "file", path: "config.json", size: 12, oid: "b".repeat(40) },
    ])).toEqual([{ path: "d/x.gguf", size: 5000, sha256: sha }, {
      path: "config.json",
      size: 12,
      sha256: null,
    }]);
    expect(nextPage('<https://h/api/models/x/tree/main?cursor=abc>; rel="next"')).toBe(
      "https://h/api/models/x/tree/main?cursor=abc",
    );
    expect(nextPage(null)).toBeNull();
  });

  it.each([
    [401, false, /set HF_TOKEN/],
    [403, true, /accept the model's license/],
    [404, false, /not found/],
    [503, false, /failed with 503/],
  ])("status %i (token %s) gives an actionable message", (status, hasToken, re) => {
    const e = hubStatusError(status, "org/r", "listing files", hasToken);
    expect(e.message).toMatch(re);
    expect(e.retryable).toBe(status >= 500);
  });
});

describe("retry and disk", () => {
  it("backs off exponentially up to the cap", () => {
    const p = { attempts: 5, baseMs: 500, capMs: 3000 };
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(p, n))).toEqual([500, 1000, 2000, 3000, 3000]);
  });

  it.each([
    [new DownloadError("x", "retry"), true],
    [new DownloadError("x", "fatal"), false],
    [new DownloadError("x", "disk"), false],
    [new HubError("x", 502, true), true],
    [new HubError("x", 401, false), false],
    [new Error("x"), false],
  ])("retries %o: %s", (e, want) => expect(isRetryable(e)).toBe(want));

  it("fails the disk check when needed bytes plus headroom exceed free space", () => {
    expect(diskShortfall(1000, 1_000_000, "/m")).toBeNull();
    const msg = diskShortfall(3_000_000, 2_000_000, "/m");
    expect(msg).toMatch(/^not enough disk space in \/m: the download needs 3\.0 MB more and 2\.0 MB is free/);
    expect(isDiskFailure(msg!)).toBe(true);
    expect(isDiskFailure("HTTP 404")).toBe(false);
  });

  it("reads offline mode from HF_HUB_OFFLINE or SKULK_OFFLINE", () => {
    const offlineFromEnv = (env: Record<string, string>) => resolveConfig({ flags: {}, env }).config.offline;
    expect(offlineFromEnv({ HF_HUB_OFFLINE: "1" })).toBe(true);
    expect(offlineFromEnv({ SKULK_OFFLINE: "true" })).toBe(true);
    expect(offlineFromEnv({ HF_HUB_OFFLINE: "0" })).toBe(false);
    expect(offlineFromEnv({ SKULK_OFFLINE: "0", HF_HUB_OFFLINE: "1" })).toBe(false);
    expect(offlineFromEnv({})).toBe(false);
  });
});

describe("file status on disk", () => {
  const entry = { path: "a.gguf", size: 100, sha256: "c".repeat(64) };
  const mark = (mtimeMs: number, synced: boolean, sha256: string | null = "c".repeat(64)) => ({
    size: 100,
    mtimeMs,
    sha256,
    synced,
  });
  it.each(
    [
      [{ complete: 100, mtimeMs: 5, partial: 0 }, mark(5, true), "verified", 100],
      [{ complete: 100, mtimeMs: 6, partial: 0 }, mark(5, true), "unverified", 100],
      // Renamed but never synced: a crash may have left the right size with the wrong bytes.
      [{ complete: 100, mtimeMs: 5, partial: 0 }, mark(5, false), "unverified", 100],
      [{ complete: 100, mtimeMs: 5, partial: 0 }, undefined, "unverified", 100],
      [{ complete: null, mtimeMs: null, partial: 40 }, undefined, "partial", 40],
      [{ complete: 90, mtimeMs: 1, partial: 0 }, undefined, "absent", 0],
      [{ complete: null, mtimeMs: null, partial: 101 }, undefined, "absent", 0],
    ] as const,
  )("%o with mark %o is %s", (disk, mark, state, bytes) => {
    expect(fileStatus(entry, disk, mark)).toEqual({ state, bytes });
  });

  // The hub gave no hash: our own, taken while streaming, is what a later check compares with.
  const hashless = { path: "config.json", size: 100, sha256: null };
  it.each(
    [
      [{ complete: 100, mtimeMs: 5, partial: 0 }, undefined, "verified"],
      [{ complete: 100, mtimeMs: 5, partial: 0 }, mark(5, true, "d".repeat(64)), "verified"],
      [{ complete: 100, mtimeMs: 5, partial: 0 }, mark(5, false, "d".repeat(64)), "unverified"],
      [{ complete: 100, mtimeMs: 7, partial: 0 }, mark(5, true, "d".repeat(64)), "unverified"],
    ] as const,
  )("a hashless file %o with mark %o is %s", (disk, mark, state) => {
    expect(fileStatus(hashless, disk, mark)).toEqual({ state, bytes: 100 });
  });

  it("trusts a complete file of the right size when the hub gives no hash", () => {
    expect(fileStatus({ ...entry, sha256: null }, { complete: 100, mtimeMs: 1, partial: 0 }, undefined).state)
      .toBe("verified");
  });
});

describe("progress records", () => {
  const ref = {
    nodeId: "n1",
    shardMetadata: fullShard(card("unsloth/Llama-3.2-1B-Instruct-GGUF")),
    modelDirectory: "/m",
  };
  const rule = progress.DEFAULT_THROTTLE;

  it.each([
    [null, { fraction: 0, at: 0 }, true],
    [{ fraction: 0.1, at: 0 }, { fraction: 0.12, at: 5000 }, false],
    [{ fraction: 0.1, at: 0 }, { fraction: 0.16, at: 500 }, false],
    [{ fraction: 0.1, at: 0 }, { fraction: 0.16, at: 1000 }, true],
    [{ fraction: 0.1, at: 0 }, { fraction: 0.11, at: 30_000 }, true],
    [{ fraction: 0.5, at: 0 }, { fraction: 0.2, at: 10 }, true],
  ])("after %o, %o emits: %s", (last, now, want) => expect(progress.shouldEmit(rule, last, now)).toBe(want));

  it("keeps a 1000-step download to a few dozen events", () => {
    let last: { fraction: number; at: number } | null = null;
    let n = 0;
    for (let i = 0; i <= 1000; i++) {
      const now = { fraction: i / 1000, at: i * 100 };
      if (progress.shouldEmit(rule, last, now)) {
        last = now;
        n++;
      }
    }
    expect(n).toBeGreaterThan(10);
    expect(n).toBeLessThanOrEqual(25);
  });

  it("computes bytes, speed and ETA from this session's bytes only", () => {
    const p = progress.ongoing(ref, [
      { path: "a", total: 1000, downloaded: 600, atStart: 400, done: false },
      { path: "b", total: 500, downloaded: 500, atStart: 500, done: true },
    ], 2000);
    const d = (p as Extract<typeof p, { DownloadOngoing: unknown }>).DownloadOngoing.downloadProgress;
    expect(d.downloaded.inBytes).toBe(1100);
    expect(d.total.inBytes).toBe(1500);
    expect(d.downloadedThisSession.inBytes).toBe(200);
    expect(d.speed).toBe(100);
    expect(d.etaMs).toBe(4000);
    expect(d.completedFiles).toBe(1);
    expect(d.files.a.downloaded.inBytes).toBe(600);
    expect(progress.summarize(p, "m")).toEqual({
      modelId: "m",
      status: "downloading",
      progress: 1100 / 1500,
      error: null,
    });
    expect(progressLine(p, 10)).toBe(
      "[#######---]  73%  1.1 KB / 1.5 KB  100 B/s  ETA 4s  1/2 files",
    );
  });

  it("opens a failure record on Failed, not twice for the same failure, and clears on Completed", () => {
    const failed = progress.failed(ref, "boom");
    expect(failureAction(failed, undefined)).toEqual({
      kind: "record",
      nodeId: "n1",
      modelId: "unsloth/Llama-3.2-1B-Instruct-GGUF",
      error: "boom",
    });
    expect(failureAction(failed, failed)).toEqual({ kind: "none" });
    expect(failureAction(progress.completed(ref, 5), failed).kind).toBe("clear");
    expect(failureAction(progress.pending(ref, 0, 5), failed).kind).toBe("none");
    expect(
      nodesWithFailedDownload({
        downloads: { n1: [failed], n2: [progress.completed({ ...ref, nodeId: "n2" }, 5)] },
      }, "unsloth/Llama-3.2-1B-Instruct-GGUF"),
    )
      .toEqual(["n1"]);
  });
});
