/**
 * The speech routes in upstream's (OpenAI's) shapes: /v1/audio/speech, /v1/audio/voices,
 * /v1/audio/transcriptions and /v1/audio/translations (the /v1/realtime WebSocket is realtime.ts). Each
 * finds the placed speech model (here, or forwards to the node that drives it) and answers in the asked format.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import { AudioFormatError, durationSeconds, pcm16FromBytes, wavHeader } from "../../audio/pcm.ts";
import { encodeFlac } from "../../audio/flac.ts";
import { encodeOggOpus } from "../../audio/opus.ts";
import { encodeMp3FromPcm16, Mp3Encoder, mp3EncoderStream } from "../../audio/mp3.ts";
import { decodeAudio, UnsupportedAudio } from "../../audio/decode.ts";
import {
  completedEvent,
  deltaEvent,
  renderTranscript,
  RESPONSE_FORMATS,
  sse,
  transcriptErrorEvent,
  transcriptEvents,
} from "../../audio/transcript.ts";
import { forwardRequest } from "../../serving/forward.ts";
import { routeSpeech, type SpeechRoute, transcribeLocal } from "../../serving/speech.ts";
import { pickVoice, synthesize, voicesOf } from "../../serving/synthesis.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, badRequest, describeZodError, readJson } from "../errors.ts";
import { holding, slotsOf } from "../slots.ts";
import { describe } from "../openapi.ts";

/** Upload limit of /v1/audio/transcriptions and /translations (OpenAI's). */
export const MAX_UPLOAD_BYTES = 25 * 1024 * 1024;
/** The multipart upload routes: they keep MAX_UPLOAD_BYTES instead of the node's JSON body limit. */
export const UPLOAD_PATHS: readonly string[] = ["/v1/audio/transcriptions", "/v1/audio/translations"];
export const MAX_SPEECH_INPUT = 4096;
const SPEECH_FORMATS = ["wav", "pcm", "mp3", "flac", "opus", "aac"] as const;
/** What engine PCM can be encoded to in-process. */
const ENCODABLE = new Set(["wav", "pcm", "mp3", "flac", "opus"]);
const CONTENT_TYPES: Record<string, string> = { wav: "audio/wav", pcm: "audio/pcm", mp3: "audio/mpeg" };
/** Formats encoded whole from the finished audio (their frames or pages need whole blocks). */
const WHOLE = new Set(["flac", "opus"]);

export const SpeechRequest = z.looseObject({
  model: z.string().min(1, "must name a model"),
  input: z.string().min(1, "must not be empty").max(
    MAX_SPEECH_INPUT,
    `must be at most ${MAX_SPEECH_INPUT} characters`,
  ),
  voice: z.string().min(1).optional(),
  speed: z.number().min(0.25).max(4).optional(),
  response_format: z.enum(SPEECH_FORMATS).optional(),
  stream: z.boolean().optional(),
  /** OpenAI's: `audio` streams the bytes, `sse` streams them base64 in speech.audio.delta events. */
  stream_format: z.enum(["audio", "sse"]).optional(),
});

describe({
  method: "post",
  path: "/v1/audio/speech",
  summary: "Text to speech (mp3, wav, pcm, flac or opus; stream=true streams mp3, wav and pcm as spoken)",
  tag: "audio",
  body: SpeechRequest,
});
describe({
  method: "get",
  path: "/v1/audio/voices",
  summary: "The voices a speech model offers",
  tag: "audio",
  query: { model: "a placed text-to-speech model" },
});
describe({
  method: "post",
  path: "/v1/audio/transcriptions",
  summary: "Speech to text (multipart, up to 25 MiB; WAV, MP3, FLAC, OGG, WebM)",
  tag: "audio",
});
describe({
  method: "post",
  path: "/v1/audio/translations",
  summary: "Speech to English text (multipart, like transcriptions)",
  tag: "audio",
});

export const audioRoutes = new Hono<ApiEnv>();

async function forwarded(
  c: Context<ApiEnv>,
  route: { remote: string },
  body: string | Uint8Array,
): Promise<Response> {
  const res = await forwardRequest(c.var.node, route.remote, c.req.raw, body);
  if ("error" in res) throw new ApiError(503, res.error);
  return res;
}

function pcmHeaders(rate: number): Record<string, string> {
  return { "X-Audio-Sample-Rate": String(rate), "X-Audio-Channels": "1", "X-Audio-Sample-Format": "s16le" };
}

