/**
 * The node's download manager: `ensure(card, shard)` brings a model's files onto disk (hub listing, offline
 * check, disk check, parallel resumable fetches with retries) and reports progress; `cancel` and `remove` undo it.
 */
import type { HttpClient } from "./http1.ts";
import { dirname, join } from "node:path";
import type { DownloadProgress } from "../cluster/downloads.ts";
import type { ShardMetadata } from "../cluster/instances.ts";
import { logger } from "../log/mod.ts";
import { cardToWire, type ModelCard, parseCard } from "../models/card.ts";
import { FileSelectionError, filesForCard, type HubClient, HubError } from "../models/hub.ts";
import { diskShortfall, type FreeSpaceProbe, statfsFree } from "./disk.ts";
import { Syncs } from "./durable.ts";
import { DownloadCancelled, DownloadError } from "./errors.ts";
import { fetchFile, isNoSpace, partialPath, sha256File } from "./fetch.ts";
import {
  containedFile,
  containedModelDir,
  fileOnDisk,
  fileStatus,
  type Manifest,
  type ManifestFile,
  readManifest,
  scanModels,
  updateManifest,
  writeManifest,
} from "./local.ts";
import * as progress from "./progress.ts";
import { DEFAULT_RETRY, type RetryPolicy, withRetries } from "./retry.ts";
import { repoPathProblem, UntrustedInputError } from "../security/ids.ts";

const log = logger("downloads");

export interface DownloadManagerOptions {
  nodeId: string;
  modelsDir: string;
  hub: HubClient;
  /** Where progress records go (the daemon submits them as `NodeDownloadProgress` events). */
  emit: (p: DownloadProgress) => Promise<void>;
  /** The record this node last published for a model (from `/state`), so a restart re-advertises only what changed. */
  currentRecord?: (modelId: string) => DownloadProgress | undefined;
  /** Called after a disk check passes, so an open "not enough disk space" record can be cleared as fixed. */
  onDiskCheckPassed?: (modelId: string) => Promise<void>;
  offline?: boolean;
  maxParallelFiles?: number;
  retry?: RetryPolicy;
  freeSpace?: FreeSpaceProbe;
  throttle?: progress.ThrottleRule;
  readTimeoutMs?: number;
  /** downloads.http_client (default `auto`). */
  httpClient?: HttpClient;
  now?: () => number;
  /** Puts a finished file on disk for good (fdatasync + directory fsync); tests pass one that never returns. */
  syncToDisk?: (path: string) => Promise<void>;
}

interface Job {
  modelId: string;
  abort: AbortController;
  done: Promise<string>;
  /** Settles once the job published its first record (callers that poll `/state` then see this attempt). */
  started: PromiseWithResolvers<void>;
}

/** A shard covering the whole model on one node, for downloads that no placement asked for (pull, store routes). */
export function fullShard(card: ModelCard): ShardMetadata {
  return {
    PipelineShardMetadata: {
      modelCard: cardToWire(card),
      deviceRank: 0,
      worldSize: 1,
      resolvedBackend: null,
      immediateException: false,
      shouldTimeout: null,
      startLayer: 0,
      endLayer: card.n_layers,
      nLayers: card.n_layers,
    },
  };
}

/** The GGUF a card loads, inside the directory `ensure` returned (or the registered local file). */
export function ggufPath(dir: string, card: Pick<ModelCard, "gguf_file" | "gguf_path">): string | null {
  if (card.gguf_path) return card.gguf_path;
  return card.gguf_file ? join(dir, card.gguf_file) : null;
}

export class DownloadManager {
  readonly #jobs = new Map<string, Job>();
  readonly #o:
    & Required<Omit<DownloadManagerOptions, "currentRecord" | "onDiskCheckPassed" | "syncToDisk">>
    & DownloadManagerOptions;
  #emits: Promise<unknown> = Promise.resolve();
  readonly #syncs: Syncs;
  /** Set by stop(): downloads cancelled from now on were interrupted, not abandoned, and resume at next start. */
  #stopping = false;
  /** Background work that marks files synced in their manifests; a stop waits for it. */
  readonly #persisting = new Set<Promise<void>>();

