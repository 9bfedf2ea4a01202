/**
 * Finds llama.cpp's vocabulary-only GGUF files (models/ggml-vocab-*.gguf in the source tree that
 * scripts/build-engine caches) and reads their tokenizer metadata for the tiny-model generator.
 */
import { gguf as parseGguf } from "@huggingface/gguf";
import type { Config } from "../../config/schema.ts";
import type { GgufEntry, GgufMetadata } from "./writer.ts";

/** Where vocab files are looked for: dev.vocab_dir alone when set, else the engine cache's llama.cpp sources. */
export type VocabSettings = Pick<Config, "vocabDir" | "cacheDir">;

export class VocabNotFound extends Error {
  constructor(message: string) {
    super(message);
    this.name = "VocabNotFound";
  }
}

/** Directories that may hold ggml-vocab-*.gguf, best first: the vocab dir alone when set. */
export function vocabDirs(s: VocabSettings): string[] {
  if (s.vocabDir) return [s.vocabDir];
  const src = `${s.cacheDir}/src`;
  const dirs: { path: string; mtime: number }[] = [];
  try {
    for (const e of Deno.readDirSync(src)) {
      if (!e.isDirectory || !e.name.startsWith("llama.cpp-")) continue;
      const path = `${src}/${e.name}/models`;
      try {
        dirs.push({ path, mtime: Deno.statSync(path).mtime?.getTime() ?? 0 });
      } catch { /* a source tree without models/ (partial clone) is skipped */ }
    }
  } catch { /* no cache yet */ }
  // Newest checkout first: it matches the engine most recently built.
  return dirs.sort((a, b) => b.mtime - a.mtime).map((d) => d.path);
}

/** Path of ggml-vocab-<name>.gguf, or VocabNotFound saying where it looked and how to get it. */
export function resolveVocab(name: string, s: VocabSettings): string {
  if (!/^[a-z0-9][a-z0-9._-]*$/i.test(name)) throw new VocabNotFound(`bad vocabulary name '${name}'`);
  const dirs = vocabDirs(s);
  for (const dir of dirs) {
    const path = `${dir}/ggml-vocab-${name}.gguf`;
    try {
      if (Deno.statSync(path).isFile) return path;
    } catch { /* try the next */ }
  }
  const where = dirs.length ? dirs.join(", ") : `${s.cacheDir}/src/llama.cpp-*/models`;
  throw new VocabNotFound(
    `vocabulary ggml-vocab-${name}.gguf not found in ${where}; run scripts/build-engine first (it caches the llama.cpp ` +
      `source with its models/ folder) or set SKULK_VOCAB_DIR to a folder holding ggml-vocab-*.gguf`,
  );
}

const isScalar = (x: unknown): x is string | number | bigint | boolean =>
  ["string", "number", "bigint", "boolean"].includes(typeof x);

/** The parser's typed entry, checked into the writer's shape (nested arrays do not occur in vocab metadata). */
function toEntry(key: string, e: { value: unknown; type: number; subType?: number }): GgufEntry {
  const { value, type, subType } = e;
  if (isScalar(value)) return { type, value };
  if (Array.isArray(value) && value.every(isScalar)) return { type, value, subType };
  throw new VocabNotFound(`vocabulary key ${key} has a value this writer cannot copy`);
}

/** Every `tokenizer.*` entry of a vocab file, typed so it can be written into another GGUF as is. */
export async function readVocab(path: string): Promise<GgufMetadata> {
  const { typedMetadata } = await parseGguf(path, { allowLocalFile: true, typedMetadata: true });
  const out: GgufMetadata = {};
  for (const [k, v] of Object.entries(typedMetadata)) {
    if (k.startsWith("tokenizer.")) out[k] = toEntry(k, v);
  }
  if (!out["tokenizer.ggml.tokens"]) throw new VocabNotFound(`${path} has no tokenizer.ggml.tokens`);
  return out;
}