audioRoutes.post("/v1/audio/speech", async (c) => {
  const req = await readJson(c, SpeechRequest);
  const raw = await c.req.text(); // hono keeps the body: the same text goes on when forwarded
  const route = routeSpeech(c.var.node, req.model, "tts");
  if ("remote" in route) return forwarded(c, route, raw);
  const runner = route.local;
  const format = req.response_format ??
    (route.card.audio?.default_response_format as typeof req.response_format) ?? "mp3";
  if (!ENCODABLE.has(format)) {
    throw new ApiError(
      400,
      `response_format ${format} is not available from ${runner.engineKind}; use mp3, wav, pcm, flac or opus`,
      { param: "response_format", type: "invalid_request_error" },
    );
  }
  const voice = pickVoice(await voicesOf(route), req.voice, req.model);
  // FLAC and Opus are encoded whole, so they are sent when synthesis ends even when streaming is asked.
  const streamed = (req.stream || req.stream_format === "sse") && !WHOLE.has(format);
  const release = streamed ? slotsOf(c.var.node).streams.take() : undefined;
  let synthesis;
  try {
    synthesis = await synthesize(runner, {
      text: req.input,
      voice,
      speed: req.speed ?? 1,
      signal: c.req.raw.signal,
    });
  } catch (e) {
    release?.();
    throw e;
  }
  const { pcm, sampleRate } = synthesis;
  const headers = { ...pcmHeaders(sampleRate), "X-Audio-Voice": voice };
  if (release) {
    // Streamed WAV carries an open-ended header (size 0xFFFFFFFF), as streaming encoders write it; MP3
    // frames go out as each is coded.
    const audio = format === "wav"
      ? withPrefix(wavHeader(sampleRate, 0xffffffff - 36), pcm)
      : format === "mp3"
      ? pcm.pipeThrough(mp3EncoderStream(new Mp3Encoder(sampleRate)))
      : pcm;
    const body = holding(req.stream_format === "sse" ? speechEvents(audio) : audio, release);
    if (req.stream_format === "sse") {
      return new Response(body, {
        headers: { ...headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache" },
      });
    }
    return new Response(body, { headers: { ...headers, "Content-Type": CONTENT_TYPES[format] } });
  }
  let bytes: Uint8Array;
  try {
    if (format === "mp3") {
      // Coded as the speech arrives: a long answer is not one long encoding at the end.
      const mp3 = await encodeMp3FromPcm16(pcm, sampleRate);
      return new Response(mp3 as BodyInit, { headers: { ...headers, "Content-Type": CONTENT_TYPES.mp3 } });
    }
    bytes = new Uint8Array(await new Response(pcm).arrayBuffer());
  } catch (e) {
    throw new ApiError(502, (e as Error).message);
  }
  bytes = bytes.subarray(0, bytes.length - (bytes.length % 2));
  if (format === "opus") {
    const opus = await encodeOggOpus(pcm16FromBytes(bytes), sampleRate);
    return new Response(opus as BodyInit, {
      headers: { ...headers, "Content-Type": "audio/ogg; codecs=opus" },
    });
  }
  if (format === "flac") {
    const flac = encodeFlac(pcm16FromBytes(bytes), sampleRate);
    return new Response(flac as BodyInit, { headers: { ...headers, "Content-Type": "audio/flac" } });
  }
  if (format === "pcm") {
    return new Response(bytes as BodyInit, { headers: { ...headers, "Content-Type": "audio/pcm" } });
  }
  const wav = new Uint8Array(44 + bytes.length);
  wav.set(wavHeader(sampleRate, bytes.length), 0);
  wav.set(bytes, 44);
  return new Response(wav as BodyInit, { headers: { ...headers, "Content-Type": "audio/wav" } });
});

/** OpenAI's streamed speech events: `speech.audio.delta` (base64 audio), then `speech.audio.done`. */
function speechEvents(audio: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const b64 = (b: Uint8Array) => {
    let s = "";
    for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
    return btoa(s);
  };
  return audio.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        controller.enqueue(
          enc.encode(sse("speech.audio.delta", { type: "speech.audio.delta", audio: b64(chunk) })),
        );
      },
      flush(controller) {
        controller.enqueue(enc.encode(sse("speech.audio.done", { type: "speech.audio.done" })));
      },
    }),
  );
}

