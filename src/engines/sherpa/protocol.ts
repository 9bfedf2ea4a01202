/**
 * The wire between a node and its sherpa-onnx child process (host.ts): the child's launch config, its
 * health answer, a synthesis request, and the voice-activity socket's options and replies, as zod schemas.
 */
import { z } from "zod";

export const SHERPA_PATHS = { health: "/health", synthesize: "/synthesize", vad: "/vad" } as const;

/** Header of a synthesis answer: the PCM's sample rate (the body is raw s16le mono). */
export const SAMPLE_RATE_HEADER = "x-sample-rate";

/** The Piper/VITS or Kokoro files sherpa-onnx's OfflineTts loads (absolute paths). */
export const TtsModelSchema = z.discriminatedUnion("kind", [
  z.object({
    kind: z.literal("vits"),
    model: z.string().min(1),
    tokens: z.string().min(1),
    /** espeak-ng's data directory: phonemes come from espeak-ng (Piper). */
    dataDir: z.string().optional(),
    /** A word-to-token lexicon, for VITS voices that need no espeak-ng. */
    lexicon: z.string().optional(),
  }),
  z.object({
    kind: z.literal("kokoro"),
    model: z.string().min(1),
    voices: z.string().min(1),
    tokens: z.string().min(1),
    dataDir: z.string().min(1),
    /** Comma-separated lexicon files (Kokoro 1.x multi-language builds). */
    lexicon: z.string().optional(),
  }),
]);
export type TtsModel = z.infer<typeof TtsModelSchema>;

export const HostConfigSchema = z.object({
  port: z.number().int().min(1).max(65535),
  /** onnxruntime's intra-op threads per model. */
  threads: z.number().int().min(1).max(64).default(1),
  tts: TtsModelSchema.optional(),
  /** Silero VAD's ONNX file: the child then answers voice-activity sockets. */
  vad: z.object({ model: z.string().min(1) }).optional(),
}).refine((c) => c.tts || c.vad, "the child needs a speech model (tts) or a VAD model (vad)");
export type HostConfig = z.input<typeof HostConfigSchema>;

export const HealthSchema = z.object({
  ok: z.literal(true),
  tts: z.object({ sampleRate: z.number().int().positive(), speakers: z.number().int().nonnegative() })
    .nullable(),
  vad: z.boolean(),
});
export type Health = z.infer<typeof HealthSchema>;

export const SynthesisRequestSchema = z.object({
  text: z.string().min(1, "text must not be empty"),
  /** Speaker id: the voice's index in a multi-speaker model, 0 otherwise. */
  sid: z.number().int().min(0),
  /** sherpa-onnx passes length_scale = 1/speed to the model. */
  speed: z.number().min(0.25).max(4),
});
export type SynthesisRequest = z.infer<typeof SynthesisRequestSchema>;

/** Rate Silero VAD runs at; audio is sent to the child as float32 samples at this rate. */
export const VAD_RATE = 16_000;

/** Query of the voice-activity socket (seconds, as sherpa-onnx's Silero config takes them). */
export const VadOptionsSchema = z.object({
  threshold: z.coerce.number().min(0).max(1),
  minSilence: z.coerce.number().min(0.01).max(10),
  minSpeech: z.coerce.number().min(0).max(10),
  maxSpeech: z.coerce.number().min(1).max(120),
});
export type VadOptions = z.infer<typeof VadOptionsSchema>;

/** Positions are in samples at VAD_RATE since the socket opened. */
export const VadEventSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("start"), sample: z.number().int().nonnegative() }),
  z.object({
    type: z.literal("end"),
    start: z.number().int().nonnegative(),
    end: z.number().int().nonnegative(),
  }),
]);
export type VadWireEvent = z.infer<typeof VadEventSchema>;

/** One reply per message the socket receives (audio or "reset"), in order. */
export const VadReplySchema = z.union([
  z.object({ events: z.array(VadEventSchema) }),
  z.object({ error: z.string() }),
]);
export type VadReply = z.infer<typeof VadReplySchema>;
