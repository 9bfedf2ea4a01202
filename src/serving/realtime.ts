/**
 * One /v1/realtime transcription session: OpenAI's realtime events over a WebSocket (session.update,
 * input_audio_buffer.append/commit/clear, server VAD, transcription delta/completed, error), 24 kHz PCM16
 * in, one transcription at a time in commit order. Transport-free: it reads events and calls `send`.
 */
import { z } from "zod";
import { pcm16FromBytes } from "../audio/pcm.ts";
import type { Transcript } from "../audio/transcript.ts";
import {
  type Detector,
  EnergyVad,
  type TurnDetection,
  TurnDetectionSchema,
  type VoiceActivityDetector,
} from "../audio/vad.ts";

export const REALTIME_RATE = 24_000;
/** Limits, documented in docs/speech.md. */
export const REALTIME_LIMITS = {
  /** Largest client event (a base64 append of about 10 s of 24 kHz PCM16 fits). */
  maxEventBytes: 1 << 20,
  /** Longest uncommitted buffer before the server commits it itself. */
  maxBufferSeconds: 120,
  /** Shortest audio a commit accepts (OpenAI refuses under 100 ms too). */
  minCommitMs: 100,
} as const;

export const CLOSE = {
  normal: 1000,
  tooBig: 1009,
  engineFailed: 1011,
  idle: 4408,
} as const;

const SessionUpdate = z.looseObject({
  type: z.enum(["session.update", "transcription_session.update"]),
  session: z.looseObject({
    input_audio_format: z.literal("pcm16", {
      message: "only pcm16 (24 kHz, mono, little-endian) is accepted",
    }).optional(),
    input_audio_transcription: z.looseObject({
      model: z.string().optional(),
      language: z.string().optional(),
      prompt: z.string().optional(),
    }).nullish(),
    turn_detection: TurnDetectionSchema.nullish(),
  }),
});
const Append = z.looseObject({ type: z.literal("input_audio_buffer.append"), audio: z.string() });
const Simple = z.looseObject({ type: z.enum(["input_audio_buffer.commit", "input_audio_buffer.clear"]) });

/**
 * Makes a session's detector: energy here, Silero in the node's sherpa-onnx child. Throws (with the
 * reason) when the detector asked for is not available on this node.
 */
export interface VadFactory {
  /** The node's `speech.vad` setting: used when turn_detection names no detector. */
  defaultDetector: Detector;
  make(turn: TurnDetection & { detector: Detector }, sampleRate: number): VoiceActivityDetector;
}

export const ENERGY_ONLY: VadFactory = {
  defaultDetector: "energy",
  make: (turn, rate) => {
    if (turn.detector !== "energy") throw new Error(`the ${turn.detector} detector is not available here`);
    return new EnergyVad(turn, rate);
  },
};

type Detection = { turn: TurnDetection & { detector: Detector }; vad: VoiceActivityDetector };

export type Transcribe = (
  samples: Float32Array,
  sampleRate: number,
  o: { language?: string; prompt?: string },
  onDelta: (text: string) => void,
) => Promise<Transcript>;

function b64decode(s: string): Uint8Array | null {
  try {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return null;
  }
}

let counter = 0;
const id = (prefix: string) =>
  `${prefix}_${Date.now().toString(36)}${(counter++).toString(36).padStart(4, "0")}`;

/** The realtime `error` event (OpenAI's shape), for a session here or one proxied to another node. */
export function errorEvent(
  code: string,
  message: string,
  clientEventId?: string,
  type = "invalid_request_error",
): Record<string, unknown> {
  return {
    type: "error",
    event_id: id("event"),
    error: { type, code, message, param: null, event_id: clientEventId ?? null },
  };
}

export class RealtimeSession {
  readonly id = id("sess");
  #turn: (TurnDetection & { detector: Detector }) | null = null;
  #vad: VoiceActivityDetector | null = null;
  /** Client events are handled one after another: a detector may answer asynchronously (Silero). */
  #input: Promise<void> = Promise.resolve();
  #language: string | undefined;
  #prompt: string | undefined;
  /** Audio not yet committed, and where it starts on the session's clock (samples since the first append). */
  #chunks: Float32Array[] = [];
  #buffered = 0;
  #bufferStart = 0;
  #received = 0;
  #itemId = id("item");
  #previousItem: string | null = null;
  #work: Promise<void> = Promise.resolve();
  #pending = 0;
  #closed = false;

  constructor(
    readonly model: string,
    readonly send: (event: Record<string, unknown>) => void,
    readonly transcribe: Transcribe,
    readonly close: (code: number, reason: string) => void,
    readonly vads: VadFactory = ENERGY_ONLY,
  ) {}

