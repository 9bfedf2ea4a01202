/**
 * Speech synthesis on this node: the voices a text-to-speech runner offers, which one a request names,
 * and the PCM its engine speaks (espeak-ng run per request, or the runner's sherpa-onnx child over HTTP).
 */
import { z } from "zod";
import { ESPEAK_SAMPLE_RATE, espeakPcm, espeakVoices } from "../engines/espeak.ts";
import { SAMPLE_RATE_HEADER, SHERPA_PATHS, type SynthesisRequest } from "../engines/sherpa/protocol.ts";
import type { LocalRunner } from "../worker/runner.ts";
import { ServingError } from "./errors.ts";
import type { SpeechRoute } from "./speech.ts";

/** OpenAI's built-in voice names: accepted everywhere and spoken with the model's default voice. */
export const OPENAI_VOICES: ReadonlySet<string> = new Set([
  "alloy",
  "ash",
  "ballad",
  "coral",
  "echo",
  "fable",
  "nova",
  "onyx",
  "sage",
  "shimmer",
  "verse",
]);

export interface VoiceList {
  ids: string[];
  fallback: string;
  list: Record<string, unknown>[];
}

export async function voicesOf(route: SpeechRoute): Promise<VoiceList> {
  const audio = route.card.audio;
  const local = "local" in route ? route.local : null;
  if (local?.voice) {
    // A neural voice's table already puts the card's voices first (engines/sherpa/voice-dir.ts).
    const v = local.voice;
    return {
      ids: v.voices.map((x) => x.id),
      fallback: v.defaultVoice,
      list: v.voices.map((x) => ({
        id: x.id,
        name: x.name,
        language: x.language,
        languages: x.language ? [x.language] : [],
        speaker_id: x.sid,
      })),
    };
  }
  if (audio?.voice_catalog?.length || audio?.voices?.length) {
    const list = audio.voice_catalog?.length
      ? audio.voice_catalog.map((v) => ({ id: v.id, name: v.name, languages: v.preferred_languages ?? [] }))
      : audio.voices!.map((v) => ({ id: v, name: v, languages: [] }));
    return { ids: list.map((v) => v.id), fallback: audio.default_voice ?? list[0].id, list };
  }
  if (local?.engineKind === "espeak-ng" && local.command) {
    const list = await espeakVoices(local.command);
    // A language code espeak-ng resolves itself ("en" -> en-gb) is accepted as a voice too.
    const ids = [...new Set([...list.map((v) => v.id), ...list.flatMap((v) => v.aliases)])].sort();
    return {
      ids,
      fallback: audio?.default_voice ?? "en",
      list: list.map(({ aliases: _, ...v }) => ({ ...v, languages: [v.language] })),
    };
  }
  return { ids: [], fallback: audio?.default_voice ?? "en", list: [] };
}

/** The voice a request speaks with: OpenAI's names map to the default; an unknown voice is a 400. */
export function pickVoice(voices: VoiceList, requested: string | undefined, model: string): string {
  let voice = requested ?? voices.fallback;
  if (OPENAI_VOICES.has(voice) && !voices.ids.includes(voice)) voice = voices.fallback;
  if (voices.ids.length && !voices.ids.includes(voice)) {
    throw new ServingError(
      "Invalid",
      `voice ${voice} is not offered by ${model}; GET /v1/audio/voices?model=${model} lists them`,
      "voice",
    );
  }
  return voice;
}

export interface Speech {
  /** Raw little-endian 16-bit mono PCM, as the engine produces it. */
  pcm: ReadableStream<Uint8Array>;
  sampleRate: number;
}

const EngineError = z.looseObject({ error: z.string() });

/** Asks the runner's sherpa-onnx child to speak; its answer streams sentence by sentence. */
async function sherpaPcm(runner: LocalRunner, req: SynthesisRequest, signal?: AbortSignal): Promise<Speech> {
  if (!runner.baseUrl) {
    throw new ServingError(
      "NotReady",
      `model ${runner.modelId} cannot serve now: ${runner.failure ?? `runner is ${runner.phase}`}`,
    );
  }
  let res: Response;
  try {
    res = await fetch(`${runner.baseUrl}${SHERPA_PATHS.synthesize}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(req),
      signal,
    });
  } catch (e) {
    throw new ServingError(
      "NotReady",
      `the voice engine for ${runner.modelId} did not answer: ${runner.failure ?? (e as Error).message}`,
    );
  }
  if (!res.ok || !res.body) {
    const text = await res.text();
    const parsed = EngineError.safeParse((() => {
      try {
        return JSON.parse(text);
      } catch {
        return null;
      }
    })());
    const why = parsed.success ? parsed.data.error : text.slice(0, 200);
    throw new ServingError(
      res.status === 503 ? "NotReady" : "EngineFailed",
      `the voice engine for ${runner.modelId} failed: ${why}`,
    );
  }
  return {
    pcm: res.body,
    sampleRate: Number(res.headers.get(SAMPLE_RATE_HEADER)) || runner.voice!.sampleRate,
  };
}

/** Speaks `text` with the runner's engine. */
export async function synthesize(
  runner: LocalRunner,
  o: { text: string; voice: string; speed: number; signal?: AbortSignal },
): Promise<Speech> {
  if (runner.engineKind === "sherpa-onnx" && runner.voice) {
    const sid = runner.voice.voices.find((v) => v.id === o.voice)?.sid ?? 0;
    return sherpaPcm(runner, { text: o.text, sid, speed: o.speed }, o.signal);
  }
  if (runner.engineKind === "espeak-ng" && runner.command) {
    return { pcm: await espeakPcm(runner.command, o), sampleRate: ESPEAK_SAMPLE_RATE };
  }
  throw new ServingError(
    "NotReady",
    `model ${runner.modelId} cannot serve now: its engine (${runner.engineKind}) does not synthesise speech on this node`,
  );
}
