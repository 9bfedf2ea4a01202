/**
 * The download manager against a real loopback HTTP server in the hub's layout, with real files, a real
 * SQLite store and event log: retries, resume, hash checks, offline mode, tokens, a full tmpfs, cancellation.
 */
import { createHash } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { DownloadProgress } from "../../src/cluster/downloads.ts";
import { makeEvent } from "../../src/cluster/events.ts";
import { EventLog } from "../../src/cluster/log.ts";
import { DownloadCancelled, DownloadError } from "../../src/downloads/errors.ts";
import { failureRecorder, nodesWithOpenFailure, openFailures } from "../../src/downloads/failures.ts";
import { DownloadManager, type DownloadManagerOptions } from "../../src/downloads/manager.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { HubClient } from "../../src/models/hub.ts";
import { openStore, type Store } from "../../src/store/db.ts";
import { downloadFailures } from "../../src/store/schema.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { tempDir } from "../helpers/daemon.ts";

const LLAMA = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const LLAMA_FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf";
const VL = "bartowski/Qwen2-VL-2B-Instruct-GGUF";
const catalog = Catalog.bundled();
const card = (id: string) => catalog.get(id)!;

function randomFile(path: string, size: number): void {
  const buf = new Uint8Array(size);
  for (let off = 0; off < size; off += 65536) {
    crypto.getRandomValues(buf.subarray(off, Math.min(size, off + 65536)));
  }
  Deno.writeFileSync(path, buf);
}

const sha = (path: string) => createHash("sha256").update(Deno.readFileSync(path)).digest("hex");
const exists = (p: string) => {
  try {
    Deno.statSync(p);
    return true;
  } catch {
    return false;
  }
};

let root: string;
let hub: FakeHub;
let llamaDir: string;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  root = tempDir("downloads-");
  llamaDir = `${root}/hub/llama`;
  const vlDir = `${root}/hub/vl`;
  Deno.mkdirSync(llamaDir, { recursive: true });
  Deno.mkdirSync(vlDir, { recursive: true });
  randomFile(`${llamaDir}/${LLAMA_FILE}`, 3_000_000);
  randomFile(`${llamaDir}/Llama-3.2-1B-Instruct-Q8_0.gguf`, 5_000);
  Deno.writeTextFileSync(`${llamaDir}/config.json`, '{"architectures":["LlamaForCausalLM"]}');
  randomFile(`${vlDir}/Qwen2-VL-2B-Instruct-Q4_K_M.gguf`, 400_000);
  randomFile(`${vlDir}/mmproj-Qwen2-VL-2B-Instruct-f16.gguf`, 100_000);
  randomFile(`${vlDir}/mmproj-Qwen2-VL-2B-Instruct-f32.gguf`, 200_000);
  hub = await startFakeHub({ repos: { [LLAMA]: llamaDir, [VL]: vlDir } });
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

afterAll(async () => {
  await hub?.close();
  Deno.removeSync(root, { recursive: true });
});

interface Rig {
  manager: DownloadManager;
  records: DownloadProgress[];
  store: Store;
  log: EventLog;
  modelsDir: string;
}

/** A manager wired like the daemon's plane: records go through a real event log into a real SQLite store. */
async function rig(
  opts: Partial<DownloadManagerOptions> & { endpoint?: string; token?: string | null } = {},
): Promise<Rig> {
  const dataDir = tempDir("downloads-node-");
  const store = await openStore(dataDir);
  const log = new EventLog(store.db, "n1/0");
  log.onApplied(failureRecorder(store.db));
  const records: DownloadProgress[] = [];
  const modelsDir = opts.modelsDir ?? `${dataDir}/models`;
  const manager = new DownloadManager({
    nodeId: "n1",
    modelsDir,
    hub: new HubClient({ endpoint: opts.endpoint ?? hub.url, token: opts.token ?? null, revision: "main" }),
    retry: { attempts: 4, baseMs: 20, capMs: 100 },
    readTimeoutMs: 5_000,
    ...opts,
    emit: async (p) => {
      records.push(p);
      await log.append(makeEvent("NodeDownloadProgress", { downloadProgress: p }));
    },
  });
  cleanups.push(async () => {
    await manager.stop();
    store.close();
    Deno.removeSync(dataDir, { recursive: true });
  });
  return { manager, records, store, log, modelsDir };
}

