/**
 * Where a shard's model file is on this node: a registered local GGUF (`gguf_path`), else the card's
 * file under the models dir (`<models-dir>/<org>--<name>/<gguf_file>`), else downloaded by this node's
 * download manager (only a driver asks: a donor never touches the file). A neural voice is a directory.
 */
import type { ShardMetadata } from "../cluster/instances.ts";
import type { Config } from "../config/schema.ts";
import { DownloadCancelled } from "../downloads/errors.ts";
import { type DownloadManager, fullShard, ggufPath } from "../downloads/manager.ts";
import type { DraftModel } from "../engines/speculation.ts";
import { containedFile, containedModelDir } from "../downloads/local.ts";
import { type ModelCard, ModelCardSchema } from "../models/card.ts";
import { UntrustedInputError } from "../security/ids.ts";

/** What obtaining a model's files needs of the node: its settings and, when it runs one, its downloads. */
export interface ModelFilesPorts {
  config: Config;
  downloads?: Pick<DownloadManager, "ensure">;
}

export function modelsDir(config: Config): string {
  return config.modelsDir ?? `${config.dataDir}/models`;
}

export async function resolveModelFile(
  card: ModelCard,
  config: Config,
): Promise<{ path: string } | { error: string }> {
  const candidates: string[] = [];
  if (card.gguf_path) candidates.push(card.gguf_path);
  if (card.gguf_file) {
    // The card may come from a peer or a request: its file must resolve inside the models dir.
    try {
      const root = modelsDir(config);
      candidates.push(
        await containedFile(root, await containedModelDir(root, card.model_id), card.gguf_file),
      );
    } catch (e) {
      if (e instanceof UntrustedInputError) return { error: `${card.model_id}: ${e.message}` };
      throw e;
    }
  }
  if (candidates.length === 0) {
    return {
      error: `${card.model_id} has no GGUF file; this node's llama.cpp runner serves GGUF models only`,
    };
  }
  for (const p of candidates) {
    try {
      if ((await Deno.stat(p)).isFile) return { path: p };
    } catch { /* try the next */ }
  }
  return {
    error: `the model file for ${card.model_id} is not on this node (looked for ${
      candidates.join(", ")
    }); download it first`,
  };
}

/** The local file, fetching it first when the card names a hub file that is not here yet. */
export async function obtainModelFile(
  ctx: ModelFilesPorts,
  card: ModelCard,
  shard: ShardMetadata,
  signal: AbortSignal,
): Promise<{ path: string } | { error: string }> {
  const local = await resolveModelFile(card, ctx.config);
  if ("path" in local || card.gguf_path || !card.gguf_file || !ctx.downloads) return local;
  try {
    const dir = await ctx.downloads.ensure(card, shard, { signal });
    const path = ggufPath(dir, card);
    return path
      ? { path }
      : { error: `the download of ${card.model_id} finished without its GGUF file ${card.gguf_file}` };
  } catch (e) {
    if (e instanceof DownloadCancelled) return { error: `the download of ${card.model_id} was cancelled` };
    return { error: `download failed: ${(e as Error).message}` };
  }
}

/** The local directory of a model made of several files (a sherpa-onnx voice), or null. */
export async function resolveModelDir(card: ModelCard, config: Config): Promise<string | null> {
  if (card.gguf_path) {
    try {
      return (await Deno.stat(card.gguf_path)).isDirectory
        ? card.gguf_path
        : card.gguf_path.replace(/\/[^/]+$/, "");
    } catch {
      return null;
    }
  }
  let dir: string;
  try {
    dir = await containedModelDir(modelsDir(config), card.model_id);
  } catch (e) {
    if (e instanceof UntrustedInputError) return null;
    throw e;
  }
  try {
    for await (const e of Deno.readDir(dir)) if (e.isFile && e.name.endsWith(".onnx")) return dir;
  } catch { /* not here */ }
  return null;
}

/** The model's directory, downloading the card's repository first when it is not on this node. */
export async function obtainModelDir(
  ctx: ModelFilesPorts,
  card: ModelCard,
  shard: ShardMetadata,
  signal: AbortSignal,
): Promise<{ path: string } | { error: string }> {
  const local = await resolveModelDir(card, ctx.config);
  if (local) return { path: local };
  if (card.gguf_path) return { error: `${card.model_id}: ${card.gguf_path} is not on this node` };
  if (!ctx.downloads) {
    return { error: `the files of ${card.model_id} are not on this node and it has no download manager` };
  }
  try {
    return { path: await ctx.downloads.ensure(card, shard, { signal }) };
  } catch (e) {
    if (e instanceof DownloadCancelled) return { error: `the download of ${card.model_id} was cancelled` };
    return { error: `download failed: ${(e as Error).message}` };
  }
}

/**
 * A speculative decoder's draft model from its own repo: a companion of the card, found under the models dir
 * like any model's file or downloaded through the same manager (its progress shows under the draft's repo id).
 */
export async function obtainDraftFile(
  ctx: ModelFilesPorts,
  draft: DraftModel,
  signal: AbortSignal,
): Promise<{ path: string } | { error: string }> {
  // Only what names and fetches the file: the draft is never placed on its own.
  const companion = ModelCardSchema.parse({
    model_id: draft.repo,
    gguf_file: draft.file,
    n_layers: 1,
    hidden_size: 1,
    supports_tensor: false,
    tasks: ["TextGeneration"],
    placement: { compatible_backends: ["llama_server"] },
  });
  return await obtainModelFile(ctx, companion, fullShard(companion), signal);
}
