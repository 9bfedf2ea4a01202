/**
 * Server-side voice activity detection for /v1/realtime: the turn_detection knobs upstream exposes
 * (aggressiveness 0..3, prefix padding, silence, minimum speech, maximum utterance), the detector interface,
 * and the energy detector over 10 ms frames (pure: feed samples, get speech start/stop positions).
 */
import { z } from "zod";

/** Which detector decides turns: RMS energy here, or Silero VAD in the node's sherpa-onnx child. */
export const DetectorSchema = z.enum(["energy", "silero"]);
export type Detector = z.infer<typeof DetectorSchema>;

export const TurnDetectionSchema = z.looseObject({
  type: z.enum(["server_vad", "none"]).default("server_vad"),
  /** Ours: the detector; absent means the node's `speech.vad` setting. */
  detector: DetectorSchema.optional(),
  aggressiveness: z.number().int().min(0).max(3).default(2),
  threshold: z.number().min(0).max(1).optional(),
  prefix_padding_ms: z.number().int().min(0).max(5000).default(200),
  silence_duration_ms: z.number().int().min(50).max(10_000).default(400),
  minimum_speech_ms: z.number().int().min(0).max(10_000).default(120),
  maximum_utterance_ms: z.number().int().min(1000).max(120_000).default(30_000),
});
export type TurnDetection = z.infer<typeof TurnDetectionSchema>;

/** RMS level a frame must reach to count as speech, by aggressiveness (higher = needs louder speech). */
const LEVELS = [0.004, 0.008, 0.015, 0.03];

export type VadEvent = { type: "speech_started"; atSample: number } | {
  type: "speech_stopped";
  atSample: number;
};

/** A detector: events in order, positions in samples since the session began (Silero answers asynchronously). */
export interface VoiceActivityDetector {
  push(samples: Float32Array): VadEvent[] | Promise<VadEvent[]>;
  /** Forget the state (after a manual commit or clear); positions keep counting. */
  reset(): void | Promise<void>;
  readonly inSpeech: boolean;
  /** Releases what the detector holds (Silero's socket). */
  close(): void;
}

export class EnergyVad implements VoiceActivityDetector {
  readonly #frame: number;
  readonly #level: number;
  #pending = new Float32Array(0);
  #consumed = 0;
  #inSpeech = false;
  #speechFrames = 0;
  #silenceFrames = 0;
  #startAt = 0;

  constructor(readonly config: TurnDetection, readonly sampleRate: number) {
    this.#frame = Math.round(sampleRate / 100);
    // OpenAI's `threshold` (0..1) maps onto the same RMS scale when given; else the aggressiveness level.
    this.#level = config.threshold !== undefined
      ? 0.001 + config.threshold * 0.05
      : LEVELS[config.aggressiveness];
  }

  get inSpeech(): boolean {
    return this.#inSpeech;
  }

  /** Where the current utterance began, including the prefix padding (in samples since the session began). */
  get speechStart(): number {
    return this.#startAt;
  }

  push(samples: Float32Array): VadEvent[] {
    const all = new Float32Array(this.#pending.length + samples.length);
    all.set(this.#pending);
    all.set(samples, this.#pending.length);
    const events: VadEvent[] = [];
    const ms = (frames: number) => frames * 10;
    let at = 0;
    for (; at + this.#frame <= all.length; at += this.#frame) {
      let sum = 0;
      for (let i = at; i < at + this.#frame; i++) sum += all[i] * all[i];
      const loud = Math.sqrt(sum / this.#frame) >= this.#level;
      const frameStart = this.#consumed + at;
      if (!this.#inSpeech) {
        this.#speechFrames = loud ? this.#speechFrames + 1 : 0;
        if (this.#speechFrames > 0 && ms(this.#speechFrames) >= Math.max(10, this.config.minimum_speech_ms)) {
          this.#inSpeech = true;
          this.#silenceFrames = 0;
          const firstLoud = frameStart - (this.#speechFrames - 1) * this.#frame;
          this.#startAt = Math.max(
            0,
            firstLoud - Math.round(this.config.prefix_padding_ms * this.sampleRate / 1000),
          );
          events.push({ type: "speech_started", atSample: this.#startAt });
        }
      } else {
        this.#silenceFrames = loud ? 0 : this.#silenceFrames + 1;
        const length = frameStart + this.#frame - this.#startAt;
        const tooLong = length * 1000 / this.sampleRate >= this.config.maximum_utterance_ms;
        if (ms(this.#silenceFrames) >= this.config.silence_duration_ms || tooLong) {
          this.#inSpeech = false;
          this.#speechFrames = 0;
          events.push({ type: "speech_stopped", atSample: frameStart + this.#frame });
        }
      }
    }
    this.#pending = all.slice(at);
    this.#consumed += at;
    return events;
  }

  /** Forget the state (after a manual commit or clear). */
  reset(): void {
    this.#inSpeech = false;
    this.#speechFrames = 0;
    this.#silenceFrames = 0;
  }

  close(): void {}
}
