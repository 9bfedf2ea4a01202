/**
 * Where a shard's model file is on this node: a registered local GGUF (`gguf_path`), else the card's
 * file under the models dir (`<models-dir>/<org>--<name>/<gguf_file>`). Downloading is the downloads plane's.
 */
import type { Config } from "../config/schema.ts";
import { type ModelCard, normalizeModelId } from "../models/card.ts";

export function modelsDir(config: Config): string {
  return config.modelsDir ?? `${config.dataDir}/models`;
}

export async function resolveModelFile(card: ModelCard, config: Config): Promise<{ path: string } | { error: string }> {
  const candidates: string[] = [];
  if (card.gguf_path) candidates.push(card.gguf_path);
  if (card.gguf_file) candidates.push(`${modelsDir(config)}/${normalizeModelId(card.model_id)}/${card.gguf_file}`);
  if (candidates.length === 0) {
    return { error: `${card.model_id} has no GGUF file; this node's llama.cpp runner serves GGUF models only` };
  }
  for (const p of candidates) {
    try {
      if ((await Deno.stat(p)).isFile) return { path: p };
    } catch { /* try the next */ }
  }
  return { error: `the model file for ${card.model_id} is not on this node (looked for ${candidates.join(", ")}); download it first` };
}