  /** Turn detection with its detector resolved, and that detector; throws when it is not available. */
  #detect(turn: TurnDetection): Detection {
    const resolved = { ...turn, detector: turn.detector ?? this.vads.defaultDetector };
    return { turn: resolved, vad: this.vads.make(resolved, REALTIME_RATE) };
  }

  #emit(type: string, body: Record<string, unknown> = {}) {
    if (!this.#closed) this.send({ type, event_id: id("event"), ...body });
  }

  error(code: string, message: string, clientEventId?: string, type = "invalid_request_error") {
    if (!this.#closed) this.send(errorEvent(code, message, clientEventId, type));
  }

  #describe() {
    return {
      id: this.id,
      object: "realtime.transcription_session",
      model: this.model,
      input_audio_format: "pcm16",
      input_audio_transcription: {
        model: this.model,
        language: this.#language ?? null,
        prompt: this.#prompt ?? null,
      },
      turn_detection: this.#turn,
    };
  }

  start() {
    const turn = TurnDetectionSchema.parse({});
    let why: string | null = null;
    try {
      ({ turn: this.#turn, vad: this.#vad } = this.#detect(turn));
    } catch (e) {
      // The node's default detector cannot run: say so, and detect turns by energy instead.
      why = (e as Error).message;
      ({ turn: this.#turn, vad: this.#vad } = this.#detectEnergy(turn));
    }
    this.#emit("session.created", { session: this.#describe() });
    if (why) {
      this.error(
        "vad_unavailable",
        `${why}; this session detects turns by energy`,
        undefined,
        "server_error",
      );
    }
  }

  #detectEnergy(turn: TurnDetection): Detection {
    const resolved = { ...turn, detector: "energy" as const };
    return { turn: resolved, vad: new EnergyVad(resolved, REALTIME_RATE) };
  }

  /** Waits for events and transcriptions in flight (tests and shutdown). */
  async idle(): Promise<void> {
    await this.#input;
    await this.#work;
  }

  /** Turns committed and not yet answered: a session waiting on them is not idle. */
  get pending(): number {
    return this.#pending;
  }

  shutdown() {
    this.#closed = true;
    this.#vad?.close();
  }

  handle(raw: string) {
    if (raw.length > REALTIME_LIMITS.maxEventBytes) {
      this.error(
        "event_too_large",
        `events are limited to ${REALTIME_LIMITS.maxEventBytes} bytes; send audio in smaller appends`,
      );
      this.close(CLOSE.tooBig, "event too large");
      return;
    }
    this.#input = this.#input.then(() => this.#handleEvent(raw)).catch((e) => {
      // Only the detector fails here (Silero's child gone): the session cannot find turns any more.
      this.error(
        "vad_failed",
        `voice activity detection failed: ${(e as Error).message}`,
        undefined,
        "server_error",
      );
      this.close(CLOSE.engineFailed, "voice activity detection failed");
    });
  }

  async #handleEvent(raw: string): Promise<void> {
    if (this.#closed) return;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (e) {
      return this.error("invalid_json", `the event is not valid JSON: ${(e as Error).message}`);
    }
    const type = (json as { type?: unknown })?.type;
    const eventId = typeof (json as { event_id?: unknown })?.event_id === "string"
      ? (json as { event_id: string }).event_id
      : undefined;
    if (type === "session.update" || type === "transcription_session.update") {
      const p = SessionUpdate.safeParse(json);
      if (!p.success) {
        return this.error(
          "invalid_value",
          `session.update: ${p.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
          eventId,
        );
      }
      const s = p.data.session;
      if (s.input_audio_transcription) {
        this.#language = s.input_audio_transcription.language ?? this.#language;
        this.#prompt = s.input_audio_transcription.prompt ?? this.#prompt;
      }
      if (s.turn_detection !== undefined) {
        const off = s.turn_detection === null || s.turn_detection.type === "none";
        let next: Detection | null = null;
        if (!off) {
          try {
            next = this.#detect(s.turn_detection!);
          } catch (e) {
            return this.error("invalid_value", `session.turn_detection: ${(e as Error).message}`, eventId);
          }
        }
        this.#vad?.close();
        this.#turn = next?.turn ?? null;
        this.#vad = next?.vad ?? null;
      }
      return this.#emit(type === "session.update" ? "session.updated" : "transcription_session.updated", {
        session: this.#describe(),
      });
    }
    if (type === "input_audio_buffer.append") {
      const p = Append.safeParse(json);
      const bytes = p.success ? b64decode(p.data.audio) : null;
      if (!bytes) {
        return this.error(
          "invalid_value",
          "input_audio_buffer.append needs `audio`: base64 of 24 kHz mono PCM16",
          eventId,
        );
      }
      return await this.#append(pcm16FromBytes(bytes));
    }
    if (Simple.safeParse(json).success) {
      if (type === "input_audio_buffer.clear") {
        this.#drop(this.#buffered);
        await this.#vad?.reset();
        return this.#emit("input_audio_buffer.cleared");
      }
      return await this.#commit(eventId);
    }
    this.error(
      "unknown_event",
      `unknown event type ${JSON.stringify(type)}; see docs/speech.md for the events /v1/realtime accepts`,
      eventId,
    );
  }

  async #append(samples: Float32Array) {
    if (samples.length === 0) return;
    this.#chunks.push(samples);
    this.#buffered += samples.length;
    this.#received += samples.length;
    for (const ev of (await this.#vad?.push(samples)) ?? []) {
      const ms = Math.round(ev.atSample * 1000 / REALTIME_RATE);
      if (ev.type === "speech_started") {
        // Drop the silence before the utterance (less the prefix padding the detector already kept).
        this.#drop(Math.max(0, ev.atSample - this.#bufferStart));
        this.#emit("input_audio_buffer.speech_started", { audio_start_ms: ms, item_id: this.#itemId });
      } else {
        this.#emit("input_audio_buffer.speech_stopped", { audio_end_ms: ms, item_id: this.#itemId });
        this.#commitUpTo(ev.atSample - this.#bufferStart, undefined);
      }
    }
    if (!this.#vad?.inSpeech && this.#vad && this.#buffered > REALTIME_RATE * 2) {
      // Silence with VAD on: keep only the last second (enough for the prefix padding).
      this.#drop(this.#buffered - REALTIME_RATE);
    }
    if (this.#buffered > REALTIME_LIMITS.maxBufferSeconds * REALTIME_RATE) {
      this.#commitUpTo(this.#buffered, undefined);
    }
  }

  /** Removes `n` samples from the front of the buffer. */
  #drop(n: number) {
    let left = Math.min(n, this.#buffered);
    this.#bufferStart += left;
    this.#buffered -= left;
    while (left > 0 && this.#chunks.length) {
      const c = this.#chunks[0];
      if (c.length <= left) {
        left -= c.length;
        this.#chunks.shift();
      } else {
        this.#chunks[0] = c.subarray(left);
        left = 0;
      }
    }
  }

  #take(n: number): Float32Array {
    const out = new Float32Array(Math.min(n, this.#buffered));
    let at = 0;
    for (const c of this.#chunks) {
      if (at >= out.length) break;
      const part = c.subarray(0, out.length - at);
      out.set(part, at);
      at += part.length;
    }
    this.#drop(out.length);
    return out;
  }

  async #commit(eventId: string | undefined) {
    if (this.#buffered * 1000 / REALTIME_RATE < REALTIME_LIMITS.minCommitMs) {
      return this.error(
        "input_audio_buffer_commit_empty",
        `buffer too small: expected at least ${REALTIME_LIMITS.minCommitMs}ms of audio, have ${
          Math.round(this.#buffered * 1000 / REALTIME_RATE)
        }ms`,
        eventId,
      );
    }
    await this.#vad?.reset();
    this.#commitUpTo(this.#buffered, eventId);
  }

  #commitUpTo(n: number, _eventId: string | undefined) {
    const samples = this.#take(n);
    const itemId = this.#itemId;
    this.#emit("input_audio_buffer.committed", { previous_item_id: this.#previousItem, item_id: itemId });
    this.#previousItem = itemId;
    this.#itemId = id("item");
    const language = this.#language;
    const prompt = this.#prompt;
    this.#pending++;
    this.#work = this.#work.then(async () => {
      if (this.#closed) return;
      try {
        const t = await this.transcribe(samples, REALTIME_RATE, { language, prompt }, (delta) => {
          this.#emit("conversation.item.input_audio_transcription.delta", {
            item_id: itemId,
            content_index: 0,
            delta,
          });
        });
        this.#emit("conversation.item.input_audio_transcription.completed", {
          item_id: itemId,
          content_index: 0,
          transcript: t.text,
          usage: { type: "duration", seconds: Math.round(t.duration * 1000) / 1000 },
        });
      } catch (e) {
        const message = (e as Error).message;
        this.#emit("conversation.item.input_audio_transcription.failed", {
          item_id: itemId,
          content_index: 0,
          error: { type: "transcription_error", code: "engine_error", message },
        });
        this.error("engine_error", message, undefined, "server_error");
      }
    }).finally(() => this.#pending--);
  }
}