const kinds = (records: DownloadProgress[]) => records.map((r) => Object.keys(r)[0]);
const fileRequests = (file: string) => hub.requests.filter((r) => r.path.endsWith(`/resolve/main/${file}`));

describe("downloads from a loopback hub", () => {
  it("fetches only the pinned quant and config.json, verified, with throttled progress records", async () => {
    const r = await rig();
    hub.requests.length = 0;
    const dir = await r.manager.ensure(card(LLAMA));
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    expect(exists(`${dir}/config.json`)).toBe(true);
    expect(exists(`${dir}/Llama-3.2-1B-Instruct-Q8_0.gguf`)).toBe(false);
    expect(exists(`${dir}/${LLAMA_FILE}.partial`)).toBe(false);
    expect(hub.requests.filter((q) => q.path.includes("/resolve/")).map((q) => q.path).sort())
      .toEqual([`/${LLAMA}/resolve/main/${LLAMA_FILE}`, `/${LLAMA}/resolve/main/config.json`]);
    const k = kinds(r.records);
    expect(k[0]).toBe("DownloadPending");
    expect(k.at(-1)).toBe("DownloadCompleted");
    expect(k).toContain("DownloadOngoing");
    expect(r.records.length).toBeLessThan(30);
    expect(r.log.state.downloads.n1.map((p) => Object.keys(p)[0])).toEqual(["DownloadCompleted"]);

    // A second ensure finds everything verified on disk and asks the hub for no file.
    hub.requests.length = 0;
    expect(await r.manager.ensure(card(LLAMA))).toBe(dir);
    expect(hub.requests.filter((q) => q.path.includes("/resolve/"))).toEqual([]);
  });

  it("takes the projector of a vision card", async () => {
    const r = await rig();
    const dir = await r.manager.ensure(card(VL));
    expect([...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => !n.startsWith(".")).sort())
      .toEqual(["Qwen2-VL-2B-Instruct-Q4_K_M.gguf", "mmproj-Qwen2-VL-2B-Instruct-f16.gguf"]);
  });

  it.each(["our HTTP/1.1 client", "fetch (behind a proxy)"])(
    "retries 5xx answers and a truncated body, resuming the partial file with Range, through %s",
    async (client) => {
      const r = await rig({ httpClient: client.startsWith("fetch") ? "fetch" : "auto" });
      hub.requests.length = 0;
      hub.fault(`${LLAMA}/${LLAMA_FILE}`, { kind: "status", status: 503 }, {
        kind: "truncate",
        afterBytes: 1_200_000,
      }, { kind: "status", status: 502 });
      const dir = await r.manager.ensure(card(LLAMA));
      expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
      const reqs = fileRequests(LLAMA_FILE);
      expect(reqs.map((q) => q.status)).toEqual([503, 200, 502, 206]);
      const resumedAt = Number(reqs[3].range?.match(/^bytes=(\d+)-$/)?.[1]);
      expect(resumedAt).toBeGreaterThan(0);
      expect(resumedAt).toBeLessThanOrEqual(1_200_000);
    },
  );

  it("gives up on a stalled connection and resumes on a new one", async () => {
    const r = await rig({ readTimeoutMs: 300 });
    hub.requests.length = 0;
    hub.fault(`${LLAMA}/${LLAMA_FILE}`, { kind: "stall", afterBytes: 700_000 });
    const dir = await r.manager.ensure(card(LLAMA));
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    const reqs = fileRequests(LLAMA_FILE);
    expect(reqs.length).toBe(2);
    expect(reqs[1].range).toBe("bytes=700000-");
  });

  it("detects a corrupted body by sha256 and fetches the file again", async () => {
    const r = await rig();
    hub.requests.length = 0;
    hub.fault(`${LLAMA}/${LLAMA_FILE}`, { kind: "corrupt" });
    const dir = await r.manager.ensure(card(LLAMA));
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    const reqs = fileRequests(LLAMA_FILE);
    expect(reqs.length).toBe(2);
    expect(reqs[1].range).toBeNull(); // the bad partial was dropped, not resumed
  });

  it("detects a file corrupted on disk after it was verified and fetches it again", async () => {
    const r = await rig();
    const dir = await r.manager.ensure(card(LLAMA));
    const path = `${dir}/${LLAMA_FILE}`;
    const f = Deno.openSync(path, { write: true });
    f.seekSync(1_000_000, Deno.SeekMode.Start);
    f.writeSync(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]));
    f.close();
    expect(sha(path)).not.toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    hub.requests.length = 0;
    await r.manager.ensure(card(LLAMA));
    expect(sha(path)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    expect(fileRequests(LLAMA_FILE).length).toBe(1);
  });

  it("restarts from zero when the server ignores Range", async () => {
    const r = await rig();
    hub.fault(`${LLAMA}/${LLAMA_FILE}`, { kind: "truncate", afterBytes: 500_000 }, { kind: "ignoreRange" });
    const dir = await r.manager.ensure(card(LLAMA));
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
  });

  it("fails for good on 404 and 401 with actionable messages, and records the failure in SQLite", async () => {
    const gated = await startFakeHub({ repos: { [LLAMA]: llamaDir }, token: "hf_secret" });
    cleanups.push(() => gated.close());
    const r = await rig({ endpoint: gated.url });
    const err = await r.manager.ensure(card(LLAMA)).catch((e) => e);
    expect(err).toBeInstanceOf(DownloadError);
    expect(err.message).toMatch(/refused with 401; the repo is gated or private: set HF_TOKEN/);
    expect(gated.requests.length).toBe(1); // an auth refusal is not retried
    const open = await openFailures(r.store.db, { modelId: LLAMA });
    expect(open.map((o) => o.error)).toEqual([err.message]);
    expect(await nodesWithOpenFailure(r.store.db, LLAMA)).toEqual(["n1"]);

    // With the token the same node succeeds, and the record is cleared (kept, not deleted).
    const ok = await rig({ endpoint: gated.url, token: "hf_secret" });
    await ok.manager.ensure(card(LLAMA));
    expect(
      gated.requests.filter((q) => q.path.includes("/resolve/")).every((q) =>
        q.authorization === "Bearer hf_secret"
      ),
    ).toBe(true);
  });

  it("offline: uses what is on disk without asking the hub, and names what is missing", async () => {
    const online = await rig();
    const dir = await online.manager.ensure(card(LLAMA));
    const offline = await rig({ offline: true, modelsDir: online.modelsDir });
    hub.requests.length = 0;
    expect(await offline.manager.ensure(card(LLAMA))).toBe(dir);
    expect(hub.requests).toEqual([]);

    Deno.renameSync(`${dir}/${LLAMA_FILE}`, `${dir}/${LLAMA_FILE}.partial`);
    Deno.truncateSync(`${dir}/${LLAMA_FILE}.partial`, 1000);
    const err = await offline.manager.ensure(card(LLAMA)).catch((e) => e);
    expect(err.message).toMatch(
      new RegExp(
        `offline mode.*missing ${LLAMA_FILE.replaceAll(".", "\\.")} \\(1000 of 3000000 bytes on disk\\)`,
      ),
    );
    expect(Object.keys(offline.records.at(-1)!)[0]).toBe("DownloadFailed");
    const none = await offline.manager.ensure(card(VL)).catch((e) => e);
    expect(none.message).toMatch(
      /offline mode.*no files of bartowski\/Qwen2-VL-2B-Instruct-GGUF are on disk/,
    );
    expect(hub.requests).toEqual([]);
  });

  it("cancels an in-flight download: a Pending record with the bytes on disk, and a later ensure resumes", async () => {
    const r = await rig();
    hub.always(`${LLAMA}/${LLAMA_FILE}`, { kind: "slow", bytesPerSecond: 1_000_000 });
    cleanups.push(() => hub.always(`${LLAMA}/${LLAMA_FILE}`, null));
    const run = r.manager.ensure(card(LLAMA));
    const partial = `${r.modelsDir}/unsloth--Llama-3.2-1B-Instruct-GGUF/${LLAMA_FILE}.partial`;
    while (!exists(partial) || Deno.statSync(partial).size < 200_000) {
      await new Promise((res) => setTimeout(res, 50));
    }
    expect(r.manager.inFlight()).toEqual([LLAMA]);
    expect(await r.manager.cancel(LLAMA, "cancelled: placement torn down")).toBe(true);
    expect(await run.catch((e) => e)).toBeInstanceOf(DownloadCancelled);
    expect(r.manager.inFlight()).toEqual([]);
    const last = r.records.at(-1)!;
    expect(Object.keys(last)[0]).toBe("DownloadPending");
    const kept = Deno.statSync(partial).size;
    const configSize = Deno.statSync(`${llamaDir}/config.json`).size; // fetched in parallel, complete by now
    expect(
      (last as Extract<DownloadProgress, { DownloadPending: unknown }>).DownloadPending.downloaded.inBytes,
    ).toBe(kept + configSize);

    // The partial's lock went with the cancelled download: a new one takes it and resumes from it.
    hub.always(`${LLAMA}/${LLAMA_FILE}`, null);
    hub.requests.length = 0;
    const dir = await r.manager.ensure(card(LLAMA));
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    expect(fileRequests(LLAMA_FILE).map((q) => q.range)).toEqual([`bytes=${kept}-`]);
  });
});

