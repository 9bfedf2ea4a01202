/**
 * The chat's voice: recording the microphone (MediaRecorder), transcribing with a placed speech-to-text
 * model and speaking with a placed text-to-speech model through the audio routes (docs/speech.md).
 */
import { ApiFailure, failure, headers } from "./api.ts";
import { Endpointer, rms } from "./endpoint.ts";
import { micAdvice } from "./voice-advice.ts";

/** /v1/audio/speech takes at most this many characters (docs/speech.md). */
export const SPEECH_INPUT_LIMIT = 4096;

export interface Recording {
  /** Ends the recording and gives what was heard. */
  stop(): Promise<Blob>;
  /** Ends it and throws the audio away. */
  cancel(): void;
}

/**
 * Starts recording the default microphone; throws an Error whose message is advice for the user. With
 * `onEndOfSpeech`, it listens for the end of an utterance (speech, then 1.2 s of quiet) and calls it once.
 */
export async function startRecording(onEndOfSpeech?: () => void): Promise<Recording> {
  if (!navigator.mediaDevices?.getUserMedia) throw new Error(micAdvice("InsecureContext", ""));
  if (typeof MediaRecorder === "undefined") {
    throw new Error("This browser cannot record audio (no MediaRecorder).");
  }
  let stream: MediaStream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (e) {
    const err = e as DOMException;
    throw new Error(micAdvice(err.name, err.message));
  }
  // WebM/Opus where the browser has it (Chromium, Firefox); the server decodes it, and Safari's MP4 is
  // not used because the server refuses MP4.
  const mimeType = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm"].find((t) =>
    MediaRecorder.isTypeSupported(t)
  );
  const recorder = new MediaRecorder(stream, mimeType ? { mimeType } : undefined);
  const chunks: Blob[] = [];
  recorder.ondataavailable = (e) => {
    if (e.data.size) chunks.push(e.data);
  };
  const stopListening = onEndOfSpeech ? listenForEnd(stream, onEndOfSpeech) : () => {};
  const release = () => {
    stopListening();
    stream.getTracks().forEach((t) => t.stop());
  };
  recorder.start();
  return {
    stop: () =>
      new Promise<Blob>((resolve) => {
        recorder.onstop = () => {
          release();
          resolve(new Blob(chunks, { type: recorder.mimeType || mimeType || "audio/webm" }));
        };
        recorder.stop();
      }),
    cancel: () => {
      recorder.onstop = release;
      if (recorder.state !== "inactive") recorder.stop();
      else release();
    },
  };
}

/** Measures the stream's loudness every 50 ms and calls `onEnd` once the utterance has ended. */
function listenForEnd(stream: MediaStream, onEnd: () => void): () => void {
  const context = new AudioContext();
  const analyser = context.createAnalyser();
  analyser.fftSize = 2048;
  context.createMediaStreamSource(stream).connect(analyser);
  const block = new Float32Array(analyser.fftSize);
  const endpointer = new Endpointer();
  const timer = setInterval(() => {
    analyser.getFloatTimeDomainData(block);
    if (endpointer.push(rms(block), performance.now()) === "done") {
      clearInterval(timer);
      onEnd();
    }
  }, 50);
  return () => {
    clearInterval(timer);
    void context.close().catch(() => {});
  };
}

async function post(path: string, body: BodyInit, json: boolean, signal?: AbortSignal): Promise<Response> {
  const h = headers();
  // multipart: the browser writes the content type with its boundary.
  if (!json) delete h["content-type"];
  let res: Response;
  try {
    res = await fetch(path, { method: "POST", headers: h, body, signal });
  } catch (e) {
    if ((e as Error).name === "AbortError") throw e;
    throw new ApiFailure(0, (e as Error).message);
  }
  if (!res.ok) throw await failure(res);
  return res;
}

/** The text of `audio` as the transcription model hears it (POST /v1/audio/transcriptions). */
export async function transcribe(model: string, audio: Blob, signal?: AbortSignal): Promise<string> {
  const form = new FormData();
  form.set("model", model);
  form.set("response_format", "json");
  const ext = audio.type.includes("ogg") ? "ogg" : audio.type.includes("wav") ? "wav" : "webm";
  form.set("file", audio, `voice.${ext}`);
  const res = await post("/v1/audio/transcriptions", form, false, signal);
  const body = await res.json() as { text?: string };
  return (body.text ?? "").trim();
}

/** `text` spoken by the speech model, as WAV (POST /v1/audio/speech). */
export async function synthesize(model: string, text: string, signal?: AbortSignal): Promise<Blob> {
  const input = text.slice(0, SPEECH_INPUT_LIMIT);
  const res = await post(
    "/v1/audio/speech",
    JSON.stringify({ model, input, response_format: "wav" }),
    true,
    signal,
  );
  return await res.blob();
}
