/**
 * Tiny random-weight llama models for tests: a real tokenizer borrowed from a llama.cpp vocab file, a few
 * small layers, weights deterministic by seed. Pure builder (`tinyLlama`) plus the file-writing shell.
 */
import { GgmlType, gguf, type GgufMetadata, type GgufTensor, writeGguf } from "./writer.ts";
import { readVocab, resolveVocab, type VocabSettings } from "./vocab.ts";

export interface TinyOptions {
  /** Transformer blocks. */
  layers?: number;
  /** Embedding width (n_embd). */
  width?: number;
  heads?: number;
  kvHeads?: number;
  ffn?: number;
  contextLength?: number;
  seed?: number;
  /** Name of llama.cpp's models/ggml-vocab-<name>.gguf. */
  vocab?: string;
  dtype?: "f16" | "f32";
  /** Pooling written into the header, for `llama-server --embeddings` (none leaves the model generative only). */
  pooling?: "none" | "mean" | "cls" | "last";
  /** A reasoning model's template: the generation prompt opens a `<think>` block (as Qwen3's and DeepSeek-R1's do). */
  thinking?: boolean;
  name?: string;
}

export const TINY_DEFAULTS = {
  layers: 4,
  width: 64,
  heads: 4,
  kvHeads: 2,
  ffn: 192,
  contextLength: 4096,
  seed: 1,
  vocab: "llama-spm",
  dtype: "f16",
  pooling: "none",
  thinking: false,
} as const satisfies TinyOptions;

export type ResolvedTinyOptions = Required<Omit<TinyOptions, "name">> & { name: string };

export function resolveTinyOptions(opts: TinyOptions = {}): ResolvedTinyOptions {
  const o = {
    ...TINY_DEFAULTS,
    ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)),
  };
  for (const k of ["layers", "width", "heads", "kvHeads", "ffn", "contextLength"] as const) {
    if (!Number.isInteger(o[k]) || o[k] <= 0) {
      throw new RangeError(`${k} must be a positive integer, got ${o[k]}`);
    }
  }
  if (o.width % o.heads !== 0) {
    throw new RangeError(`width ${o.width} must be a multiple of heads ${o.heads}`);
  }
  if (o.heads % o.kvHeads !== 0) {
    throw new RangeError(`heads ${o.heads} must be a multiple of kvHeads ${o.kvHeads}`);
  }
  if ((o.width / o.heads) % 2 !== 0) {
    throw new RangeError(`head size ${o.width / o.heads} must be even (RoPE rotates pairs)`);
  }
  if (!Number.isInteger(o.seed) || o.seed < 0) {
    throw new RangeError(`seed must be a non-negative integer, got ${o.seed}`);
  }
  const name = opts.name ?? `skulk-tiny-llama-${o.layers}L-${o.width}w-s${o.seed}`;
  return { ...o, name } as ResolvedTinyOptions;
}

/** mulberry32: tiny, fast and stable across platforms, which is all a test model needs. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a of the tensor name mixed with the seed: each tensor's weights do not depend on tensor order. */
export function tensorSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function encode(values: Float32Array, dtype: "f16" | "f32"): { type: GgmlType; data: Uint8Array } {
  if (dtype === "f32") return { type: GgmlType.F32, data: new Uint8Array(values.buffer) };
  return { type: GgmlType.F16, data: new Uint8Array(Float16Array.from(values).buffer) };
}

/** Uniform weights with the given standard deviation. */
export function randomValues(count: number, std: number, seed: number): Float32Array {
  const next = rng(seed);
  const half = std * Math.sqrt(3);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() * 2 - 1) * half;
  return out;
}

const POOLING = { none: 0, mean: 1, cls: 2, last: 3 } as const;
const NORMAL_TOKEN = 1;

/**
 * A ChatML template with tools in the style of Qwen 2.5 / Hermes: tool signatures in the system turn, calls
 * as `<tool_call>{"name", "arguments"}</tool_call>`, results as `<tool_response>` in a user turn. llama-server
 * (--jinja) recognises this format, so a forced tool call is grammar-constrained to valid JSON even with
 * random weights. Its markers are plain text in most small vocabularies, so they never end generation early.
 */
export const TINY_CHAT_TEMPLATE = String.raw`{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}
{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- for message in messages %}
{%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
{%- elif message.role == "assistant" %}
{{- '<|im_start|>' + message.role }}
{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == "tool" %}
{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' }}{{- message.content }}{{- '\n</tool_response>' }}
{%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
`;

/**
 * TINY_CHAT_TEMPLATE for a reasoning model: the assistant's turn starts inside `<think>`, so llama-server's
 * reasoning parser returns what the model writes as reasoning until it closes the block (random weights never
 * do, so a reply cut at max_tokens is all reasoning).
 */
export const TINY_THINKING_TEMPLATE = TINY_CHAT_TEMPLATE.replace(
  "{{- '<|im_start|>assistant\\n' }}{%- endif %}\n",
  "{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}\n",
).replace(
  // An earlier turn's reasoning in its block: llama.cpp learns the reasoning markers from how the template
  // renders `reasoning_content`, and parses only what it learned.
  "message.role + '\\n' + message.content + '<|im_end|>'",
  "message.role + '\\n' + ('<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' if message.reasoning_content else '') + message.content + '<|im_end|>'",
);