/** A manifest as the manager wrote it (the test reads the file itself, as a restarted daemon would). */
function manifestOf(modelsDir: string, modelId: string) {
  const dir = `${modelsDir}/${modelId.replaceAll("/", "--")}`;
  return JSON.parse(Deno.readTextFileSync(`${dir}/.skulk/manifest.json`)) as {
    verified: Record<string, { size: number; mtimeMs: number; sha256: string | null; synced: boolean }>;
    completedAt: string | null;
    resume: boolean;
  };
}

/** A sync that never returns while the test runs, like one a crash cut short (failed at cleanup, so stop() ends). */
function crashedSync(): (path: string) => Promise<void> {
  const pending: (() => void)[] = [];
  // Registered at the first sync, so it runs before the manager's own cleanup (cleanups run in reverse).
  return () =>
    new Promise((_, reject) => {
      if (pending.length === 0) cleanups.push(() => pending.forEach((fail) => fail()));
      pending.push(() => reject(new Error("the process died")));
    });
}

/** Same size, other bytes, and the mtime put back: what a crash before writeback can leave under the name. */
function scrambleKeepingMtime(path: string): void {
  const before = Deno.statSync(path);
  const f = Deno.openSync(path, { write: true });
  f.seekSync(123_456 % before.size, Deno.SeekMode.Start);
  f.writeSync(new Uint8Array(64).fill(0));
  f.close();
  Deno.utimeSync(path, before.atime!, before.mtime!);
  expect(Deno.statSync(path).mtime!.getTime()).toBe(before.mtime!.getTime());
}

