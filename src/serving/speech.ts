/**
 * Speech serving on this node: finds the runner for a speech model (here, or the node to forward to),
 * checks the model does what the route asks, and transcribes through whisper-server one request at a
 * time per engine (a bounded queue in front of it, since whisper-server holds a mutex per request).
 */
import { z } from "zod";
import { instanceBody } from "../cluster/instances.ts";
import { untag } from "../cluster/tagged.ts";
import { type Audio, encodeWav } from "../audio/pcm.ts";
import { resampleYielding } from "../audio/resample.ts";
import { fromWhisperVerbose, normaliseDelta, type Transcript } from "../audio/transcript.ts";
import { SseLineReader } from "./chat-stream.ts";
import { ServingError } from "./errors.ts";
import { type ModelCard, parseCard } from "../models/card.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { LocalRunner } from "../worker/runner.ts";
import { resolveTarget } from "./target.ts";

export const WHISPER_RATE = 16_000;
/** Requests allowed to wait for one whisper-server before the next is refused with 503. */

export type SpeechRoute = { local: LocalRunner; card: ModelCard } | { remote: string; card: ModelCard };

/** What routing a speech request needs of the node: its id, its replicated state and its runners. */
export interface SpeechPorts {
  nodeId: string;
  log: { readonly state: ClusterState };
  worker?: { runner(runnerId: string): LocalRunner | undefined };
}

/** The card of a placed model, read from the cluster state (any node can answer this). */
export function placedCard(ctx: SpeechPorts, modelId: string): ModelCard | null {
  for (const inst of Object.values(ctx.log.state.instances)) {
    const body = instanceBody(inst);
    if (body.shardAssignments.modelId !== modelId) continue;
    const shard = Object.values(body.shardAssignments.runnerToShard)[0];
    try {
      return parseCard(untag(shard).modelCard);
    } catch {
      return null;
    }
  }
  return null;
}

const WANT = {
  tts: "synthesise speech (it is not a text-to-speech model)",
  stt: "transcribe audio (it is not a speech-to-text model)",
} as const;

export function speechKind(card: ModelCard): "tts" | "stt" | null {
  if (card.audio?.kind) return card.audio.kind;
  if (card.tasks.includes("TextToSpeech")) return "tts";
  if (card.tasks.includes("SpeechToText") || card.modalities?.supports_audio_input) return "stt";
  return null;
}

/** Where a speech request for `modelId` goes; throws ServingErrors naming the reason. */
export function routeSpeech(ctx: SpeechPorts, modelId: string, want: "tts" | "stt"): SpeechRoute {
  const r = resolveTarget(ctx.log.state, modelId, ctx.nodeId);
  const card = placedCard(ctx, modelId);
  if (card && speechKind(card) !== want) {
    throw new ServingError("Invalid", `model ${modelId} cannot ${WANT[want]}`, "model");
  }
  if (!r.ok) {
    throw r.status === 404
      ? new ServingError("NotPlaced", r.message, "model")
      : new ServingError("NotReady", r.message);
  }
  if (!card) {
    throw new ServingError(
      "NotReady",
      `model ${modelId} cannot serve now: its placement carries no readable model card`,
    );
  }
  if (r.target.driverNode !== ctx.nodeId) return { remote: r.target.driverNode, card };
  const runner = ctx.worker?.runner(r.target.runnerId);
  if (!runner || runner.phase !== "ready") {
    const why = runner?.failure ??
      (runner ? `runner is ${runner.phase}` : "its runner is not running on this node yet");
    throw new ServingError("NotReady", `model ${modelId} cannot serve now: ${why}`);
  }
  return { local: runner, card };
}

/** One request at a time per engine, at most `maxQueued` waiting; the queue depth is visible for /metrics-like use. */
class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();
  waiting = 0;

  run<T>(job: () => Promise<T>, maxQueued: number): Promise<T> {
    if (this.waiting >= maxQueued) {
      throw new ServingError(
        "Busy",
        `the transcription engine is busy (${this.waiting} requests already waiting); retry shortly`,
      );
    }
    this.waiting++;
    const result = this.#tail.then(job);
    this.#tail = result.catch(() => {}).finally(() => this.waiting--);
    return result;
  }
}

const queues = new Map<string, SerialQueue>();

function queueFor(runnerId: string): SerialQueue {
  let q = queues.get(runnerId);
  if (!q) queues.set(runnerId, q = new SerialQueue());
  return q;
}

export interface TranscribeOptions {
  task: "transcribe" | "translate";
  language?: string;
  prompt?: string;
  temperature?: number;
  signal?: AbortSignal;
  /** speech.max_queued: requests that may wait for a whisper-server at once; one more is refused. */
  maxQueued: number;
}

const WhisperError = z.looseObject({ error: z.string() });

/** Called with each piece of text as the engine gives it (a whisper segment, or llama-server tokens). */
export type OnDelta = (text: string) => void;

/**
 * Transcribes mono audio with the runner's engine, resampled to 16 kHz WAV: whisper-server (one request
 * at a time, queued) or llama-server with an audio projector (token-streamed, its own parallel slots).
 */