function withPrefix(prefix: Uint8Array, rest: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  let sent = false;
  const reader = rest.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(prefix);
        return;
      }
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (e) {
        controller.error(e);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

/** The `model` query parameter of the GET routes, routed to the runner that serves it. */
export function queryModel(c: Context<ApiEnv>, want: "tts" | "stt"): { model: string; route: SpeechRoute } {
  const model = c.req.query("model");
  if (!model) {
    throw badRequest(
      `the \`model\` query parameter is required, e.g. ${c.req.path}?model=<a placed ${
        want === "tts" ? "text-to-speech" : "transcription"
      } model>`,
      "model",
    );
  }
  return { model, route: routeSpeech(c.var.node, model, want) };
}

audioRoutes.get("/v1/audio/voices", async (c) => {
  const { model, route } = queryModel(c, "tts");
  if ("remote" in route) return forwarded(c, route, "");
  const v = await voicesOf(route);
  return c.json({ object: "list", model, default_voice: v.fallback, data: v.list, voices: v.ids });
});

const TranscriptionFields = z.object({
  model: z.string().min(1, "must name a model"),
  language: z.string().min(2).max(16).optional(),
  prompt: z.string().max(4096).optional(),
  response_format: z.enum([...RESPONSE_FORMATS, "ndjson"]).default("json"),
  temperature: z.coerce.number().min(0).max(1).optional(),
  stream: z.enum(["true", "false"]).optional(),
});

/** Reads the request body up to the upload limit (413 past it, before reading it all when the length is declared). */
async function readUpload(c: Context<ApiEnv>): Promise<Uint8Array> {
  const declared = Number(c.req.header("content-length") ?? NaN);
  const tooBig = () =>
    new ApiError(413, `upload exceeds the ${MAX_UPLOAD_BYTES / (1024 * 1024)} MiB limit`, {
      type: "invalid_request_error",
      param: "file",
    });
  if (declared > MAX_UPLOAD_BYTES + 64 * 1024) throw tooBig();
  const body = c.req.raw.body;
  if (!body) throw badRequest("request body is empty; send multipart/form-data with a `file` field", "file");
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.length;
    if (total > MAX_UPLOAD_BYTES + 64 * 1024) throw tooBig();
    parts.push(chunk);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}

async function transcription(c: Context<ApiEnv>, task: "transcribe" | "translate"): Promise<Response> {
  const type = c.req.header("content-type") ?? "";
  if (!type.startsWith("multipart/form-data")) {
    throw new ApiError(
      415,
      `send multipart/form-data with a \`file\` field and a \`model\` field (got ${
        type || "no content type"
      })`,
    );
  }
  const bytes = await readUpload(c);
  let form: FormData;
  try {
    form = await new Request("http://local/", {
      method: "POST",
      headers: { "content-type": type },
      body: bytes as BodyInit,
    }).formData();
  } catch (e) {
    throw badRequest(`the multipart body could not be read: ${(e as Error).message}`);
  }
  const fields: Record<string, string> = {};
  for (const [k, v] of form.entries()) if (typeof v === "string") fields[k] = v;
  const p = TranscriptionFields.safeParse(fields);
  if (!p.success) {
    const { message, param } = describeZodError(p.error);
    throw new ApiError(400, `invalid request: ${message}`, { param, type: "invalid_request_error" });
  }
  const f = p.data;
  const file = form.get("file");
  if (!(file instanceof File)) {
    throw badRequest("the `file` field is missing: attach the audio as a file part", "file");
  }
  if (file.size > MAX_UPLOAD_BYTES) {
    throw new ApiError(413, `file exceeds the ${MAX_UPLOAD_BYTES / (1024 * 1024)} MiB limit`, {
      param: "file",
      type: "invalid_request_error",
    });
  }
  const route = routeSpeech(c.var.node, f.model, "stt");
  if ("remote" in route) return forwarded(c, route, bytes);
  if (task === "translate" && route.card.audio?.supports_translation === false) {
    throw badRequest(
      `model ${f.model} does not translate (its card says supports_translation = false)`,
      "model",
    );
  }
  let audio;
  try {
    audio = await decodeAudio(new Uint8Array(await file.arrayBuffer()), file.name);
  } catch (e) {
    if (e instanceof UnsupportedAudio) {
      throw new ApiError(415, e.message, { param: "file", type: "invalid_request_error" });
    }
    if (e instanceof AudioFormatError) {
      throw new ApiError(400, `the audio could not be read: ${e.message}`, {
        param: "file",
        type: "invalid_request_error",
      });
    }
    throw e;
  }
  if (durationSeconds(audio) < 0.05) {
    throw badRequest("the audio is shorter than 50 ms; nothing to transcribe", "file");
  }
  const opts = {
    task,
    language: f.language,
    prompt: f.prompt,
    temperature: f.temperature,
    signal: c.req.raw.signal,
    maxQueued: c.var.node.config.speechMaxQueued,
  };
  if (f.stream === "true") {
    const release = slotsOf(c.var.node).streams.take();
    const enc = new TextEncoder();
    const runner = route.local;
    const events = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          const t = await transcribeLocal(
            runner,
            audio,
            opts,
            (d) => controller.enqueue(enc.encode(deltaEvent(d))),
          );
          controller.enqueue(enc.encode(completedEvent(t)));
        } catch (e) {
          controller.enqueue(enc.encode(transcriptErrorEvent((e as Error).message)));
        }
        controller.enqueue(enc.encode("data: [DONE]\n\n"));
        controller.close();
      },
    });
    return new Response(holding(events, release), {
      headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" },
    });
  }
  const t = await transcribeLocal(route.local, audio, opts);
  if (f.response_format === "ndjson") {
    const lines = transcriptEvents(t).map((e) => JSON.stringify(JSON.parse(e.split("\ndata: ")[1])) + "\n")
      .join("");
    return new Response(lines, { headers: { "Content-Type": "application/x-ndjson" } });
  }
  const r = renderTranscript(t, f.response_format);
  return new Response(r.body, { headers: { "Content-Type": r.contentType } });
}

audioRoutes.post("/v1/audio/transcriptions", (c) => transcription(c, "transcribe"));
audioRoutes.post("/v1/audio/translations", (c) => transcription(c, "translate"));
