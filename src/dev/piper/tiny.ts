/**
 * A tiny random-weight Piper voice (VITS layout as sherpa-onnx loads it: model.onnx with Piper's metadata,
 * tokens.txt with Piper's phoneme symbols, model.onnx.json), deterministic by seed, for tests and benchmarks.
 */
import { randomValues, tensorSeed } from "../gguf/tiny.ts";
import type { OnnxModel, OnnxNode, OnnxTensor } from "../../models/onnx/model.ts";
import { encodeOnnx } from "../onnx/encode.ts";

export interface TinyPiperOptions {
  /** More than one makes a multi-speaker voice with a `sid` input. */
  speakers?: number;
  sampleRate?: number;
  /** Width of the phoneme embedding and the hidden layer. */
  width?: number;
  /** Samples each frame carries (Piper's hop length is 256). */
  hop?: number;
  /** Frames each token lasts at length_scale 1; length_scale scales it (rounded, at least 1). */
  framesPerToken?: number;
  seed?: number;
  /** espeak-ng voice the phonemes come from (Piper writes it as `voice`). */
  voice?: string;
}

export const TINY_PIPER_DEFAULTS = {
  speakers: 1,
  sampleRate: 22050,
  width: 32,
  hop: 256,
  framesPerToken: 4,
  seed: 1,
  voice: "en-us",
} as const satisfies TinyPiperOptions;

export type ResolvedTinyPiper = Required<TinyPiperOptions>;

export function resolveTinyPiper(opts: TinyPiperOptions = {}): ResolvedTinyPiper {
  const o = {
    ...TINY_PIPER_DEFAULTS,
    ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)),
  } as ResolvedTinyPiper;
  for (const k of ["speakers", "sampleRate", "width", "hop", "framesPerToken"] as const) {
    if (!Number.isInteger(o[k]) || o[k] <= 0) {
      throw new RangeError(`${k} must be a positive integer, got ${o[k]}`);
    }
  }
  if (!Number.isInteger(o.seed) || o.seed < 0) {
    throw new RangeError(`seed must be a non-negative integer, got ${o.seed}`);
  }
  return o;
}

/**
 * Piper's phoneme symbols in the order of its default phoneme id map: pad `_`, start `^`, end `$`, space,
 * punctuation, Latin letters, the IPA letters and marks espeak-ng writes, digits. sherpa-onnx maps each
 * phoneme espeak-ng gives to its id here and skips the rest.
 */
export const PIPER_SYMBOLS: readonly string[] = [
  "_",
  "^",
  "$",
  " ",
  ..."!'(),-.:;?",
  ..."abcdefghijklmnopqrstuvwxyz",
  ..."æçðøħŋœǀǁǂǃɐɑɒɓɔɕɖɗɘəɚɛɜɞɟɠɡɢɣɤɥɦɧɨɪɫɬɭɮɯɰɱɲɳɴɵɶɸɹɺɻɽɾʀʁʂʃʄʈʉʊʋʌʍʎʏʐʑʒʔʕʘʙʛʜʝʟʡʢʲˈˌːˑ˞βθχᵻⱱ",
  ..."0123456789",
  "\u0303", // combining tilde (nasal vowels)
  "\u0327",
  "\u0329",
  "\u032a",
  "\u032f",
  "\u033a",
  "\u033b",
  "\u02b0", // aspiration
  "\u02b7",
  "\u02e0",
  "\u02e4",
  "\u2191",
  "\u2193",
  "\u2192",
  "\u2197",
  "\u2198",
  "\u201c",
  "\u201d",
  "\u0361",
];

/** tokens.txt as sherpa-onnx reads it: `<symbol> <id>` per line, the space written as its id alone. */
export function piperTokensTxt(symbols: readonly string[] = PIPER_SYMBOLS): string {
  return symbols.map((s, id) => (s === " " ? ` ${id}` : `${s} ${id}`)).join("\n") + "\n";
}