export async function transcribeLocal(
  runner: LocalRunner,
  audio: Audio,
  o: TranscribeOptions,
  onDelta?: OnDelta,
): Promise<Transcript> {
  if (!runner.baseUrl) {
    throw new ServingError(
      "NotReady",
      `model ${runner.modelId} cannot serve now: ${runner.failure ?? `runner is ${runner.phase}`}`,
    );
  }
  const wav = encodeWav({
    samples: await resampleYielding(audio.samples, audio.sampleRate, WHISPER_RATE),
    sampleRate: WHISPER_RATE,
  });
  const duration = audio.samples.length / audio.sampleRate;
  if (runner.engineKind === "llama-server") {
    return transcribeWithLlama(runner, runner.baseUrl, wav, duration, o, onDelta);
  }
  if (runner.engineKind !== "whisper-server") {
    throw new ServingError(
      "Invalid",
      `model ${runner.modelId} is served by ${
        runner.engineKind ?? "an engine"
      }, which does not transcribe audio`,
    );
  }
  return transcribeWithWhisper(runner, runner.baseUrl, wav, duration, o).then((t) => {
    for (const s of t.segments) onDelta?.(s.text);
    return t;
  });
}

function transcribeWithWhisper(
  runner: LocalRunner,
  base: string,
  wav: Uint8Array,
  duration: number,
  o: TranscribeOptions,
): Promise<Transcript> {
  return queueFor(runner.runnerId).run(async () => {
    const form = new FormData();
    form.set("file", new Blob([wav as BlobPart], { type: "audio/wav" }), "audio.wav");
    form.set("response_format", "verbose_json");
    form.set("no_language_probabilities", "true");
    if (o.task === "translate") form.set("translate", "true");
    if (o.language) form.set("language", o.language);
    if (o.prompt) form.set("prompt", o.prompt);
    if (o.temperature !== undefined) form.set("temperature", String(o.temperature));
    let res: Response;
    try {
      res = await fetch(`${base}/inference`, { method: "POST", body: form, signal: o.signal });
    } catch (e) {
      throw new ServingError(
        "NotReady",
        `the transcription engine for ${runner.modelId} did not answer: ${
          runner.failure ?? (e as Error).message
        }`,
      );
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ServingError(
        "EngineFailed",
        `the transcription engine answered ${res.status} with non-JSON: ${text.slice(0, 200)}`,
      );
    }
    const err = WhisperError.safeParse(json);
    if (!res.ok || err.success) {
      const message = err.success ? err.data.error : text.slice(0, 200);
      throw new ServingError(
        res.status >= 400 && res.status < 500 ? "Invalid" : "EngineFailed",
        `the transcription engine refused the audio: ${message}`,
      );
    }
    return fromWhisperVerbose(json, o.task, duration);
  }, o.maxQueued);
}

/** Longest transcript asked of an audio LLM (whisper's own decoder stops at 224 tokens per 30 s window). */
const LLM_MAX_TOKENS = 448;

/** The tokens a clip of this length can need, at whisper's rate, so a model that rambles stops soon. */
export function transcriptTokenCap(durationSeconds: number): number {
  return Math.min(LLM_MAX_TOKENS, Math.ceil((Math.max(0, durationSeconds) / 30) * 224) + 16);
}

function instruction(o: TranscribeOptions): string {
  const lang = o.language ? ` The speech is in ${o.language}.` : "";
  const hint = o.prompt ? ` Context: ${o.prompt}` : "";
  return o.task === "translate"
    ? `Translate the speech in this audio into English. Answer with the translation only.${lang}${hint}`
    : `Transcribe the speech in this audio word for word. Answer with the transcript only.${lang}${hint}`;
}

/** A chat completion with the audio attached, streamed: each token is a delta. */
async function transcribeWithLlama(
  runner: LocalRunner,
  base: string,
  wav: Uint8Array,
  duration: number,
  o: TranscribeOptions,
  onDelta?: OnDelta,
): Promise<Transcript> {
  let b64 = "";
  for (let i = 0; i < wav.length; i += 0x8000) b64 += String.fromCharCode(...wav.subarray(i, i + 0x8000));
  const body = {
    messages: [{
      role: "user",
      content: [{ type: "input_audio", input_audio: { data: btoa(b64), format: "wav" } }, {
        type: "text",
        text: instruction(o),
      }],
    }],
    stream: true,
    max_tokens: transcriptTokenCap(duration),
    temperature: o.temperature ?? 0,
  };
  let res: Response;
  try {
    res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: o.signal,
    });
  } catch (e) {
    throw new ServingError(
      "NotReady",
      `the engine for ${runner.modelId} did not answer: ${runner.failure ?? (e as Error).message}`,
    );
  }
  if (!res.ok || !res.body) {
    const text = await res.text();
    throw new ServingError(
      res.status >= 400 && res.status < 500 ? "Invalid" : "EngineFailed",
      `the engine refused the audio: ${text.slice(0, 300)}`,
    );
  }
  const reader = new SseLineReader();
  let text = "";
  for await (const chunk of res.body) {
    for (const line of reader.push(chunk)) {
      if (line === "[DONE]") continue;
      let json: unknown;
      try {
        json = JSON.parse(line);
      } catch {
        continue;
      }
      const delta = normaliseDelta(json);
      if (delta) {
        text += delta;
        onDelta?.(delta);
      }
    }
  }
  const trimmed = text.trim();
  return {
    task: o.task,
    language: o.language ?? "unknown",
    duration,
    text: trimmed,
    segments: trimmed ? [{ id: 0, start: 0, end: duration, text: trimmed }] : [],
  };
}