describe("durability off the critical path", () => {
  it("a finished file is usable before its sync returns, and marked synced after", async () => {
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    const synced: string[] = [];
    const r = await rig({
      syncToDisk: async (path) => {
        await gate;
        synced.push(path);
      },
    });
    const dir = await r.manager.ensure(card(LLAMA)); // resolves although no sync has returned
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    let m = manifestOf(r.modelsDir, LLAMA);
    expect(m.completedAt).not.toBeNull();
    expect(m.verified[LLAMA_FILE]).toMatchObject({ synced: false, sha256: sha(`${llamaDir}/${LLAMA_FILE}`) });
    release();
    await r.manager.flushed();
    expect(synced.sort()).toEqual([`${dir}/${LLAMA_FILE}`, `${dir}/config.json`]);
    m = manifestOf(r.modelsDir, LLAMA);
    expect(m.verified[LLAMA_FILE].synced).toBe(true);
    expect(m.verified["config.json"].synced).toBe(true);
  });

  it("a file whose sync never returned (a crash) is hashed again before use: same size and mtime, wrong bytes, fetched again", async () => {
    const crashed = await rig({ syncToDisk: crashedSync() });
    const dir = await crashed.manager.ensure(card(LLAMA));
    const path = `${dir}/${LLAMA_FILE}`;
    scrambleKeepingMtime(path);

    // The restarted daemon: a new manager on the same models dir.
    const restarted = await rig({ modelsDir: crashed.modelsDir });
    hub.requests.length = 0;
    await restarted.manager.ensure(card(LLAMA));
    expect(sha(path)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    expect(fileRequests(LLAMA_FILE).length).toBe(1);
    await restarted.manager.flushed();
    expect(manifestOf(restarted.modelsDir, LLAMA).verified[LLAMA_FILE].synced).toBe(true);

    // Once synced, the same scramble is not looked for (size and mtime are trusted): the flag is what re-checks.
    scrambleKeepingMtime(path);
    hub.requests.length = 0;
    await restarted.manager.ensure(card(LLAMA));
    expect(fileRequests(LLAMA_FILE).length).toBe(0);
  });

  it("with no hash from the hub, our own hash taken while streaming catches an unsynced file's wrong bytes", async () => {
    const bare = await startFakeHub({ repos: { [LLAMA]: llamaDir }, noHashes: true });
    cleanups.push(() => bare.close());
    const crashed = await rig({ endpoint: bare.url, syncToDisk: crashedSync() });
    const dir = await crashed.manager.ensure(card(LLAMA));
    const path = `${dir}/${LLAMA_FILE}`;
    expect(manifestOf(crashed.modelsDir, LLAMA).verified[LLAMA_FILE].sha256).toBe(sha(path));
    scrambleKeepingMtime(path);
    const restarted = await rig({ endpoint: bare.url, modelsDir: crashed.modelsDir });
    await restarted.manager.ensure(card(LLAMA));
    expect(sha(path)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    expect(bare.requests.filter((q) => q.path.endsWith(`/${LLAMA_FILE}`)).length).toBe(2);
  });
});

describe("resuming after a restart", () => {
  async function interrupted(how: "stop" | "cancel") {
    const first = await rig();
    hub.always(`${LLAMA}/${LLAMA_FILE}`, { kind: "slow", bytesPerSecond: 1_000_000 });
    cleanups.push(() => hub.always(`${LLAMA}/${LLAMA_FILE}`, null));
    const run = first.manager.ensure(card(LLAMA));
    const partial = `${first.modelsDir}/unsloth--Llama-3.2-1B-Instruct-GGUF/${LLAMA_FILE}.partial`;
    while (!exists(partial) || Deno.statSync(partial).size < 200_000) {
      await new Promise((res) => setTimeout(res, 50));
    }
    if (how === "stop") await first.manager.stop();
    else await first.manager.cancel(LLAMA, "cancelled by the user");
    expect(await run.catch((e) => e)).toBeInstanceOf(DownloadCancelled);
    hub.always(`${LLAMA}/${LLAMA_FILE}`, null);
    return { modelsDir: first.modelsDir, kept: Deno.statSync(partial).size };
  }

  it("a download the node stopped mid-transfer starts again by itself, from the partial's end", async () => {
    const { modelsDir, kept } = await interrupted("stop");
    expect(manifestOf(modelsDir, LLAMA).resume).toBe(true);
    const next = await rig({ modelsDir });
    hub.requests.length = 0;
    expect(await next.manager.resumeInterrupted()).toEqual([LLAMA]);
    const dir = await next.manager.ensure(card(LLAMA)); // joins the resumed download
    expect(sha(`${dir}/${LLAMA_FILE}`)).toBe(sha(`${llamaDir}/${LLAMA_FILE}`));
    expect(fileRequests(LLAMA_FILE).map((q) => q.range)).toEqual([`bytes=${kept}-`]);
    expect(kinds(next.records).at(-1)).toBe("DownloadCompleted");
    expect(manifestOf(modelsDir, LLAMA).resume).toBe(false);
    await next.manager.flushed(); // synced: nothing is left to look at again
    expect(await next.manager.resumeInterrupted()).toEqual([]);
  });

  it("a download cancelled on purpose stays stopped", async () => {
    const { modelsDir } = await interrupted("cancel");
    expect(manifestOf(modelsDir, LLAMA).resume).toBe(false);
    const next = await rig({ modelsDir });
    expect(await next.manager.resumeInterrupted()).toEqual([]);
    expect(next.manager.inFlight()).toEqual([]);
  });
});

/** Mounts a small tmpfs, or returns null where this sandbox may not mount. */
function mountTmpfs(dir: string, size: string): boolean {
  Deno.mkdirSync(dir, { recursive: true });
  const out = new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir],
    stderr: "piped",
  }).outputSync();
  return out.success;
}

