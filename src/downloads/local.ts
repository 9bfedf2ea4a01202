/**
 * What a node holds on disk for each model: `<modelsDir>/<org>--<name>/` with the files, and `.skulk/manifest.json`
 * (model id, shard, the hub's file list, which files were verified at which size, mtime and hash, and whether
 * that content is known to be on disk), so a restarted daemon re-advertises progress from disk and a file
 * changed since it was verified, or never synced, is checked again.
 */
import { join, relative } from "node:path";
import { z } from "zod";
import { ShardMetadataSchema } from "../cluster/instances.ts";
import { normalizeModelId } from "../models/card.ts";
import { resolveInside } from "../security/contain.ts";
import { checkModelId, checkRepoPath, RepoPathSchema } from "../security/ids.ts";
import { partialPath } from "./fetch.ts";

export const ManifestFileSchema = z.object({
  // A manifest written from an older, unchecked hub listing is not trusted either: such a file path fails the parse.
  path: RepoPathSchema,
  size: z.number().int(),
  sha256: z.string().nullable(),
});
const VerifiedSchema = z.object({
  size: z.number().int(),
  mtimeMs: z.number(),
  /** The content's sha256 as verified (the hub's, or computed while streaming when the hub gave none). */
  sha256: z.string().nullable().default(null),
  /**
   * False from the rename until fdatasync returns: a crash in between can leave the right size with the wrong
   * bytes, so such a file is hashed again before use. Manifests from before this field were synced first.
   */
  synced: z.boolean().default(true),
});
export type Verified = z.infer<typeof VerifiedSchema>;

export const ManifestSchema = z.object({
  modelId: z.string(),
  shardMetadata: ShardMetadataSchema,
  files: z.array(ManifestFileSchema),
  verified: z.record(z.string(), VerifiedSchema).default({}),
  completedAt: z.string().nullable().default(null),
  /**
   * A download is under way that nobody stopped on purpose: true from its start until it completes, fails,
   * or is cancelled; a daemon that stops or dies meanwhile resumes it at its next start.
   */
  resume: z.boolean().default(false),
});
export type Manifest = z.infer<typeof ManifestSchema>;
export type ManifestFile = z.infer<typeof ManifestFileSchema>;

/**
 * The model's folder, `<modelsDir>/<org>--<name>`, resolved and checked to lie strictly inside modelsDir (a link in
 * its place cannot lead out); UntrustedInputError for an id that is not a model id.
 */
export function containedModelDir(modelsDir: string, modelId: string): Promise<string> {
  return resolveInside(modelsDir, normalizeModelId(checkModelId(modelId)), "model_id");
}

/** A repo file of the model in `dir`, checked to be a repo path and to resolve strictly inside modelsDir. */
export function containedFile(modelsDir: string, dir: string, path: string): Promise<string> {
  return resolveInside(modelsDir, join(relative(modelsDir, dir), checkRepoPath(path)), "path");
}

const manifestPath = (dir: string) => join(dir, ".skulk", "manifest.json");

export async function readManifest(dir: string): Promise<Manifest | null> {
  try {
    return ManifestSchema.parse(JSON.parse(await Deno.readTextFile(manifestPath(dir))));
  } catch {
    return null;
  }
}

// Parallel file downloads of one model update its manifest; writes are queued per directory so a stale
// snapshot never lands after a newer one.
const writes = new Map<string, Promise<void>>();

export function writeManifest(dir: string, m: Manifest): Promise<void> {
  const text = JSON.stringify(m, null, 2);
  return queued(dir, () => replaceManifest(dir, text));
}

/** Reads the manifest as it is now, in the write queue, and writes what `change` makes of it (null: no write). */
export function updateManifest(dir: string, change: (m: Manifest) => Manifest | null): Promise<void> {
  return queued(dir, async () => {
    const current = await readManifest(dir);
    const next = current && change(current);
    if (next) await replaceManifest(dir, JSON.stringify(next, null, 2));
  });
}

function queued(dir: string, write: () => Promise<void>): Promise<void> {
  const next = (writes.get(dir) ?? Promise.resolve()).catch(() => {}).then(write);
  writes.set(dir, next);
  next.finally(() => writes.get(dir) === next && writes.delete(dir)).catch(() => {});
  return next;
}

async function replaceManifest(dir: string, text: string): Promise<void> {
  await Deno.mkdir(join(dir, ".skulk"), { recursive: true });
  const tmp = `${manifestPath(dir)}.tmp`;
  await Deno.writeTextFile(tmp, text);
  await Deno.rename(tmp, manifestPath(dir));
}

export interface FileOnDisk {
  /** Size of the complete file, or null when it is not there. */
  complete: number | null;
  mtimeMs: number | null;
  /** Size of `<file>.partial`, or 0. */
  partial: number;
}

/** What is on disk at `full` (a path containedFile checked) and at its `.partial`. */
export async function fileOnDisk(full: string): Promise<FileOnDisk> {
  let complete: number | null = null;
  let mtimeMs: number | null = null;
  try {
    const s = await Deno.stat(full);
    complete = s.size;
    mtimeMs = s.mtime?.getTime() ?? null;
  } catch { /* not there */ }
  let partial = 0;
  try {
    partial = (await Deno.stat(partialPath(full))).size;
  } catch { /* not there */ }
  return { complete, mtimeMs, partial };
}

/**
 * Pure: what a file on disk is worth against the hub's entry. A complete file is trusted when it was verified
 * at this size and mtime and synced since; with no hash to check against (neither the hub's nor our own
 * record), its size is all there is to go on.
 */
export function fileStatus(
  f: ManifestFile,
  disk: FileOnDisk,
  verified: Verified | undefined,
):
  | { state: "verified"; bytes: number }
  | { state: "unverified"; bytes: number }
  | { state: "partial"; bytes: number }
  | { state: "absent"; bytes: 0 } {
  if (disk.complete !== null && disk.complete === f.size) {
    const same = verified !== undefined && verified.size === disk.complete &&
      verified.mtimeMs === disk.mtimeMs;
    const trusted = same ? verified.synced : f.sha256 === null && !verified?.sha256;
    return trusted ? { state: "verified", bytes: f.size } : { state: "unverified", bytes: f.size };
  }
  if (disk.partial > 0 && disk.partial <= f.size) return { state: "partial", bytes: disk.partial };
  return { state: "absent", bytes: 0 };
}

/** Model directories under modelsDir that carry a manifest. */
export async function scanModels(modelsDir: string): Promise<{ dir: string; manifest: Manifest }[]> {
  const out: { dir: string; manifest: Manifest }[] = [];
  try {
    for await (const e of Deno.readDir(modelsDir)) {
      if (!e.isDirectory) continue;
      const dir = join(modelsDir, e.name);
      const manifest = await readManifest(dir);
      if (manifest) out.push({ dir, manifest });
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return out.sort((a, b) => a.dir.localeCompare(b.dir));
}