/**
 * Builds the header and tensors of a tiny llama. The output matrix is tied to the token embeddings, and the
 * rows of every non-normal token (control, end-of-generation, byte fallback, unknown) are zero: their logit
 * is then 0 while ordinary tokens spread around it, so greedy decoding never picks them and sampling almost
 * never does. Replies therefore run to max_tokens with printable text.
 */
export function tinyLlama(
  vocab: GgufMetadata,
  opts: TinyOptions = {},
): { metadata: GgufMetadata; tensors: GgufTensor[] } {
  const o = resolveTinyOptions(opts);
  const tokens = vocab["tokenizer.ggml.tokens"]?.value;
  if (!Array.isArray(tokens) || tokens.length === 0) throw new RangeError("the vocabulary has no tokens");
  const nVocab = tokens.length;
  const tokenType = vocab["tokenizer.ggml.token_type"]?.value;
  const headDim = o.width / o.heads;
  const kvWidth = headDim * o.kvHeads;

  const metadata: GgufMetadata = {
    "general.architecture": gguf.str("llama"),
    "general.name": gguf.str(o.name),
    "general.alignment": gguf.u32(32),
    "general.file_type": gguf.u32(o.dtype === "f16" ? 1 : 0),
    "general.quantization_version": gguf.u32(2),
    "llama.block_count": gguf.u32(o.layers),
    "llama.context_length": gguf.u32(o.contextLength),
    "llama.embedding_length": gguf.u32(o.width),
    "llama.feed_forward_length": gguf.u32(o.ffn),
    "llama.attention.head_count": gguf.u32(o.heads),
    "llama.attention.head_count_kv": gguf.u32(o.kvHeads),
    "llama.attention.layer_norm_rms_epsilon": gguf.f32(1e-5),
    "llama.rope.dimension_count": gguf.u32(headDim),
    "llama.rope.freq_base": gguf.f32(10000),
    "llama.vocab_size": gguf.u32(nVocab),
    ...(o.pooling !== "none" ? { "llama.pooling_type": gguf.u32(POOLING[o.pooling]) } : {}),
    ...vocab,
  };
  if (!metadata["tokenizer.chat_template"]) {
    metadata["tokenizer.chat_template"] = gguf.str(o.thinking ? TINY_THINKING_TEMPLATE : TINY_CHAT_TEMPLATE);
  }
  // SentencePiece's leading space merges into the template's first marker ("▁<"); llama-server then cannot
  // replay the generation prompt into a JSON-schema or tool grammar and refuses every constrained request.
  metadata["tokenizer.ggml.add_space_prefix"] = gguf.bool(false);

  const tensors: GgufTensor[] = [];
  const matrix = (name: string, cols: number, rows: number, std = 1 / Math.sqrt(cols)) =>
    tensors.push({
      name,
      dims: [cols, rows],
      ...encode(randomValues(cols * rows, std, tensorSeed(o.seed, name)), o.dtype),
    });
  // Norm weights are 1-D and stay F32: ggml's CPU and RPC backends expect that for rms_norm's multiplier.
  const ones = (name: string) =>
    tensors.push({
      name,
      dims: [o.width],
      type: GgmlType.F32,
      data: new Uint8Array(new Float32Array(o.width).fill(1).buffer),
    });

  const embd = randomValues(o.width * nVocab, 0.25, tensorSeed(o.seed, "token_embd.weight"));
  if (Array.isArray(tokenType)) {
    tokenType.forEach((t, id) => {
      if (Number(t) !== NORMAL_TOKEN) embd.fill(0, id * o.width, (id + 1) * o.width);
    });
  }
  tensors.push({ name: "token_embd.weight", dims: [o.width, nVocab], ...encode(embd, o.dtype) });
  for (let i = 0; i < o.layers; i++) {
    const b = `blk.${i}`;
    ones(`${b}.attn_norm.weight`);
    matrix(`${b}.attn_q.weight`, o.width, o.width);
    matrix(`${b}.attn_k.weight`, o.width, kvWidth);
    matrix(`${b}.attn_v.weight`, o.width, kvWidth);
    matrix(`${b}.attn_output.weight`, o.width, o.width);
    ones(`${b}.ffn_norm.weight`);
    matrix(`${b}.ffn_gate.weight`, o.width, o.ffn);
    matrix(`${b}.ffn_up.weight`, o.width, o.ffn);
    matrix(`${b}.ffn_down.weight`, o.ffn, o.width);
  }
  ones("output_norm.weight");
  return { metadata, tensors };
}

/** Writes a tiny model to `path` with a vocab found through `where`; returns its resolved options and size. */
export async function writeTinyModel(
  path: string,
  opts: TinyOptions,
  where: VocabSettings,
): Promise<{ bytes: number; options: ResolvedTinyOptions; vocabPath: string }> {
  const options = resolveTinyOptions(opts);
  const vocabPath = resolveVocab(options.vocab, where);
  const { metadata, tensors } = tinyLlama(await readVocab(vocabPath), options);
  const bytes = await writeGguf(path, metadata, tensors);
  return { bytes, options, vocabPath };
}
