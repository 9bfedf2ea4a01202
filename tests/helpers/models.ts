/**
 * Tiny GGUF models for tests: generated once per option set under tests/.tmp/models/ and reused, so every
 * test that needs a real llama-server model gets one in milliseconds without any download.
 */
import {
  resolveTinyOptions,
  TINY_CHAT_TEMPLATE,
  TINY_THINKING_TEMPLATE,
  type TinyOptions,
  writeTinyModel,
} from "../../src/dev/gguf/tiny.ts";
import { resolveConfig } from "../../src/config/load.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
export const MODELS_DIR = `${ROOT}tests/.tmp/models`;

/** File name for an option set: every resolved option is part of it, so different options never share a file. */
export function tinyModelName(opts: TinyOptions = {}): string {
  const o = resolveTinyOptions(opts);
  const key = [
    o.vocab,
    `${o.layers}L`,
    `${o.width}w`,
    `${o.heads}h`,
    `${o.kvHeads}kv`,
    `${o.ffn}ff`,
    `${o.contextLength}c`,
    `s${o.seed}`,
    o.dtype,
    o.pooling,
    ...(o.thinking ? ["think"] : []),
    // The header (chat template, tokenizer flags) changes with the code: a stale cached file must not be reused.
    `h${headerVersion()}`,
  ];
  const name = opts.name ? `-${opts.name.replace(/[^A-Za-z0-9._-]/g, "_")}` : "";
  return `tiny-${key.join("-")}${name}.gguf`;
}

/** A short hash of what the tiny header carries besides the options (FNV-1a of the template, plus a revision). */
function headerVersion(): string {
  let h = 0x811c9dc5;
  for (const ch of `2:${TINY_CHAT_TEMPLATE}:${TINY_THINKING_TEMPLATE}`) {
    h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193);
  }
  return (h >>> 0).toString(36);
}

/**
 * A tiny model wide enough that each token costs real work: a long generation (random weights never end the
 * text themselves) is still running when a test cancels it or its client goes.
 */
export function slowTinyModel(contextLength: number): Promise<string> {
  return tinyModel({ contextLength, layers: 8, width: 512, heads: 8, kvHeads: 4, ffn: 1536 });
}

/** Path of a tiny llama GGUF with these options (defaults: 4 layers, 64 wide, llama-spm vocab, f16). */
export async function tinyModel(opts: TinyOptions = {}): Promise<string> {
  Deno.mkdirSync(MODELS_DIR, { recursive: true });
  const path = `${MODELS_DIR}/${tinyModelName(opts)}`;
  try {
    if (Deno.statSync(path).size > 0) return path;
  } catch { /* not made yet */ }
  // writeTinyModel renames into place, so parallel test workers never read a half-written file.
  await writeTinyModel(path, opts, resolveConfig({ flags: {}, env: Deno.env.toObject() }).config);
  return path;
}

/** Path of an engine binary: SKULK_LLAMA_SERVER_BIN / SKULK_RPC_SERVER_BIN, else the cached build scripts/build-engine prints. */
export async function engineBinary(name: "llama-server" | "ggml-rpc-server"): Promise<string> {
  const env = Deno.env.get(name === "llama-server" ? "SKULK_LLAMA_SERVER_BIN" : "SKULK_RPC_SERVER_BIN");
  if (env) return env;
  engineDir ??= printEngineDir();
  return `${await engineDir}/${name}`;
}

let engineDir: Promise<string> | undefined;

async function printEngineDir(): Promise<string> {
  const out = await new Deno.Command(`${ROOT}scripts/build-engine`, {
    args: ["--print-dir"],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error("scripts/build-engine --print-dir failed; build the engine first");
  return new TextDecoder().decode(out.stdout).trim();
}
