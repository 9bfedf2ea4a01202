/**
 * Finds llama.cpp's vocabulary-only GGUF files (models/ggml-vocab-*.gguf in the source tree that
 * scripts/build-engine caches) and reads their tokenizer metadata for the tiny-model generator.
 */
import { gguf as parseGguf } from "@huggingface/gguf";
import type { GgufEntry, GgufMetadata } from "./writer.ts";

export class VocabNotFound extends Error {
  constructor(message: string) {
    super(message);
    this.name = "VocabNotFound";
  }
}

/** The cache dir scripts/build-engine uses: SKULK_CACHE_DIR, else $XDG_CACHE_HOME/skulk, else ~/.cache/skulk. */
export function skulkCacheDir(env: (k: string) => string | undefined = (k) => Deno.env.get(k)): string {
  return env("SKULK_CACHE_DIR") ?? `${env("XDG_CACHE_HOME") ?? `${env("HOME") ?? "."}/.cache`}/skulk`;
}

/** Directories that may hold ggml-vocab-*.gguf, best first: SKULK_VOCAB_DIR alone when set. */
export function vocabDirs(env: (k: string) => string | undefined = (k) => Deno.env.get(k)): string[] {
  const override = env("SKULK_VOCAB_DIR");
  if (override) return [override];
  const src = `${skulkCacheDir(env)}/src`;
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
export function resolveVocab(
  name: string,
  env: (k: string) => string | undefined = (k) => Deno.env.get(k),
): string {
  if (!/^[a-z0-9][a-z0-9._-]*$/i.test(name)) throw new VocabNotFound(`bad vocabulary name '${name}'`);
  const dirs = vocabDirs(env);
  for (const dir of dirs) {
    const path = `${dir}/ggml-vocab-${name}.gguf`;
    try {
      if (Deno.statSync(path).isFile) return path;
    } catch { /* try the next */ }
  }
  const where = dirs.length ? dirs.join(", ") : `${skulkCacheDir(env)}/src/llama.cpp-*/models`;
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
