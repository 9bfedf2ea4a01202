/**
 * `skulk dev`: developer tools. `make-model` writes a tiny random-weight llama GGUF with a real tokenizer
 * that llama-server serves; `make-voice` a tiny random-weight Piper voice that sherpa-onnx speaks with.
 */
import type { Command } from "commander";
import { writeTinyModel } from "./gguf/tiny.ts";
import { VocabNotFound } from "./gguf/vocab.ts";
import { resolveTinyPiper, writeTinyPiper } from "./piper/tiny.ts";
import { CliError, formatBytes } from "../cli/common.ts";
import { loadConfig } from "../config/load.ts";

const int = (name: string) => (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    throw new CliError(`--${name} wants a non-negative integer, got '${v}'`, 2);
  }
  return n;
};

export function registerDev(program: Command): Command {
  const dev = program.command("dev").description("developer tools (tiny test models)");
  dev.command("make-model")
    .description(
      "write a tiny random-weight llama GGUF (real vocabulary from llama.cpp's models/ggml-vocab-*.gguf)",
    )
    .requiredOption("--out <file>", "GGUF file to write")
    .option("--layers <n>", "transformer blocks (default 4)", int("layers"))
    .option("--width <n>", "embedding width (default 64)", int("width"))
    .option("--heads <n>", "attention heads (default 4)", int("heads"))
    .option("--kv-heads <n>", "key/value heads (default 2)", int("kv-heads"))
    .option("--ffn <n>", "feed-forward width (default 192)", int("ffn"))
    .option("--context <n>", "context length (default 4096)", int("context"))
    .option("--seed <n>", "weights seed (default 1)", int("seed"))
    .option(
      "--vocab <name>",
      "vocabulary ggml-vocab-<name>.gguf (default llama-spm; dev.vocab_dir, env SKULK_VOCAB_DIR, says where)",
    )
    .option("--dtype <type>", "f16 or f32 weights (default f16)")
    .option(
      "--pooling <kind>",
      "none, mean, cls or last: a pooling type for llama-server --embeddings (default none)",
    )
    .option("--thinking", "a reasoning model: its chat template opens a <think> block in the reply")
    .option("--name <name>", "general.name written in the header")
    .option("--json", "print the result as JSON")
    .action(async (flags) => {
      if (flags.dtype && !["f16", "f32"].includes(flags.dtype)) {
        throw new CliError(`--dtype must be f16 or f32, got '${flags.dtype}'`, 2);
      }
      if (flags.pooling && !["none", "mean", "cls", "last"].includes(flags.pooling)) {
        throw new CliError(`--pooling must be none, mean, cls or last, got '${flags.pooling}'`, 2);
      }
      try {
        const r = await writeTinyModel(flags.out, {
          layers: flags.layers,
          width: flags.width,
          heads: flags.heads,
          kvHeads: flags.kvHeads,
          ffn: flags.ffn,
          contextLength: flags.context,
          seed: flags.seed,
          vocab: flags.vocab,
          dtype: flags.dtype,
          pooling: flags.pooling,
          thinking: flags.thinking,
          name: flags.name,
        }, loadConfig({}).config);
        if (flags.json) {
          console.log(
            JSON.stringify({ path: flags.out, bytes: r.bytes, vocab: r.vocabPath, options: r.options }),
          );
        } else {console.log(
            `wrote ${flags.out} (${
              formatBytes(r.bytes)
            }, ${r.options.layers} layers, vocab ${r.options.vocab})`,
          );}
      } catch (e) {
        if (e instanceof VocabNotFound || e instanceof RangeError) throw new CliError(e.message, 2);
        throw e;
      }
    });
  dev.command("make-voice")
    .description(
      "write a tiny random-weight Piper voice directory (model.onnx, tokens.txt, model.onnx.json) for sherpa-onnx",
    )
    .requiredOption("--out <dir>", "directory to create (it must not exist yet)")
    .option("--speakers <n>", "speakers; more than one adds a speaker id input (default 1)", int("speakers"))
    .option("--sample-rate <hz>", "sample rate written in the metadata (default 22050)", int("sample-rate"))
    .option("--seed <n>", "weights seed (default 1)", int("seed"))
    .option("--json", "print the result as JSON")
    .action(async (flags) => {
      let options;
      try {
        options = resolveTinyPiper({
          speakers: flags.speakers,
          sampleRate: flags.sampleRate,
          seed: flags.seed,
        });
      } catch (e) {
        if (e instanceof RangeError) throw new CliError(e.message, 2);
        throw e;
      }
      if (await Deno.stat(flags.out).then(() => true, () => false)) {
        throw new CliError(`--out ${flags.out} already exists; name a new directory`, 2);
      }
      const bytes = await writeTinyPiper(flags.out, options);
      if (flags.json) console.log(JSON.stringify({ path: flags.out, bytes, options }));
      else {
        console.log(
          `wrote ${flags.out} (model.onnx ${
            formatBytes(bytes)
          }, ${options.speakers} speaker(s), ${options.sampleRate} Hz)`,
        );
      }
    });
  return dev;
}