const f32 = (name: string, dims: number[], data: number[] | Float32Array): OnnxTensor => ({
  name,
  dims,
  data: data instanceof Float32Array ? data : Float32Array.from(data),
});
const i64 = (name: string, dims: number[], data: number[]): OnnxTensor => ({
  name,
  dims,
  data: BigInt64Array.from(data.map(BigInt)),
});

/**
 * The network: phoneme embedding (plus a speaker embedding) → dense tanh layer → a frame of `hop` samples
 * per token, repeated round(framesPerToken × length_scale) times, flattened to y [1, 1, T]. So the audio
 * grows with the phoneme count, shrinks with speed (sherpa-onnx passes length_scale = 1/speed), and is
 * never silence; its sound is noise, as befits random weights.
 */
export function tinyPiper(opts: TinyPiperOptions = {}): OnnxModel {
  const o = resolveTinyPiper(opts);
  const vocab = PIPER_SYMBOLS.length;
  const w = (name: string, rows: number, cols: number, std: number) =>
    f32(name, [rows, cols], randomValues(rows * cols, std, tensorSeed(o.seed, name)));
  const multi = o.speakers > 1;
  const initializers: OnnxTensor[] = [
    w("emb.weight", vocab, o.width, 1),
    w("hidden.weight", o.width, o.width, 1 / Math.sqrt(o.width)),
    f32("hidden.bias", [o.width], randomValues(o.width, 0.1, tensorSeed(o.seed, "hidden.bias"))),
    w("frame.weight", o.width, o.hop, 2 / Math.sqrt(o.width)),
    f32("gain", [], [0.5]),
    i64("length_scale_index", [], [1]),
    f32("frames_per_token", [], [o.framesPerToken]),
    f32("one", [], [1]),
    i64("hop_shape", [1], [o.hop]),
    i64("out_shape", [3], [1, 1, -1]),
    i64("axis0", [1], [0]),
    i64("axis1", [1], [1]),
    i64("axis2", [1], [2]),
  ];
  const nodes: OnnxNode[] = [{ opType: "Gather", inputs: ["emb.weight", "x"], outputs: ["emb"] }];
  let embedded = "emb";
  if (multi) {
    initializers.push(w("speaker.weight", o.speakers, o.width, 0.5));
    nodes.push(
      { opType: "Gather", inputs: ["speaker.weight", "sid"], outputs: ["spk"] },
      { opType: "Unsqueeze", inputs: ["spk", "axis1"], outputs: ["spk3"] },
      { opType: "Add", inputs: ["emb", "spk3"], outputs: ["emb_spk"] },
    );
    embedded = "emb_spk";
  }
  nodes.push(
    { opType: "MatMul", inputs: [embedded, "hidden.weight"], outputs: ["h_mm"] },
    { opType: "Add", inputs: ["h_mm", "hidden.bias"], outputs: ["h_pre"] },
    { opType: "Tanh", inputs: ["h_pre"], outputs: ["h"] },
    { opType: "MatMul", inputs: ["h", "frame.weight"], outputs: ["f_mm"] },
    { opType: "Tanh", inputs: ["f_mm"], outputs: ["f_tanh"] },
    { opType: "Mul", inputs: ["f_tanh", "gain"], outputs: ["frames"] },
    // How many frames each token lasts: round(length_scale × framesPerToken), at least one.
    { opType: "Gather", inputs: ["scales", "length_scale_index"], outputs: ["length_scale"] },
    { opType: "Mul", inputs: ["length_scale", "frames_per_token"], outputs: ["reps_f"] },
    { opType: "Round", inputs: ["reps_f"], outputs: ["reps_r"] },
    { opType: "Max", inputs: ["reps_r", "one"], outputs: ["reps_m"] },
    { opType: "Cast", inputs: ["reps_m"], outputs: ["reps"], attributes: [{ name: "to", int: 7 }] },
    { opType: "Unsqueeze", inputs: ["reps", "axis0"], outputs: ["reps1"] },
    { opType: "Shape", inputs: ["x"], outputs: ["x_shape"] },
    {
      opType: "Concat",
      inputs: ["x_shape", "reps1", "hop_shape"],
      outputs: ["expand_shape"],
      attributes: [{ name: "axis", int: 0 }],
    },
    { opType: "Unsqueeze", inputs: ["frames", "axis2"], outputs: ["frames4"] },
    { opType: "Expand", inputs: ["frames4", "expand_shape"], outputs: ["repeated"] },
    { opType: "Reshape", inputs: ["repeated", "out_shape"], outputs: ["y"] },
  );
  const inputs = [
    { name: "x", elemType: "int64" as const, shape: [1, "N"] },
    { name: "x_length", elemType: "int64" as const, shape: [1] },
    { name: "scales", elemType: "float" as const, shape: [3] },
    ...(multi ? [{ name: "sid", elemType: "int64" as const, shape: [1] }] : []),
  ];
  return {
    irVersion: 8,
    opset: 13,
    producer: "skulk tiny piper",
    graph: {
      name: "tiny_piper",
      nodes,
      initializers,
      inputs,
      outputs: [{ name: "y", elemType: "float", shape: [1, 1, "T"] }],
    },
    // The keys sherpa-onnx's VITS loader reads; `comment: piper` selects Piper's input layout (scales).
    metadata: {
      model_type: "vits",
      comment: "piper",
      language: "English",
      voice: o.voice,
      has_espeak: "1",
      n_speakers: String(o.speakers),
      sample_rate: String(o.sampleRate),
      add_blank: "0",
      punctuation: '; : , . ! ? ¡ ¿ — … " « » “ ”',
    },
  };
}

