/**
 * A tiny random-weight whisper model in whisper.cpp's legacy `ggml` format (magic, hparams, mel filters,
 * vocab, tensors; the layout whisper_model_load reads), deterministic by seed, for tests and benchmarks.
 */
import { randomValues, rng, tensorSeed } from "../gguf/tiny.ts";

export interface TinyWhisperOptions {
  /** Encoder and decoder width (n_audio_state = n_text_state). */
  width?: number;
  heads?: number;
  audioLayers?: number;
  textLayers?: number;
  seed?: number;
}

const GGML_MAGIC = 0x67676d6c; // "ggml"
/** Multilingual vocabulary size: whisper.cpp derives every special token id (sot, eot, languages, timestamps) from it. */
const N_VOCAB = 51865;
/** Ids below this are ordinary text tokens (GPT-2's); whisper.cpp names the special ones itself. */
const N_TEXT_TOKENS = 50257;
const N_AUDIO_CTX = 1500; // 30 s of 10 ms mel frames after the stride-2 convolution
const N_TEXT_CTX = 448;
const N_MELS = 80;
const N_FFT_BINS = 201; // 1 + 400/2

const SYLLABLES = [
  "ka",
  "lo",
  "mi",
  "ne",
  "su",
  "ta",
  "ri",
  "po",
  "ve",
  "zu",
  "an",
  "el",
  "or",
  "is",
  "um",
  "ba",
];

/**
 * ASCII-only token text so the engine's JSON is always valid UTF-8. As in GPT-2, ids 0-93 are the
 * printable characters and 220 is a lone space (whisper.cpp looks " " up to suppress blanks); the rest
 * are syllables, every second one starting a word.
 */
function tokenText(i: number): string {
  if (i < 94) return String.fromCharCode(33 + i);
  if (i === 220) return " ";
  const a = SYLLABLES[i % SYLLABLES.length];
  const b = SYLLABLES[Math.floor(i / SYLLABLES.length) % SYLLABLES.length];
  return (i % 2 === 0 ? " " : "") + a + b;
}

class Out {
  readonly parts: Uint8Array[] = [];
  i32(...v: number[]) {
    const b = new Uint8Array(4 * v.length);
    const dv = new DataView(b.buffer);
    v.forEach((x, k) => dv.setInt32(4 * k, x, true));
    this.parts.push(b);
  }
  u32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, v, true);
    this.parts.push(b);
  }
  f32(v: Float32Array) {
    this.parts.push(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  }
  bytes(b: Uint8Array) {
    this.parts.push(b);
  }
}

interface TensorSpec {
  name: string;
  ne: number[];
  fill: "rand" | "ones" | "zeros";
  /** Weight matrices and convolution kernels are f16 (ggml's CPU im2col needs f16 kernels); the rest f32. */
  f16: boolean;
}

/** Tensor names whisper.cpp expects, with their ggml shapes (ne0 first) and initial values. */
function tensors(o: Required<TinyWhisperOptions>): TensorSpec[] {
  const s = o.width;
  const list: TensorSpec[] = [];
  const t = (name: string, ne: number[], fill: TensorSpec["fill"] = "rand") =>
    list.push({
      name,
      ne,
      fill,
      f16: fill === "rand" && ne.length >= 2 && !name.endsWith("positional_embedding") &&
        !name.endsWith(".bias"),
    });
  const norm = (p: string) => {
    t(`${p}.weight`, [s], "ones");
    t(`${p}.bias`, [s], "zeros");
  };
  const attn = (p: string) => {
    t(`${p}.query.weight`, [s, s]);
    t(`${p}.query.bias`, [s], "zeros");
    t(`${p}.key.weight`, [s, s]);
    t(`${p}.value.weight`, [s, s]);
    t(`${p}.value.bias`, [s], "zeros");
    t(`${p}.out.weight`, [s, s]);
    t(`${p}.out.bias`, [s], "zeros");
  };
  const mlp = (p: string) => {
    norm(`${p}.mlp_ln`);
    t(`${p}.mlp.0.weight`, [s, 4 * s]);
    t(`${p}.mlp.0.bias`, [4 * s], "zeros");
    t(`${p}.mlp.2.weight`, [4 * s, s]);
    t(`${p}.mlp.2.bias`, [s], "zeros");
  };
  t("encoder.positional_embedding", [s, N_AUDIO_CTX]);
  t("encoder.conv1.weight", [3, N_MELS, s]);
  t("encoder.conv1.bias", [1, s], "zeros");
  t("encoder.conv2.weight", [3, s, s]);
  t("encoder.conv2.bias", [1, s], "zeros");
  norm("encoder.ln_post");
  for (let i = 0; i < o.audioLayers; i++) {
    const p = `encoder.blocks.${i}`;
    mlp(p);
    norm(`${p}.attn_ln`);
    attn(`${p}.attn`);
  }
  t("decoder.positional_embedding", [s, N_TEXT_CTX]);
  t("decoder.token_embedding.weight", [s, N_VOCAB]);
  norm("decoder.ln");
  for (let i = 0; i < o.textLayers; i++) {
    const p = `decoder.blocks.${i}`;
    mlp(p);
    norm(`${p}.attn_ln`);
    attn(`${p}.attn`);
    norm(`${p}.cross_attn_ln`);
    attn(`${p}.cross_attn`);
  }
  return list;
}