function unmount(dir: string): void {
  new Deno.Command("umount", { args: [dir] }).outputSync();
}

/** A fresh 2 MiB tmpfs, unmounted after the test; null where mounting is not permitted. */
function smallDisk(): string | null {
  const mnt = `${root}/tmpfs-${crypto.randomUUID().slice(0, 8)}`;
  if (!mountTmpfs(mnt, "2m")) return null;
  cleanups.push(() => unmount(mnt));
  return mnt;
}

describe("a full disk (a real 2 MiB tmpfs)", () => {
  it("fails at once with a clean record and no partial, and the record clears after a later success", async (t) => {
    const mnt = smallDisk();
    if (!mnt) return t.skip("mount is not permitted here; the disk verdict is covered by the unit tests");
    const r = await rig({ modelsDir: `${mnt}/models` });
    hub.requests.length = 0;
    const err = await r.manager.ensure(card(LLAMA)).catch((e) => e);
    expect(err).toBeInstanceOf(DownloadError);
    expect(err.kind).toBe("disk");
    expect(err.message).toMatch(
      /^not enough disk space in .*tmpfs-.*: the download needs 3\.0 MB more and 2\.\d MB is free/,
    );
    expect(fileRequests(LLAMA_FILE)).toEqual([]); // failed before any byte was fetched
    const dir = `${mnt}/models/unsloth--Llama-3.2-1B-Instruct-GGUF`;
    expect(exists(`${dir}/${LLAMA_FILE}.partial`)).toBe(false);
    const rows = await openFailures(r.store.db, { nodeId: "n1", modelId: LLAMA });
    expect(rows.map((x) => x.error)).toEqual([err.message]);

    // The cause is fixed (a bigger filesystem): the next attempt succeeds and the record is cleared, not deleted.
    unmount(mnt);
    expect(mountTmpfs(mnt, "8m")).toBe(true);
    await r.manager.ensure(card(LLAMA));
    expect(await openFailures(r.store.db, { modelId: LLAMA })).toEqual([]);
    const all = await r.store.db.select().from(downloadFailures);
    expect(all.length).toBe(1);
    expect(all[0].clearedAt).not.toBeNull();
    expect(all[0].clearedReason).toMatch(/disk space is now sufficient|download completed/);
  });

  it("a disk that fills while writing (free space misreported) leaves no partial and a clear record", async (t) => {
    const mnt = smallDisk();
    if (!mnt) return t.skip("mount is not permitted here; the disk verdict is covered by the unit tests");
    // The probe lies (as on some network filesystems), so the write itself hits ENOSPC.
    const r = await rig({ modelsDir: `${mnt}/models`, freeSpace: () => Promise.resolve(1e12) });
    const err = await r.manager.ensure(card(LLAMA)).catch((e) => e);
    expect(err.kind).toBe("disk");
    expect(err.message).toMatch(/disk full while writing/);
    const dir = `${mnt}/models/unsloth--Llama-3.2-1B-Instruct-GGUF`;
    expect([...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => n.endsWith(".partial"))).toEqual([]);
    expect((await openFailures(r.store.db, { modelId: LLAMA })).length).toBe(1);
  });
});
