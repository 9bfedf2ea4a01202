/**
 * Speech test material: the whisper-server binary (env or scripts/build-whisper), a tiny random whisper
 * model and tiny random Piper voices generated once under tests/.tmp/models, espeak-ng test speech, and
 * speech cards in wire form.
 */
import { writeTinyAudioProjector } from "../../src/dev/gguf/tiny-audio-projector.ts";
import { writeTinyWhisper } from "../../src/dev/whisper/tiny.ts";
import { writeTinyPiper } from "../../src/dev/piper/tiny.ts";
import { expect } from "vitest";
import { parseWav, pcm16Bytes, resample, rms } from "../../src/audio/pcm.ts";
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

let silero: Promise<string> | undefined;

/** Silero VAD's model: SKULK_SILERO_VAD_MODEL, else placed in the cache by scripts/fetch-silero-vad (npm). */
export function sileroModel(): Promise<string> {
  const env = Deno.env.get("SKULK_SILERO_VAD_MODEL");
  if (env) return Promise.resolve(env);
  silero ??= new Deno.Command(`${ROOT}scripts/fetch-silero-vad`, { stdout: "piped", stderr: "inherit" })
    .output()
    .then((o) => {
      if (!o.success) throw new Error("scripts/fetch-silero-vad failed");
      return new TextDecoder().decode(o.stdout).trim();
    });
  return silero;
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

/** Directory of a tiny random Piper voice with this many speakers (written once, renamed into place). */
export async function tinyPiperVoice(speakers = 1, seed = 1): Promise<string> {
  const dir = `${MODELS_DIR}/tiny-piper-${speakers}spk-s${seed}`;
  await writeTinyPiper(dir, { speakers, seed });
  return dir;
}

/** A Piper card served by sherpa-onnx from a local voice directory (`ggufPath` names a registered local model). */
export function piperCardWire(modelId: string, dir: string, audio: Record<string, unknown> = {}) {
  return {
    modelId,
    storageSize: { inBytes: Deno.statSync(`${dir}/model.onnx`).size },
    nLayers: 1,
    hiddenSize: 32,
    supportsTensor: false,
    tasks: ["TextToSpeech"],
    family: "piper",
    quantization: "F32",
    baseModel: "tiny random piper",
    ggufPath: dir,
    capabilities: ["tts"],
    audio: {
      kind: "tts",
      defaultResponseFormat: "wav",
      responseFormats: ["wav", "pcm", "flac", "opus"],
      supportsStreaming: true,
      supportsVoiceListing: true,
      sampleRates: [22050],
      ...audio,
    },
    placement: { compatibleBackends: ["sherpa_onnx"], backendPreference: ["sherpa_onnx"] },
  };
}

/**
 * Checks a /v1/audio/speech answer is mono WAV at `rate` whose length is within `seconds` and whose level
 * is at least `minRms` (not silence); returns the decoded audio.
 */
export async function expectSpokenWav(
  res: Response,
  rate: number,
  seconds: [number, number],
  minRms: number,
) {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("audio/wav");
  expect(res.headers.get("x-audio-sample-rate")).toBe(String(rate));
  const wav = parseWav(new Uint8Array(await res.arrayBuffer()));
  expect(wav.sampleRate).toBe(rate);
  expect(wav.channels).toBe(1);
  const length = wav.samples.length / wav.sampleRate;
  expect(length).toBeGreaterThan(seconds[0]);
  expect(length).toBeLessThan(seconds[1]);
  expect(rms(wav.samples)).toBeGreaterThan(minRms);
  return wav;
}

/** Checks a streamed PCM answer's headers (raw s16le mono at `rate`). */
export function expectPcmHeaders(res: Response, rate: number): void {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("audio/pcm");
  expect(res.headers.get("x-audio-sample-rate")).toBe(String(rate));
  expect(res.headers.get("x-audio-channels")).toBe("1");
  expect(res.headers.get("x-audio-sample-format")).toBe("s16le");
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

/** `wav`'s samples at the realtime route's 24 kHz. */
export function pcm24(wav: Uint8Array): Float32Array {
  const a = parseWav(wav);
  return resample(a.samples, a.sampleRate, 24000);
}

function b64(samples: Float32Array): string {
  let bin = "";
  for (const b of pcm16Bytes(samples)) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Appends 24 kHz samples in 100 ms events, as a microphone would send them. */
export function sendAudio(ws: WebSocket, samples: Float32Array): void {
  for (let i = 0; i < samples.length; i += 2400) {
    ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: b64(samples.subarray(i, i + 2400)) }));
  }
}

/** Two utterances of `speech` (24 kHz) as a VAD should split them: 0.5 s of silence, speech, 1 s, speech, 1 s. */
export function sendTwoUtterances(ws: WebSocket, speech: Float32Array): void {
  const silence = new Float32Array(24000);
  sendAudio(ws, silence.subarray(0, 12000));
  sendAudio(ws, speech);
  sendAudio(ws, silence);
  sendAudio(ws, speech);
  sendAudio(ws, silence);
}

export interface RealtimeClient {
  ws: WebSocket;
  /** The next event (of this type, skipping others), waiting up to 30 s. */
  next: (type?: string) => Promise<Record<string, unknown>>;
  events: Record<string, unknown>[];
}

/** An open /v1/realtime session on `url` for `model`. */
export async function realtimeSession(url: string, model: string): Promise<RealtimeClient> {
  const ws = new WebSocket(`${url.replace("http", "ws")}/v1/realtime?model=${model}`);
  const events: Record<string, unknown>[] = [];
  const waiters: (() => void)[] = [];
  ws.onmessage = (e) => {
    events.push(JSON.parse(e.data));
    waiters.splice(0).forEach((w) => w());
  };
  let read = 0;
  const next = async (type?: string) => {
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      while (read < events.length) {
        const ev = events[read++];
        if (!type || ev.type === type) return ev;
      }
      await new Promise<void>((r) => (waiters.push(r), setTimeout(r, 500)));
    }
    throw new Error(`no ${type ?? "event"} within 30 s; got ${events.map((e) => e.type).join(", ")}`);
  };
  await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)));
  return { ws, next, events };
}

/** A manual realtime turn: VAD off, the whole `wav` appended, then committed. */
export function sendManualTurn(ws: WebSocket, wav: Uint8Array): void {
  ws.send(JSON.stringify({ type: "session.update", session: { turn_detection: null } }));
  ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: realtimeAudio(wav) }));
  ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
}
