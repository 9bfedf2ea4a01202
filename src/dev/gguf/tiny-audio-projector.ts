/**
 * A tiny random-weight audio projector (`mmproj`) for llama-server: clip architecture, projector type
 * `qwen2a` (a whisper encoder + one linear layer), so a tiny text GGUF of the same width hears audio.
 */
import { GgmlType, gguf, type GgufMetadata, type GgufTensor, writeGguf } from "./writer.ts";
import { randomValues, tensorSeed } from "./tiny.ts";

export interface TinyAudioProjectorOptions {
  /** Encoder width. */
  width?: number;
  heads?: number;
  layers?: number;
  /** The text model's embedding width (the projector's output). */
  projectionDim: number;
  melBins?: number;
  seed?: number;
}

/** Whisper's encoder positions: 30 s of 10 ms mel frames, halved by the stride-2 convolution. */
const N_POSITIONS = 1500;

export function tinyAudioProjector(
  opts: TinyAudioProjectorOptions,
): { metadata: GgufMetadata; tensors: GgufTensor[] } {
  const o = { width: 64, heads: 2, layers: 1, melBins: 80, seed: 1, ...opts };
  const ff = 4 * o.width;
  const metadata: GgufMetadata = {
    "general.architecture": gguf.str("clip"),
    "general.name": gguf.str(`skulk-tiny-audio-projector-${o.width}w-s${o.seed}`),
    "general.alignment": gguf.u32(32),
    "general.file_type": gguf.u32(1),
    "clip.projector_type": gguf.str("qwen2a"),
    "clip.has_audio_encoder": gguf.bool(true),
    "clip.has_vision_encoder": gguf.bool(false),
    "clip.audio.embedding_length": gguf.u32(o.width),
    "clip.audio.feed_forward_length": gguf.u32(ff),
    "clip.audio.block_count": gguf.u32(o.layers),
    "clip.audio.projection_dim": gguf.u32(o.projectionDim),
    "clip.audio.attention.head_count": gguf.u32(o.heads),
    "clip.audio.attention.layer_norm_epsilon": gguf.f32(1e-5),
    "clip.audio.num_mel_bins": gguf.u32(o.melBins),
  };
  const tensors: GgufTensor[] = [];
  const f32 = (name: string, dims: number[], fill?: number) => {
    const n = dims.reduce((a, b) => a * b, 1);
    const values = fill === undefined
      ? randomValues(n, 0.05, tensorSeed(o.seed, name))
      : new Float32Array(n).fill(fill);
    tensors.push({ name, dims, type: GgmlType.F32, data: new Uint8Array(values.buffer) });
  };
  // Matrices and convolution kernels are f16: ggml's CPU im2col takes f16 kernels only.
  const f16 = (name: string, dims: number[]) => {
    const n = dims.reduce((a, b) => a * b, 1);
    const values = randomValues(n, 1 / Math.sqrt(dims[0]), tensorSeed(o.seed, name));
    tensors.push({ name, dims, type: GgmlType.F16, data: new Uint8Array(Float16Array.from(values).buffer) });
  };
  const norm = (p: string) => {
    f32(`${p}.weight`, [o.width], 1);
    f32(`${p}.bias`, [o.width], 0);
  };
  f32("a.position_embd.weight", [o.width, N_POSITIONS]);
  f16("a.conv1d.1.weight", [3, o.melBins, o.width]);
  f32("a.conv1d.1.bias", [1, o.width], 0);
  f16("a.conv1d.2.weight", [3, o.width, o.width]);
  f32("a.conv1d.2.bias", [1, o.width], 0);
  for (let i = 0; i < o.layers; i++) {
    const b = `a.blk.${i}`;
    norm(`${b}.ln1`);
    norm(`${b}.ln2`);
    f16(`${b}.attn_q.weight`, [o.width, o.width]);
    f32(`${b}.attn_q.bias`, [o.width], 0);
    f16(`${b}.attn_k.weight`, [o.width, o.width]);
    f16(`${b}.attn_v.weight`, [o.width, o.width]);
    f32(`${b}.attn_v.bias`, [o.width], 0);
    f16(`${b}.attn_out.weight`, [o.width, o.width]);
    f32(`${b}.attn_out.bias`, [o.width], 0);
    f16(`${b}.ffn_up.weight`, [o.width, ff]);
    f32(`${b}.ffn_up.bias`, [ff], 0);
    f16(`${b}.ffn_down.weight`, [ff, o.width]);
    f32(`${b}.ffn_down.bias`, [o.width], 0);
  }
  norm("a.post_ln");
  f16("mm.a.fc.weight", [o.width, o.projectionDim]);
  f32("mm.a.fc.bias", [o.projectionDim], 0);
  return { metadata, tensors };
}

export function writeTinyAudioProjector(path: string, opts: TinyAudioProjectorOptions): Promise<number> {
  const { metadata, tensors } = tinyAudioProjector(opts);
  return writeGguf(path, metadata, tensors);
}