export function resolveTinyWhisper(opts: TinyWhisperOptions = {}): Required<TinyWhisperOptions> {
  const o = { width: 64, heads: 2, audioLayers: 1, textLayers: 1, seed: 1, ...opts };
  if (o.width % o.heads !== 0) {
    throw new RangeError(`width (${o.width}) must be a multiple of heads (${o.heads})`);
  }
  for (const [k, v] of Object.entries(o)) {
    if (!Number.isInteger(v) || v < (k === "seed" ? 0 : 1)) {
      throw new RangeError(`${k} must be a positive integer, got ${v}`);
    }
  }
  return o;
}

/** The model file's bytes (ftype 1: f16 weight matrices and kernels, f32 norms, biases and positions). */
export function tinyWhisper(opts: TinyWhisperOptions = {}): Uint8Array {
  const o = resolveTinyWhisper(opts);
  const out = new Out();
  out.u32(GGML_MAGIC);
  // n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
  out.i32(
    N_VOCAB,
    N_AUDIO_CTX,
    o.width,
    o.heads,
    o.audioLayers,
    N_TEXT_CTX,
    o.width,
    o.heads,
    o.textLayers,
    N_MELS,
    1,
  );
  // Mel filters: non-negative random weights, so the log-mel input is finite.
  out.i32(N_MELS, N_FFT_BINS);
  const next = rng(o.seed);
  const filters = new Float32Array(N_MELS * N_FFT_BINS);
  for (let i = 0; i < filters.length; i++) filters[i] = next() * 0.02;
  out.f32(filters);
  out.i32(N_TEXT_TOKENS);
  const enc = new TextEncoder();
  for (let i = 0; i < N_TEXT_TOKENS; i++) {
    const b = enc.encode(tokenText(i));
    out.u32(b.length);
    out.bytes(b);
  }
  for (const t of tensors(o)) {
    const count = t.ne.reduce((a, b) => a * b, 1);
    const values = t.fill === "rand"
      ? randomValues(count, 0.05, tensorSeed(o.seed, t.name))
      : new Float32Array(count).fill(t.fill === "ones" ? 1 : 0);
    const name = enc.encode(t.name);
    out.i32(t.ne.length, name.length, t.f16 ? 1 : 0); // n_dims, name length, ggml type (0 f32, 1 f16)
    out.i32(...t.ne);
    out.bytes(name);
    if (t.f16) out.bytes(new Uint8Array(Float16Array.from(values).buffer));
    else out.f32(values);
  }
  const total = out.parts.reduce((n, p) => n + p.length, 0);
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const p of out.parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return bytes;
}

/** Writes the model to `path` (through a temporary file renamed into place, so readers never see half of it). */
export async function writeTinyWhisper(path: string, opts: TinyWhisperOptions = {}): Promise<number> {
  const bytes = tinyWhisper(opts);
  const tmp = `${path}.${crypto.randomUUID()}.tmp`;
  await Deno.writeFile(tmp, bytes);
  await Deno.rename(tmp, path);
  return bytes.length;
}