/** Piper's own config (`<model>.onnx.json`): sample rate, espeak voice, speaker names and the phoneme map. */
export function tinyPiperConfig(opts: TinyPiperOptions = {}): Record<string, unknown> {
  const o = resolveTinyPiper(opts);
  const speakers = o.speakers > 1
    ? Object.fromEntries(Array.from({ length: o.speakers }, (_, i) => [`speaker_${i}`, i]))
    : {};
  return {
    audio: { sample_rate: o.sampleRate, quality: "x_low" },
    espeak: { voice: o.voice },
    inference: { noise_scale: 0.667, length_scale: 1, noise_w: 0.8 },
    num_speakers: o.speakers,
    speaker_id_map: speakers,
    phoneme_id_map: Object.fromEntries(PIPER_SYMBOLS.map((s, i) => [s, [i]])),
    dataset: "tiny",
  };
}

/**
 * Writes a voice directory (model.onnx, model.onnx.json, tokens.txt) at `dir`; returns the model's size.
 * The files are written in a sibling directory renamed into place, so a reader (or a parallel writer)
 * never sees half a voice; when `dir` already exists it is left as it is.
 */
export async function writeTinyPiper(dir: string, opts: TinyPiperOptions = {}): Promise<number> {
  const bytes = encodeOnnx(tinyPiper(opts));
  const parent = dir.replace(/\/[^/]+\/?$/, "") || ".";
  await Deno.mkdir(parent, { recursive: true });
  const tmp = await Deno.makeTempDir({ dir: parent, prefix: ".tiny-piper-" });
  try {
    await Deno.writeFile(`${tmp}/model.onnx`, bytes);
    await Deno.writeTextFile(`${tmp}/tokens.txt`, piperTokensTxt());
    await Deno.writeTextFile(`${tmp}/model.onnx.json`, JSON.stringify(tinyPiperConfig(opts), null, 2) + "\n");
    await Deno.rename(tmp, dir);
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => undefined);
    // Another writer got there first: its voice is the same (deterministic by options).
    if (!(await Deno.stat(`${dir}/model.onnx`).then(() => true, () => false))) throw e;
  }
  return bytes.length;
}
