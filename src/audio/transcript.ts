/**
 * Transcripts in OpenAI's response formats (json, verbose_json, text, srt, vtt), built from one segment
 * list whichever engine produced it, and the SSE events of a streamed transcription.
 */
import { z } from "zod";

export const RESPONSE_FORMATS = ["json", "verbose_json", "text", "srt", "vtt"] as const;
export type ResponseFormat = (typeof RESPONSE_FORMATS)[number];

export const SegmentSchema = z.looseObject({
  id: z.number().int().optional(),
  start: z.number().optional(),
  end: z.number().optional(),
  text: z.string(),
});
export type Segment = z.infer<typeof SegmentSchema>;

/** whisper-server's verbose_json answer (the fields we use). */
export const WhisperVerboseSchema = z.looseObject({
  text: z.string(),
  language: z.string().optional(),
  duration: z.number().optional(),
  segments: z.array(SegmentSchema).default([]),
});

export interface Transcript {
  task: "transcribe" | "translate";
  language: string;
  duration: number;
  text: string;
  segments: { id: number; start: number; end: number; text: string }[];
}

export function fromWhisperVerbose(raw: unknown, task: Transcript["task"], duration: number): Transcript {
  const v = WhisperVerboseSchema.parse(raw);
  // whisper.cpp pads input to 30 s windows, so a segment can claim to end past the audio: clamp it.
  const clamp = (x: number) => Math.min(Math.max(0, x), duration);
  const segments = v.segments.map((s, i) => ({
    id: i,
    start: clamp(s.start ?? 0),
    end: clamp(s.end ?? duration),
    text: s.text,
  }));
  return { task, language: v.language ?? "unknown", duration, text: v.text.trim(), segments };
}

function clock(seconds: number, sep: "," | "."): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(h)}:${pad(m)}:${pad(s)}${sep}${pad(ms % 1000, 3)}`;
}

/** The body and content type of an answer in the asked format. */
export function renderTranscript(
  t: Transcript,
  format: ResponseFormat,
): { body: string; contentType: string } {
  switch (format) {
    case "json":
      return { body: JSON.stringify({ text: t.text }), contentType: "application/json" };
    case "verbose_json":
      return { body: JSON.stringify(t), contentType: "application/json" };
    case "text":
      return { body: t.text + "\n", contentType: "text/plain; charset=utf-8" };
    case "srt":
      return {
        body: t.segments.map((s, i) =>
          `${i + 1}\n${clock(s.start, ",")} --> ${clock(s.end, ",")}\n${s.text.trim()}\n`
        ).join("\n"),
        contentType: "application/x-subrip; charset=utf-8",
      };
    case "vtt":
      return {
        body: "WEBVTT\n\n" +
          t.segments.map((s) => `${clock(s.start, ".")} --> ${clock(s.end, ".")}\n${s.text.trim()}\n`).join(
            "\n",
          ),
        contentType: "text/vtt; charset=utf-8",
      };
  }
}

export function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * The streamed form: `transcription.delta` events (a whisper segment each, or llama-server tokens as they
 * come), then `transcription.completed` with the full text and usage in seconds.
 */
export function transcriptEvents(t: Transcript): string[] {
  return [...t.segments.map((s) => deltaEvent(s.text)), completedEvent(t)];
}

export function deltaEvent(delta: string): string {
  return sse("transcription.delta", { type: "transcription.delta", delta });
}

export function completedEvent(t: Transcript): string {
  return sse("transcription.completed", {
    type: "transcription.completed",
    text: t.text,
    language: t.language,
    duration: t.duration,
    usage: { type: "duration", seconds: Math.round(t.duration * 1000) / 1000 },
  });
}

export function transcriptErrorEvent(message: string): string {
  return sse("transcription.error", { type: "transcription.error", error: { message } });
}

/**
 * Normalises a delta as engines emit it: OpenAI's `transcript.text.delta`, our `transcription.delta`, or
 * llama-server's chat chunk (`choices[0].delta.content`). Null when the chunk carries no text.
 */
export function normaliseDelta(chunk: unknown): string | null {
  if (!chunk || typeof chunk !== "object") return null;
  const c = chunk as Record<string, unknown>;
  if (
    (c.type === "transcript.text.delta" || c.type === "transcription.delta") && typeof c.delta === "string"
  ) return c.delta;
  const choices = c.choices as { delta?: { content?: unknown }; text?: unknown }[] | undefined;
  const content = choices?.[0]?.delta?.content ?? choices?.[0]?.text;
  return typeof content === "string" && content.length > 0 ? content : null;
}
