/**
 * Speech test material: the whisper-server binary (env or scripts/build-whisper), a tiny random whisper
 * model generated once under tests/.tmp/models, espeak-ng test speech, and speech cards in wire form.
 */
import { writeTinyAudioProjector } from "../../src/models/gguf/tiny-audio-projector.ts";
import { writeTinyWhisper } from "../../src/models/whisper/tiny.ts";
import { parseWav, pcm16Bytes, resample } from "../../src/audio/pcm.ts";
import { MODELS_DIR } from "./models.ts";
import { oggOpusToWebm } from "./webm.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

let whisperDir: Promise<string> | undefined;

export async function whisperServerBinary(): Promise<string> {
  const env = Deno.env.get("SKULK_WHISPER_SERVER_BIN");
  if (env) return env;
  whisperDir ??= new Deno.Command(`${ROOT}scripts/build-whisper`, {
    args: ["--print-dir"],
    stdout: "piped",
    stderr: "inherit",
  })
    .output()
    .then((o) => {
      if (!o.success) throw new Error("scripts/build-whisper --print-dir failed; build whisper-server first");
      return new TextDecoder().decode(o.stdout).trim();
    });
  return `${await whisperDir}/whisper-server`;
}

/** Path of the tiny random whisper model for this seed (written once, renamed into place). */
export async function tinyWhisperModel(seed = 1): Promise<string> {
  Deno.mkdirSync(MODELS_DIR, { recursive: true });
  const path = `${MODELS_DIR}/tiny-whisper-64w-1L-s${seed}.bin`;
  try {
    if (Deno.statSync(path).size > 0) return path;
  } catch { /* not made yet */ }
  await writeTinyWhisper(path, { seed });
  return path;
}

/** WAV bytes of `text` spoken by espeak-ng (22050 Hz mono 16-bit). */
export async function espeakWav(text: string, voice = "en"): Promise<Uint8Array> {
  const out = await new Deno.Command("espeak-ng", {
    args: ["--stdout", "-v", voice, text],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`espeak-ng failed: ${new TextDecoder().decode(out.stderr)}`);
  return out.stdout;
}

export function espeakCardWire(modelId = "skulk-test/espeak") {
  return {
    modelId,
    storageSize: { inBytes: 0 },
    nLayers: 1,
    hiddenSize: 1,
    supportsTensor: false,
    tasks: ["TextToSpeech"],
    family: "espeak",
    quantization: "",
    baseModel: "espeak-ng",
    capabilities: ["tts"],
    audio: {
      kind: "tts",
      defaultResponseFormat: "wav",
      responseFormats: ["wav", "pcm"],
      supportsStreaming: true,
      sampleRates: [22050],
      defaultVoice: "en",
    },
    placement: { compatibleBackends: ["espeak_ng"], backendPreference: ["espeak_ng"] },
  };
}

export function whisperCardWire(modelId: string, path: string) {
  return {
    modelId,
    storageSize: { inBytes: Deno.statSync(path).size },
    nLayers: 1,
    hiddenSize: 64,
    supportsTensor: false,
    tasks: ["SpeechToText"],
    family: "whisper",
    quantization: "F32",
    baseModel: "tiny random whisper",
    ggufPath: path,
    capabilities: ["stt"],
    audio: {
      kind: "stt",
      responseFormats: ["json", "verbose_json", "text", "srt", "vtt"],
      supportsStreaming: true,
      supportsRealtime: true,
      supportsTranslation: true,
      sampleRates: [16000],
    },
    placement: { compatibleBackends: ["whisper_cpp"], backendPreference: ["whisper_cpp"] },
  };
}

/** Signal-to-noise ratio (dB) of `decoded` against `reference`, sample for sample (lossy codecs' output). */
export function snr(reference: Float32Array, decoded: Float32Array): number {
  let signal = 0;
  let noise = 0;
  for (let i = 0; i < reference.length; i++) {
    signal += reference[i] ** 2;
    noise += ((decoded[i] ?? 0) - reference[i]) ** 2;
  }
  return 10 * Math.log10(signal / noise);
}

/** `wav` re-encoded by a command-line encoder from scripts/test-deps (flac, lame, opusenc, oggenc). */
export async function encodeWith(
  format: "flac" | "mp3" | "opus" | "vorbis" | "webm",
  wav: Uint8Array,
): Promise<Uint8Array> {
  // WebM/Opus, as browsers record it: opusenc's packets repacked by our test muxer.
  if (format === "webm") return oggOpusToWebm(await encodeWith("opus", wav));
  const dir = Deno.makeTempDirSync({ prefix: "skulk-audio-" });
  try {
    const input = `${dir}/in.wav`;
    const output = `${dir}/out`;
    Deno.writeFileSync(input, wav);
    const [bin, args] = {
      flac: ["flac", ["-s", "-f", "-o", output, input]],
      mp3: ["lame", ["--quiet", input, output]],
      opus: ["opusenc", ["--quiet", input, output]],
      vorbis: ["oggenc", ["-Q", "-o", output, input]],
    }[format] as [string, string[]];
    const out = await new Deno.Command(bin, { args, stdout: "null", stderr: "piped" }).output();
    if (!out.success) throw new Error(`${bin} failed: ${new TextDecoder().decode(out.stderr)}`);
    return Deno.readFileSync(output);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** Path of the tiny random audio projector (qwen2a) for a text model of this width. */
export async function tinyAudioProjectorModel(projectionDim = 64, seed = 1): Promise<string> {
  Deno.mkdirSync(MODELS_DIR, { recursive: true });
  const path = `${MODELS_DIR}/tiny-mmproj-qwen2a-64w-p${projectionDim}-s${seed}.gguf`;
  try {
    if (Deno.statSync(path).size > 0) return path;
  } catch { /* not made yet */ }
  await writeTinyAudioProjector(path, { projectionDim, seed });
  return path;
}

/** A transcription card served by llama-server: a tiny text GGUF plus the tiny audio projector. */
export function audioLlmCardWire(modelId: string, ggufPath: string, mmprojPath: string) {
  return {
    modelId,
    storageSize: { inBytes: Deno.statSync(ggufPath).size + Deno.statSync(mmprojPath).size },
    nLayers: 4,
    hiddenSize: 64,
    supportsTensor: false,
    tasks: ["SpeechToText"],
    family: "qwen2-audio",
    quantization: "F16",
    baseModel: "tiny random audio LLM",
    ggufPath,
    mmprojFile: mmprojPath,
    capabilities: ["stt"],
    contextLength: 4096,
    modalities: { supportsAudioInput: true },
    audio: {
      kind: "stt",
      responseFormats: ["json", "verbose_json", "text"],
      supportsStreaming: true,
      supportsRealtime: true,
      sampleRates: [16000],
    },
    placement: { compatibleBackends: ["llama_cpp-cpu"], backendPreference: ["llama_cpp-cpu"] },
  };
}

/** Base64 of `wav` as /v1/realtime takes audio: 24 kHz mono little-endian PCM16. */
export function realtimeAudio(wav: Uint8Array): string {
  const a = parseWav(wav);
  const bytes = pcm16Bytes(resample(a.samples, a.sampleRate, 24000));
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** A manual realtime turn: VAD off, the whole `wav` appended, then committed. */
export function sendManualTurn(ws: WebSocket, wav: Uint8Array): void {
  ws.send(JSON.stringify({ type: "session.update", session: { turn_detection: null } }));
  ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: realtimeAudio(wav) }));
  ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
}