  constructor(options: DownloadManagerOptions) {
    this.#o = {
      offline: false,
      maxParallelFiles: 8,
      retry: DEFAULT_RETRY,
      freeSpace: statfsFree,
      throttle: progress.DEFAULT_THROTTLE,
      readTimeoutMs: 60_000,
      httpClient: "auto",
      now: Date.now,
      ...options,
    };
    this.#syncs = new Syncs(options.syncToDisk);
  }

  get modelsDir(): string {
    return this.#o.modelsDir;
  }

  get offline(): boolean {
    return this.#o.offline;
  }

  /** Model ids being downloaded now. */
  inFlight(): string[] {
    return [...this.#jobs.keys()];
  }

  /**
   * Brings the card's files onto disk and resolves with the model directory. Concurrent calls for one
   * model share one download. Rejects with DownloadError (after a `DownloadFailed`) or DownloadCancelled.
   */
  ensure(
    card: ModelCard,
    shard: ShardMetadata = fullShard(card),
    opts: { signal?: AbortSignal } = {},
  ): Promise<string> {
    const existing = this.#jobs.get(card.model_id);
    const job = existing ?? this.#start(card, shard);
    if (opts.signal) {
      const onAbort = () => void this.cancel(card.model_id, "cancelled by its caller");
      if (opts.signal.aborted) onAbort();
      else opts.signal.addEventListener("abort", onAbort, { once: true });
      job.done.finally(() => opts.signal!.removeEventListener("abort", onAbort)).catch(() => {});
    }
    return job.done;
  }

  /** Starts (or joins) a download and resolves once its first progress record is published. */
  async begin(card: ModelCard, shard: ShardMetadata = fullShard(card)): Promise<void> {
    const job = this.#jobs.get(card.model_id) ?? this.#start(card, shard);
    await job.started.promise;
  }

  #start(card: ModelCard, shard: ShardMetadata): Job {
    const abort = new AbortController();
    const job: Job = {
      modelId: card.model_id,
      abort,
      done: Promise.resolve(""),
      started: Promise.withResolvers(),
    };
    job.done = this.#run(card, shard, abort.signal, () => job.started.resolve()).finally(() => {
      job.started.resolve();
      if (this.#jobs.get(card.model_id) === job) this.#jobs.delete(card.model_id);
    });
    job.done.catch(() => {}); // callers see the rejection; an unobserved one must not crash the daemon
    this.#jobs.set(card.model_id, job);
    return job;
  }

  /** Stops an in-flight download (its partial files stay for a later resume; their locks are released). */
  async cancel(modelId: string, why = "cancelled"): Promise<boolean> {
    const job = this.#jobs.get(modelId);
    if (!job) return false;
    job.abort.abort(new DownloadCancelled(modelId, why));
    await job.done.catch(() => {});
    return true;
  }

  /**
   * Cancels and deletes the model's files; resolves false when nothing of skulk's was there. Only a folder holding
   * this model's manifest is deleted: a models dir may be shared (`--models-dir`), and a folder skulk did not
   * write (someone's `Documents`, a file an id happens to name) is not skulk's to remove.
   */
  async remove(modelId: string, shard?: ShardMetadata): Promise<boolean> {
    const dir = await containedModelDir(this.#o.modelsDir, modelId);
    await this.cancel(modelId, "cancelled: its files are being deleted");
    const manifest = await readManifest(dir);
    let existed = manifest?.modelId === modelId;
    if (existed) {
      try {
        await Deno.remove(dir, { recursive: true });
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
        existed = false;
      }
    } else if (manifest === null) {
      const there = await Deno.lstat(dir).then(() => true, () => false);
      if (there) log.warn("not deleting {dir}: it holds no skulk manifest", { dir });
    }
    const sm = shard ?? manifest?.shardMetadata;
    if (sm) {
      await this.#emitNow(
        progress.pending({ nodeId: this.#o.nodeId, shardMetadata: sm, modelDirectory: dir }, 0, 0),
      );
    }
    return existed;
  }

  /** Cancels every download and waits for them to stop, and for finished files to reach the disk (shutdown). */
  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all([...this.#jobs.keys()].map((id) => this.cancel(id, "cancelled: the node is stopping")));
    await this.flushed();
    await this.#emits.catch(() => {});
  }

  /** Resolves once every finished file is synced and marked so in its manifest. */
  async flushed(): Promise<void> {
    await this.#syncs.drain();
    await Promise.all(this.#persisting);
  }

  /** Syncs a finished file in the background, then marks it synced in the manifest on disk. */
  #persist(dir: string, path: string, mtimeMs: number): void {
    const p = this.#syncs.start(join(dir, path), mtimeMs).then(async (ok) => {
      if (!ok) {
        log.warn("could not sync {file} to disk; it will be hashed again before use", {
          file: join(dir, path),
        });
        return;
      }
      await updateManifest(dir, (m) => {
        const v = m.verified[path];
        if (!v || v.mtimeMs !== mtimeMs || v.synced) return null;
        v.synced = true;
        return m;
      });
    }).catch((e) => log.warn("marking {file} synced failed: {error}", { file: path, error: String(e) }));
    this.#persisting.add(p);
    p.finally(() => this.#persisting.delete(p));
  }

  /** Marks synced what this process has synced since the manifest was read (so no write of it says otherwise). */
  #withSyncs(dir: string, m: Manifest): Manifest {
    for (const [path, v] of Object.entries(m.verified)) {
      if (!v.synced && this.#syncs.isSynced(join(dir, path), v.mtimeMs)) v.synced = true;
    }
    return m;
  }

  #save(dir: string, m: Manifest): Promise<void> {
    return writeManifest(dir, this.#withSyncs(dir, m));
  }

  /**
   * After a restart: publishes what is on disk for every model with a manifest (Completed, or Pending with
   * the bytes already there), where the last published record says otherwise.
   */
  async readvertise(): Promise<number> {
    let n = 0;
    for (const { dir, manifest } of await scanModels(this.#o.modelsDir)) {
      if (this.#jobs.has(manifest.modelId)) continue;
      const ref = { nodeId: this.#o.nodeId, shardMetadata: manifest.shardMetadata, modelDirectory: dir };
      let tallies: progress.FileTally[];
      try {
        tallies = await this.#tally(dir, manifest);
      } catch (e) {
        // One folder that cannot be read safely (a link out of the models dir) must not stop the others.
        if (!(e instanceof UntrustedInputError)) throw e;
        log.warn("not advertising {dir}: {error}", { dir, error: e.message });
        continue;
      }
      const total = tallies.reduce((a, t) => a + t.total, 0);
      const onDisk = tallies.reduce((a, t) => a + t.downloaded, 0);
      const complete = manifest.completedAt !== null && tallies.every((t) => t.done);
      const record = complete ? progress.completed(ref, total) : progress.pending(ref, onDisk, total);
      if (!sameRecord(this.#o.currentRecord?.(manifest.modelId), record)) {
        await this.#emitNow(record);
        n++;
      }
    }
    return n;
  }

  /**
   * After a restart: starts again, in the background, every download the last run left under way (stopped or
   * killed mid-transfer) and every complete model with files never synced (checked again before use).
   * Resolves with the model ids it started.
   */
  async resumeInterrupted(): Promise<string[]> {
    const started: string[] = [];
    for (const { dir, manifest } of await scanModels(this.#o.modelsDir)) {
      if (this.#jobs.has(manifest.modelId)) continue;
      const unsynced = Object.values(manifest.verified).some((v) => !v.synced);
      if (!manifest.resume && !(manifest.completedAt !== null && unsynced)) continue;
      // Offline, an unfinished download can only fail again; it resumes at a start that may use the hub.
      if (this.#o.offline && manifest.completedAt === null) continue;
      const wire = Object.values(manifest.shardMetadata)[0] as { modelCard: unknown };
      let card: ModelCard;
      try {
        card = parseCard(wire.modelCard);
      } catch (e) {
        log.warn("cannot resume {dir}: its manifest's card is not valid ({error})", {
          dir,
          error: String(e),
        });
        continue;
      }
      this.ensure(card, manifest.shardMetadata).catch(() => {}); // the outcome is published as progress
      started.push(manifest.modelId);
    }
    return started;
  }

  async #tally(dir: string, manifest: Manifest): Promise<progress.FileTally[]> {
    this.#withSyncs(dir, manifest);
    return await Promise.all(manifest.files.map(async (f) => {
      const disk = await fileOnDisk(await containedFile(this.#o.modelsDir, dir, f.path));
      const st = fileStatus(f, disk, manifest.verified[f.path]);
      return {
        path: f.path,
        total: f.size,
        downloaded: st.bytes,
        atStart: st.bytes,
        done: st.state === "verified",
      };
    }));
  }

  #emitNow(p: DownloadProgress): Promise<void> {
    const next = this.#emits.then(() => this.#o.emit(p));
    this.#emits = next.catch((e) =>
      log.warn("publishing download progress failed: {error}", { error: (e as Error).message })
    );
    return next.then(() => {}, () => {});
  }

  async #listFiles(card: ModelCard, cached: Manifest | null, signal: AbortSignal): Promise<ManifestFile[]> {
    if (this.#o.offline) {
      if (cached) return cached.files;
      throw new DownloadError(
        `offline mode (HF_HUB_OFFLINE / SKULK_OFFLINE): no files of ${card.model_id} are on disk in ${this.#o.modelsDir} and the hub may not be asked`,
        "offline",
      );
    }
    try {
      const listing = await withRetries(this.#o.retry, () => this.#o.hub.listFiles(card.model_id, signal), {
        signal,
      });
      const chosen = filesForCard(card, listing);
      for (const f of chosen) {
        const problem = repoPathProblem(f.path);
        // A hub (or whatever answers at HF_ENDPOINT) names where files land: a listing that would lead out of the
        // model's folder is refused whole, never trimmed, so the user learns the source is not to be trusted.
        if (problem) {
          throw new DownloadError(
            `the hub's listing of ${card.model_id} names a file ${JSON.stringify(f.path)} that ${problem}`,
            "fatal",
          );
        }
      }
      return chosen.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 }));
    } catch (e) {
      if (signal.aborted) throw e;
      if (e instanceof FileSelectionError) throw new DownloadError(e.message, "fatal");
      if (e instanceof HubError && e.retryable && cached) {
        log.warn("listing {model} failed ({error}); using the file list from the last download", {
          model: card.model_id,
          error: e.message,
        });
        return cached.files;
      }
      if (e instanceof HubError) throw new DownloadError(e.message, e.retryable ? "retry" : "fatal");
      throw e;
    }
  }

  async #run(
    card: ModelCard,
    shard: ShardMetadata,
    signal: AbortSignal,
    onStarted: () => void,
  ): Promise<string> {
    const dir = await containedModelDir(this.#o.modelsDir, card.model_id);
    const ref: progress.ModelRef = { nodeId: this.#o.nodeId, shardMetadata: shard, modelDirectory: dir };
    if (card.gguf_path) {
      const size = (await Deno.stat(card.gguf_path)).size;
      await this.#emitNow(
        progress.completed({ ...ref, modelDirectory: dirname(card.gguf_path) }, size, true),
      );
      return dirname(card.gguf_path);
    }
    let tallies: progress.FileTally[] = [];
    let files: ManifestFile[] = [];
    try {
      const cached = await readManifest(dir);
      if (cached) {
        // What is on disk is published before the hub is asked, so progress never falls back to zero.
        const t = progress.sumTally(await this.#tally(dir, cached));
        await this.#emitNow(progress.pending(ref, t.downloaded, t.total));
      } else await this.#emitNow(progress.pending(ref, 0, card.storage_size?.in_bytes ?? 0));
      onStarted();
      files = await this.#listFiles(card, cached, signal);
      const manifest: Manifest = {
        modelId: card.model_id,
        shardMetadata: shard,
        files,
        verified: cached?.verified ?? {},
        completedAt: null,
        resume: true,
      };
      await this.#save(dir, manifest);
      tallies = await this.#tally(dir, manifest);
      const total = files.reduce((a, f) => a + f.size, 0);
      await this.#emitNow(progress.pending(ref, progress.sumTally(tallies).downloaded, total));
      await this.#verifyUnchecked(dir, manifest, tallies, signal);

      const missing = tallies.filter((t) => !t.done);
      if (missing.length > 0 && this.#o.offline) {
        const names = missing.map((t) => `${t.path} (${t.downloaded} of ${t.total} bytes on disk)`).join(
          ", ",
        );
        throw new DownloadError(
          `offline mode (HF_HUB_OFFLINE / SKULK_OFFLINE): ${card.model_id} is missing ${names}`,
          "offline",
        );
      }
      if (missing.length > 0) {
        const needed = missing.reduce((a, t) => a + (t.total - t.downloaded), 0);
        const short = diskShortfall(needed, await this.#o.freeSpace(this.#o.modelsDir), this.#o.modelsDir);
        if (short) throw new DownloadError(short, "disk");
        await this.#o.onDiskCheckPassed?.(card.model_id);
        await this.#fetchAll(card, dir, manifest, tallies, ref, signal);
      }
      manifest.completedAt = new Date(this.#o.now()).toISOString();
      manifest.resume = false;
      await this.#save(dir, manifest);
      await this.#emitNow(progress.completed(ref, total));
      return dir;
    } catch (e) {
      const raw = signal.aborted ? signal.reason : e;
      // A full disk can also surface outside a file's fetch (the manifest, a rename): it is still "disk".
      const reason = !(raw instanceof DownloadError) && !(raw instanceof DownloadCancelled) && isNoSpace(raw)
        ? new DownloadError(`disk full while writing ${card.model_id}: ${(raw as Error).message}`, "disk")
        : raw;
      if (!(reason instanceof DownloadCancelled && this.#stopping)) {
        // Cancelled on purpose, or failed: nothing to pick up at the next start (a failure is retried when asked).
        await updateManifest(dir, (m) => m.resume ? { ...m, resume: false } : null).catch(() => {});
      }
      if (reason instanceof DownloadCancelled) {
        const s = progress.sumTally(tallies);
        await this.#emitNow(progress.pending(ref, s.downloaded, s.total));
        throw reason;
      }
      if (reason instanceof DownloadError && reason.kind === "disk") {
        // A full disk leaves nothing half-written behind.
        await Promise.all(
          files.map(async (f) =>
            Deno.remove(partialPath(await containedFile(this.#o.modelsDir, dir, f.path))).catch(() => {})
          ),
        );
      }
      const message = reason instanceof Error ? reason.message : String(reason);
      log.warn("download of {model} failed: {error}", { model: card.model_id, error: message });
      await this.#emitNow(progress.failed(ref, message));
      throw reason instanceof DownloadError ? reason : new DownloadError(message, "fatal");
    }
  }

  /**
   * Complete files not verified at this size and mtime, or verified but never synced (a crash may have left
   * the right size with the wrong bytes), are hashed now and synced; a mismatch is removed.
   */
  async #verifyUnchecked(
    dir: string,
    manifest: Manifest,
    tallies: progress.FileTally[],
    signal: AbortSignal,
  ): Promise<void> {
    // Syncs this process started are waited for, not replaced by a re-hash.
    await Promise.all(manifest.files.map((f) => this.#syncs.settle(join(dir, f.path))));
    this.#withSyncs(dir, manifest);
    for (const [i, f] of manifest.files.entries()) {
      const full = await containedFile(this.#o.modelsDir, dir, f.path);
      const disk = await fileOnDisk(full);
      const before = manifest.verified[f.path];
      const state = fileStatus(f, disk, before).state;
      if (state === "verified") tallies[i].done = true; // the tally may predate a sync that has finished since
      if (state !== "unverified") continue;
      const want = f.sha256 ?? before?.sha256 ?? null;
      const got = await sha256File(full, signal);
      if (want === null || got === want) {
        const mtimeMs = disk.mtimeMs ?? 0;
        // What was just read may have come from the page cache: it is durable only once synced.
        const synced = await this.#syncs.start(full, mtimeMs);
        manifest.verified[f.path] = { size: f.size, mtimeMs, sha256: got, synced };
        tallies[i].done = true;
      } else {
        log.warn("{file} of {model} is corrupted (sha256 {got}, expected {want}); fetching it again", {
          file: f.path,
          model: manifest.modelId,
          got,
          want: f.sha256,
        });
        await Deno.remove(full);
        delete manifest.verified[f.path];
        tallies[i].downloaded = tallies[i].atStart = 0;
      }
    }
    await this.#save(dir, manifest);
  }

  async #fetchAll(
    card: ModelCard,
    dir: string,
    manifest: Manifest,
    tallies: progress.FileTally[],
    ref: progress.ModelRef,
    outer: AbortSignal,
  ): Promise<void> {
    const startedAt = this.#o.now();
    let last: { fraction: number; at: number } | null = null;
    const total = tallies.reduce((a, t) => a + t.total, 0);
    const tick = (force = false) => {
      const now = {
        fraction: total > 0 ? progress.sumTally(tallies).downloaded / total : 1,
        at: this.#o.now(),
      };
      if (!force && !progress.shouldEmit(this.#o.throttle, last, now)) return;
      last = now;
      void this.#emitNow(progress.ongoing(ref, tallies, now.at - startedAt));
    };
    tick(true);
    // One file failing for good stops its siblings, so the failure is reported once and promptly.
    const group = new AbortController();
    const signal = AbortSignal.any([outer, group.signal]);
    const queue = manifest.files.map((f, i) => ({ f, i })).filter(({ i }) => !tallies[i].done);
    const worker = async () => {
      for (let item = queue.shift(); item; item = queue.shift()) {
        const { f, i } = item;
        const dest = await containedFile(this.#o.modelsDir, dir, f.path);
        const fetched = await withRetries(this.#o.retry, () =>
          fetchFile({
            url: this.#o.hub.fileUrl(card.model_id, f.path),
            dest,
            size: f.size,
            sha256: f.sha256,
            headers: this.#o.hub.headers(),
            signal,
            readTimeoutMs: this.#o.readTimeoutMs,
            httpClient: this.#o.httpClient,
            onBytes: (n) => {
              tallies[i].downloaded = n;
              tick();
            },
          }), {
          signal,
          onRetry: (e, n, wait) =>
            log.info("{file} of {model}: attempt {n} failed ({error}); retrying in {wait} ms", {
              file: f.path,
              model: card.model_id,
              n,
              error: (e as Error).message,
              wait,
            }),
        }).catch((e) => {
          if (!signal.aborted && e instanceof DownloadError && e.kind === "retry") {
            throw new DownloadError(
              `${f.path}: ${e.message} (gave up after ${this.#o.retry.attempts} attempts)`,
              "retry",
            );
          }
          throw e instanceof DownloadError ? new DownloadError(`${f.path}: ${e.message}`, e.kind) : e;
        });
        const st = await Deno.stat(dest);
        const mtimeMs = st.mtime?.getTime() ?? 0;
        manifest.verified[f.path] = { size: st.size, mtimeMs, sha256: fetched.sha256, synced: false };
        tallies[i].done = true;
        tallies[i].downloaded = f.size;
        await this.#save(dir, manifest);
        // Off the critical path: the file is usable now (the page cache has it) and on disk for good shortly.
        this.#persist(dir, f.path, mtimeMs);
        tick(true);
      }
    };
    const results = await Promise.allSettled(
      Array.from({ length: Math.min(this.#o.maxParallelFiles, queue.length) }, () =>
        worker().catch((e) => {
          group.abort(e);
          throw e;
        })),
    );
    const firstFailure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (outer.aborted) throw outer.reason;
    if (firstFailure) throw group.signal.reason ?? firstFailure.reason;
  }
}

function sameRecord(a: DownloadProgress | undefined, b: DownloadProgress): boolean {
  if (!a) return false;
  const [ka] = Object.keys(a);
  const [kb] = Object.keys(b);
  if (ka !== kb) return false;
  const total = (p: DownloadProgress) =>
    JSON.stringify((Object.values(p)[0] as { total?: unknown; downloaded?: unknown }).total);
  const done = (p: DownloadProgress) =>
    JSON.stringify((Object.values(p)[0] as { downloaded?: unknown }).downloaded);
  return total(a) === total(b) && done(a) === done(b);
}
