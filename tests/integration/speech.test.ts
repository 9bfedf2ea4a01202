/**
 * Speech end to end on a real node: espeak-ng speaks, a real whisper-server loaded with our tiny random
 * whisper model transcribes (the words are noise: formats, event order and errors are what is checked),
 * the realtime WebSocket runs VAD and manual turns, and a killed engine fails requests with a reason.
 */
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { concatBytes } from "../../src/audio/bytes.ts";
import { decodeAudio } from "../../src/audio/decode.ts";
import { CODEC_DELAY } from "../../src/audio/mp3.ts";
import { parseWav, rms } from "../../src/audio/pcm.ts";
import { speechBackendTags } from "../../src/engines/dispatch.ts";
import { EngineProcess } from "../../src/engines/process.ts";
import { PortAllocator } from "../../src/engines/ports.ts";
import { whisperServerProcess } from "../../src/engines/whisper-server.ts";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { pidAlive, placeOnNode, runnerTag, waitForState } from "../helpers/cluster.ts";
import {
  audioLlmCardWire,
  encodeWith,
  espeakCardWire,
  espeakWav,
  expectPcmHeaders,
  expectSpokenWav,
  pcm24,
  realtimeSession,
  sendAudio,
  sendManualTurn,
  sendTwoUtterances,
  snr,
  tinyAudioProjectorModel,
  tinyWhisperModel,
  whisperCardWire,
  whisperServerBinary,
} from "../helpers/speech.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { engineSettings } from "../../src/engines/settings.ts";

const TTS = "skulk-test/espeak";
const STT = "skulk-test/tiny-whisper";

const place = (node: Daemon, card: { modelId: string }) => placeOnNode(node, card);

function upload(
  model: string,
  bytes: Uint8Array,
  fields: Record<string, string> = {},
  name = "speech.wav",
): FormData {
  const form = new FormData();
  form.set("model", model);
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  form.set("file", new File([bytes as BlobPart], name));
  return form;
}

async function errorOf(res: Response): Promise<{ status: number; message: string }> {
  const body = await res.json();
  return { status: res.status, message: body.error?.message ?? "" };
}

describe("speech engines on this node", () => {
  it("advertises backend tags for the engines it finds", async () => {
    const whisper = await whisperServerBinary();
    const home = Deno.makeTempDirSync();
    try {
      // sherpa-onnx's tags are tested with the neural voices (speech-neural.test.ts).
      const off = { HOME: home, SKULK_SHERPA_ONNX: "0" };
      const tags = (path: string, env: Record<string, string>) =>
        speechBackendTags(engineSettings(resolveConfig({ flags: {}, env }).config, path));
      expect(tags("", off)).toEqual([]);
      expect(tags("", { ...off, SKULK_WHISPER_SERVER_BIN: whisper })).toEqual([
        "whisper_cpp",
        "whisper_cpp-cpu",
      ]);
      expect(tags("/usr/bin", off)).toEqual(["espeak_ng", "espeak_ng-cpu"]);
    } finally {
      Deno.removeSync(home, { recursive: true });
    }
  });
});

describe("skulk engine status", () => {
  it("names the speech engines and their backend tags", async () => {
    const whisper = await whisperServerBinary();
    const r = await skulk(["engine", "status", "--json"], { SKULK_WHISPER_SERVER_BIN: whisper });
    const info = JSON.parse(r.stdout);
    expect(info.whisperServer).toBe(whisper);
    expect(info.espeak).toMatch(/espeak-ng$/);
    expect(info.backends).toEqual(
      expect.arrayContaining(["whisper_cpp", "whisper_cpp-cpu", "espeak_ng", "espeak_ng-cpu"]),
    );
  });
});

describe("whisper-server with the tiny random model", () => {
  it("loads it and answers /inference with well-formed JSON", async () => {
    const ports = new PortAllocator();
    const port = ports.allocate();
    const engine: EngineProcess = whisperServerProcess({
      bin: await whisperServerBinary(),
      model: await tinyWhisperModel(),
      port,
    });
    try {
      await engine.start();
      const form = new FormData();
      form.set("file", new File([await espeakWav("testing one two three") as BlobPart], "a.wav"));
      form.set("response_format", "verbose_json");
      const res = await fetch(`http://127.0.0.1:${port}/inference`, { method: "POST", body: form });
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(typeof body.text).toBe("string");
      expect(Array.isArray(body.segments)).toBe(true);
      expect(body.duration).toBeGreaterThan(0.5);
    } finally {
      await engine.stop();
      ports.release(port);
    }
  });
});

describe("speech on one node", () => {
  let node: Daemon;
  let client: OpenAI;
  let sttRunner: string;
  let hello: Uint8Array;

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_WHISPER_SERVER_BIN: await whisperServerBinary() } });
    client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0 });
    await place(node, espeakCardWire(TTS));
    sttRunner = await place(node, whisperCardWire(STT, await tinyWhisperModel()));
    hello = await espeakWav("hello there, this is a test of the speech system");
  });
  afterAll(async () => {
    await node?.stop();
  });

  describe("text to speech", () => {
    /** `input` spoken as `format` and as WAV: the encoded answer, and the samples to hold it against. */
    async function speakAs(format: string, input: string) {
      const ask = (response_format: string) =>
        fetch(`${node.url}/v1/audio/speech`, {
          method: "POST",
          body: JSON.stringify({ model: TTS, input, response_format }),
        });
      const res = await ask(format);
      expect(res.status).toBe(200);
      const bytes = new Uint8Array(await res.arrayBuffer());
      const wav = parseWav(new Uint8Array(await (await ask("wav")).arrayBuffer()));
      return { type: res.headers.get("content-type"), bytes, wav };
    }

    it("speaks WAV with a valid header, sample rate and duration, and it is not silence", async () => {
      const res = await fetch(`${node.url}/v1/audio/speech`, {
        method: "POST",
        body: JSON.stringify({
          model: TTS,
          input: "The quick brown fox jumps over the lazy dog.",
          voice: "en",
        }),
      });
      await expectSpokenWav(res, 22050, [1, 10], 0.01);
    });

    it("speaks FLAC that decodes to the same samples as its WAV", async () => {
      const { type, bytes: flac, wav } = await speakAs("flac", "Lossless, please.");
      expect(type).toBe("audio/flac");
      expect(flac.length).toBeLessThan(wav.samples.length * 2);
      const decoded = await decodeAudio(flac);
      expect(decoded.container).toBe("flac");
      expect(decoded.sampleRate).toBe(22050);
      expect(decoded.samples.length).toBe(wav.samples.length);
      let maxErr = 0;
      for (let i = 0; i < wav.samples.length; i++) {
        maxErr = Math.max(maxErr, Math.abs(decoded.samples[i] - wav.samples[i]));
      }
      expect(maxErr).toBeLessThan(1 / 32768 + 1e-9);
    });

    it("speaks Ogg Opus of the same length as its WAV, and not silence", async () => {
      const { type, bytes: opus, wav } = await speakAs("opus", "Opus, for small answers.");
      expect(type).toBe("audio/ogg; codecs=opus");
      const decoded = await decodeAudio(opus);
      expect(decoded.container).toBe("ogg");
      expect(decoded.sampleRate).toBe(48000);
      // The granule positions make the decoded length exact (pre-skip and the last frame's padding trimmed).
      expect(Math.abs(decoded.samples.length / 48000 - wav.samples.length / 22050)).toBeLessThan(0.001);
      expect(rms(decoded.samples)).toBeGreaterThan(0.01);
      expect(opus.length).toBeLessThan(wav.samples.length * 2 / 4);
    });

    it("speaks MP3 that decodes to its WAV's exact length and sound", async () => {
      const { type, bytes: mp3, wav } = await speakAs("mp3", "MP3, as OpenAI sends by default.");
      expect(type).toBe("audio/mpeg");
      const decoded = await decodeAudio(mp3);
      expect(decoded.container).toBe("mp3");
      expect(decoded.sampleRate).toBe(22050);
      // The Info tag's delay and padding make the decoded length exact.
      expect(decoded.samples.length).toBe(wav.samples.length);
      expect(rms(decoded.samples)).toBeGreaterThan(0.01);
      expect(snr(wav.samples, decoded.samples)).toBeGreaterThan(25);
      // 64 kbit/s: a fifth of the 16-bit WAV's 352.8 kbit/s, plus the Info frame.
      expect(mp3.length).toBeLessThan(wav.samples.length * 2 / 5 + 1000);
    });

    it("streams MP3 frames as espeak-ng speaks, and as base64 speech.audio.delta events", async () => {
      const ask = (extra: Record<string, unknown>) =>
        fetch(`${node.url}/v1/audio/speech`, {
          method: "POST",
          body: JSON.stringify({
            model: TTS,
            input: "Streaming MP3, frame by frame, while the voice is still speaking.",
            response_format: "mp3",
            ...extra,
          }),
        });
      const wav = parseWav(new Uint8Array(await (await ask({ response_format: "wav" })).arrayBuffer()));
      const res = await ask({ stream: true });
      expect(res.headers.get("content-type")).toBe("audio/mpeg");
      expect(res.headers.get("x-audio-sample-rate")).toBe("22050");
      const chunks: Uint8Array[] = [];
      for await (const chunk of res.body!) chunks.push(chunk);
      // No Info tag up front (the length is unknown then): the codec delay plays first, then the speech.
      const streamed = await decodeAudio(concatBytes(chunks));
      const n = wav.samples.length;
      expect(streamed.samples.length).toBeGreaterThanOrEqual(n + CODEC_DELAY);
      expect(streamed.samples.length).toBeLessThan(n + CODEC_DELAY + 576);
      expect(snr(wav.samples, streamed.samples.subarray(CODEC_DELAY))).toBeGreaterThan(25);

      const sse = await ask({ stream_format: "sse" });
      expect(sse.headers.get("content-type")).toBe("text/event-stream");
      const events = (await sse.text()).split("\n\n").filter(Boolean).map((e) =>
        JSON.parse(e.split("data: ")[1])
      );
      expect(events.at(-1)).toEqual({ type: "speech.audio.done" });
      const bytes = events.slice(0, -1).map((e) => Uint8Array.from(atob(e.audio), (c) => c.charCodeAt(0)));
      expect((await decodeAudio(concatBytes(bytes))).samples.length).toBe(streamed.samples.length);
    });

    it("speaks faster at speed 2 than at speed 1", async () => {
      const len = async (speed: number) => {
        const res = await fetch(`${node.url}/v1/audio/speech`, {
          method: "POST",
          body: JSON.stringify({
            model: TTS,
            input: "One two three four five six seven eight nine ten.",
            speed,
            response_format: "pcm",
          }),
        });
        expect(res.status).toBe(200);
        return (await res.arrayBuffer()).byteLength;
      };
      expect(await len(2)).toBeLessThan((await len(1)) * 0.75);
    });

    it("streams raw PCM with the format in headers", async () => {
      const res = await fetch(`${node.url}/v1/audio/speech`, {
        method: "POST",
        body: JSON.stringify({
          model: TTS,
          input: "Streaming speech, chunk by chunk.",
          response_format: "pcm",
          stream: true,
        }),
      });
      expectPcmHeaders(res, 22050);
      let bytes = 0;
      let chunks = 0;
      for await (const chunk of res.body!) {
        bytes += chunk.length;
        chunks++;
      }
      expect(chunks).toBeGreaterThan(0);
      expect(bytes / 2 / 22050).toBeGreaterThan(0.5);
    });

    it("streams OpenAI's speech.audio.delta events with stream_format sse", async () => {
      const res = await fetch(`${node.url}/v1/audio/speech`, {
        method: "POST",
        body: JSON.stringify({
          model: TTS,
          input: "Events, please.",
          response_format: "pcm",
          stream_format: "sse",
        }),
      });
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      const events = (await res.text()).split("\n\n").filter(Boolean).map((e) =>
        JSON.parse(e.split("data: ")[1])
      );
      expect(events.at(-1)).toEqual({ type: "speech.audio.done" });
      const deltas = events.slice(0, -1);
      expect(deltas.length).toBeGreaterThan(0);
      expect(deltas.every((d) => d.type === "speech.audio.delta")).toBe(true);
      const bytes = deltas.reduce((n, d) => n + atob(d.audio).length, 0);
      expect(bytes / 2 / 22050).toBeGreaterThan(0.3);
    });

    it("answers the openai client, with OpenAI voice names mapped to the default voice", async () => {
      const res = await client.audio.speech.create({
        model: TTS,
        input: "Hi.",
        voice: "alloy",
        response_format: "wav",
      });
      expect(res.headers.get("x-audio-voice")).toBe("en");
      expect(parseWav(new Uint8Array(await res.arrayBuffer())).samples.length).toBeGreaterThan(1000);
    });

    it("lists its voices", async () => {
      const res = await fetch(`${node.url}/v1/audio/voices?model=${TTS}`);
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body.default_voice).toBe("en");
      expect(body.voices).toContain("en");
      expect(body.voices).toContain("de");
      expect(body.voices).toContain("en-gb");
      expect(body.data.find((v: { id: string }) => v.id === "en-gb")).toMatchObject({
        name: "English (Great Britain)",
        gender: "male",
      });
    });

    it.each([
      [{ model: TTS, input: "x", voice: "klingon-7" }, 400, /voice klingon-7 is not offered/],
      [{ model: TTS, input: "x", response_format: "aac" }, 400, /response_format aac is not available/],
      [{ model: TTS, input: "" }, 400, /input/],
      [{ model: TTS, input: "x", speed: 9 }, 400, /speed/],
      [{ model: "nobody/nothing", input: "x" }, 404, /No instance found/],
      [{ model: STT, input: "x" }, 400, /not a text-to-speech model/],
    ])("refuses %j with %i", async (body, status, message) => {
      const res = await fetch(`${node.url}/v1/audio/speech`, { method: "POST", body: JSON.stringify(body) });
      const e = await errorOf(res);
      expect(e.status).toBe(status);
      expect(e.message).toMatch(message);
    });
  });

  describe("transcription", () => {
    it("answers the openai client with text", async () => {
      const r = await client.audio.transcriptions.create({
        model: STT,
        file: await toFile(hello, "hello.wav"),
      });
      expect(typeof r.text).toBe("string");
    });

    it("answers verbose_json with segments inside the audio's duration", async () => {
      const res = await fetch(`${node.url}/v1/audio/transcriptions`, {
        method: "POST",
        body: upload(STT, hello, { response_format: "verbose_json" }),
      });
      expect(res.status).toBe(200);
      const body = await res.json();
      const seconds = parseWav(hello).samples.length / 22050;
      expect(body.task).toBe("transcribe");
      expect(body.duration).toBeCloseTo(seconds, 2);
      for (const s of body.segments) {
        expect(s.start).toBeGreaterThanOrEqual(0);
        expect(s.end).toBeLessThanOrEqual(seconds);
        expect(typeof s.text).toBe("string");
      }
    });

    it.each(["flac", "mp3", "opus", "vorbis", "webm"] as const)(
      "decodes %s in-process and transcribes it",
      async (format) => {
        const encoded = await encodeWith(format, hello);
        const res = await fetch(`${node.url}/v1/audio/transcriptions`, {
          method: "POST",
          body: upload(
            STT,
            encoded,
            { response_format: "verbose_json" },
            `speech.${format === "vorbis" ? "ogg" : format}`,
          ),
        });
        expect(res.status).toBe(200);
        const body = await res.json();
        // Encoders pad a little (MP3 frames, Opus pre-skip): the decoded length stays within 0.1 s.
        expect(Math.abs(body.duration - parseWav(hello).samples.length / 22050)).toBeLessThan(0.1);
      },
    );

    it.each([
      ["text", /^text\/plain/, /\n$/],
      ["srt", /^application\/x-subrip/, /^(1\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n|$)/],
      ["vtt", /^text\/vtt/, /^WEBVTT\n\n/],
    ])("answers %s", async (format, type, body) => {
      const res = await fetch(`${node.url}/v1/audio/transcriptions`, {
        method: "POST",
        body: upload(STT, hello, { response_format: format }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(type);
      expect(await res.text()).toMatch(body);
    });

    it("streams SSE: deltas, then completed, then [DONE]", async () => {
      const res = await fetch(`${node.url}/v1/audio/transcriptions`, {
        method: "POST",
        body: upload(STT, hello, { stream: "true" }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      const events = (await res.text()).split("\n\n").filter(Boolean);
      const names = events.map((e) => e.match(/^event: (\S+)/)?.[1] ?? e);
      expect(names.at(-1)).toBe("data: [DONE]");
      expect(names.at(-2)).toBe("transcription.completed");
      expect(names.slice(0, -2).every((n) => n === "transcription.delta")).toBe(true);
      const completed = JSON.parse(events.at(-2)!.split("data: ")[1]);
      expect(completed.usage.type).toBe("duration");
      expect(completed.usage.seconds).toBeGreaterThan(1);
    });

    it("translates", async () => {
      const res = await fetch(`${node.url}/v1/audio/translations`, {
        method: "POST",
        body: upload(STT, hello),
      });
      expect(res.status).toBe(200);
      expect(typeof (await res.json()).text).toBe("string");
    });

    it("serves parallel requests one at a time, all of them", async () => {
      const results = await Promise.all(
        [1, 2, 3, 4].map(() =>
          fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: upload(STT, hello) }).then(
            async (r) => [r.status, await r.json()] as const,
          )
        ),
      );
      for (const [status, body] of results) {
        expect(status).toBe(200);
        expect(typeof body.text).toBe("string");
      }
    });

    it.each([
      [
        "garbage bytes",
        () => upload(STT, new TextEncoder().encode("this is not audio at all"), {}, "notes.txt"),
        415,
        /audio format not supported/,
      ],
      [
        "an AAC/M4A file",
        () => upload(STT, new TextEncoder().encode("\0\0\0\x18ftypM4A isom...."), {}, "a.m4a"),
        415,
        /MP4\/M4A/,
      ],
      [
        "a corrupt WAV",
        () => upload(STT, new TextEncoder().encode("RIFF\x04\0\0\0WAVEjunk")),
        400,
        /could not be read/,
      ],
      [
        "a corrupt FLAC",
        () => upload(STT, new TextEncoder().encode("fLaC and then nothing useful")),
        400,
        /could not be read/,
      ],
      [
        "no file",
        () => {
          const f = new FormData();
          f.set("model", STT);
          return f;
        },
        400,
        /`file` field is missing/,
      ],
      ["an unknown model", () => upload("nobody/nothing", new Uint8Array(10)), 404, /No instance found/],
      ["a TTS model", () => upload(TTS, new Uint8Array(10)), 400, /not a speech-to-text model/],
      [
        "a bad response_format",
        () => upload(STT, new Uint8Array(10), { response_format: "xml" }),
        400,
        /response_format/,
      ],
    ])("refuses %s", async (_, form, status, message) => {
      const e = await errorOf(
        await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: form() }),
      );
      expect(e.status).toBe(status);
      expect(e.message).toMatch(message);
    });

    it("refuses a JSON body with 415", async () => {
      const res = await fetch(`${node.url}/v1/audio/transcriptions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(res.status).toBe(415);
      await res.body?.cancel();
    });

    it("refuses an upload over 25 MiB with 413", async () => {
      const big = new Uint8Array(26 * 1024 * 1024);
      const e = await errorOf(
        await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: upload(STT, big) }),
      );
      expect(e.status).toBe(413);
      expect(e.message).toMatch(/25 MiB/);
    });
  });

  describe("realtime", () => {
    const session = () => realtimeSession(node.url, STT);

    it("detects speech with server VAD and transcribes each utterance, in order", async () => {
      const { ws, next, events } = await session();
      try {
        expect((await next()).type).toBe("session.created");
        ws.send(
          JSON.stringify({
            type: "session.update",
            session: { turn_detection: { type: "server_vad", silence_duration_ms: 300 } },
          }),
        );
        const updated = await next();
        expect(updated.type).toBe("session.updated");
        expect(
          (updated.session as { turn_detection: { silence_duration_ms: number } }).turn_detection
            .silence_duration_ms,
        ).toBe(300);
        const speech = pcm24(hello);
        sendTwoUtterances(ws, speech);
        const first = await next("conversation.item.input_audio_transcription.completed");
        const second = await next("conversation.item.input_audio_transcription.completed");
        expect(typeof first.transcript).toBe("string");
        const order = events.map((e) => e.type).filter((t) =>
          t !== "conversation.item.input_audio_transcription.delta"
        );
        expect(order.slice(0, 2)).toEqual(["session.created", "session.updated"]);
        const rest = order.slice(2);
        // Each utterance: started, stopped, committed; completions follow their commits in order.
        expect(rest.filter((t) => t === "input_audio_buffer.speech_started").length).toBeGreaterThanOrEqual(
          2,
        );
        expect(rest.indexOf("input_audio_buffer.speech_started")).toBeLessThan(
          rest.indexOf("input_audio_buffer.speech_stopped"),
        );
        expect(rest.indexOf("input_audio_buffer.speech_stopped")).toBeLessThan(
          rest.indexOf("input_audio_buffer.committed"),
        );
        const commits = events.filter((e) => e.type === "input_audio_buffer.committed").map((e) => e.item_id);
        expect([first.item_id, second.item_id]).toEqual(commits.slice(0, 2));
        expect(
          events.find((e) => e.type === "input_audio_buffer.committed" && e.item_id === commits[1])!
            .previous_item_id,
        ).toBe(commits[0]);
        const started = events.find((e) => e.type === "input_audio_buffer.speech_started")!;
        expect(started.audio_start_ms as number).toBeGreaterThanOrEqual(250);
        expect(started.audio_start_ms as number).toBeLessThanOrEqual(700);
      } finally {
        ws.close();
      }
    });

    it("commits by hand with VAD off, and refuses an empty commit and bad events", async () => {
      const { ws, next } = await session();
      try {
        await next("session.created");
        ws.send(JSON.stringify({ type: "session.update", session: { turn_detection: null } }));
        expect((await next()).type).toBe("session.updated");
        ws.send(JSON.stringify({ type: "input_audio_buffer.commit", event_id: "c1" }));
        const empty = await next();
        expect(empty.type).toBe("error");
        expect(empty.error).toMatchObject({ code: "input_audio_buffer_commit_empty", event_id: "c1" });
        ws.send("{not json");
        expect(((await next("error")).error as { code: string }).code).toBe("invalid_json");
        ws.send(JSON.stringify({ type: "response.create" }));
        expect(((await next("error")).error as { code: string }).code).toBe("unknown_event");
        ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: "%%%" }));
        expect(((await next("error")).error as { code: string }).code).toBe("invalid_value");
        ws.send(JSON.stringify({ type: "session.update", session: { input_audio_format: "g711_ulaw" } }));
        expect(((await next("error")).error as { message: string }).message).toMatch(/pcm16/);
        sendAudio(ws, pcm24(hello));
        ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
        const committed = await next("input_audio_buffer.committed");
        const done = await next("conversation.item.input_audio_transcription.completed");
        expect(done.item_id).toBe(committed.item_id);
        expect((done.usage as { seconds: number }).seconds).toBeGreaterThan(1);
      } finally {
        ws.close();
      }
    });

    it("closes with 1009 after an event over 1 MiB", async () => {
      const { ws, next } = await session();
      const closed = new Promise<number>((r) => (ws.onclose = (e) => r(e.code)));
      await next("session.created");
      ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: "A".repeat(1_100_000) }));
      expect(((await next("error")).error as { code: string }).code).toBe("event_too_large");
      expect(await closed).toBe(1009);
    });

    it.each([
      ["an unknown model", "nobody/nothing", 404],
      ["a TTS model", TTS, 400],
    ])("refuses %s before upgrading", async (_, model, status) => {
      const res = await fetch(`${node.url}/v1/realtime?model=${model}`);
      expect(res.status).toBe(status);
      await res.body?.cancel();
    });
  });

  describe("placement", () => {
    it("places the bundled espeak-ng card with POST /place_instance, and it speaks", async () => {
      const res = await fetch(`${node.url}/place_instance`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model_id: "skulk/espeak-ng" }),
      });
      const placed = await res.json();
      expect(res.status, JSON.stringify(placed)).toBe(200);
      await waitForState(node.url, (s) => {
        const inst = s.instances?.[placed.instance_id];
        const runners = inst
          ? Object.keys(
            (Object.values(inst)[0] as { shardAssignments: { runnerToShard: Record<string, unknown> } })
              .shardAssignments
              .runnerToShard,
          )
          : [];
        return runners.length > 0 && runners.every((r: string) => runnerTag(s, r) === "RunnerReady");
      }, "the placed espeak-ng runner");
      // No response_format: the bundled card answers with MP3, as OpenAI does.
      const speech = await fetch(`${node.url}/v1/audio/speech`, {
        method: "POST",
        body: JSON.stringify({ model: "skulk/espeak-ng", input: "Placed like any other model." }),
      });
      expect(speech.status).toBe(200);
      expect(speech.headers.get("content-type")).toBe("audio/mpeg");
      const decoded = await decodeAudio(new Uint8Array(await speech.arrayBuffer()));
      expect(decoded.samples.length).toBeGreaterThan(10_000);
    });
  });

  describe("engine death", () => {
    it("fails transcription with the engine's reason after whisper-server dies", async () => {
      const r = await skulk([
        "sql",
        "--data-dir",
        node.dataDir,
        "--json",
        "SELECT pid FROM engine_processes WHERE kind = 'whisper-server'",
      ]);
      const pids = (JSON.parse(r.stdout) as { pid: number }[]).map((x) => x.pid);
      expect(pids.length).toBe(1);
      // A realtime session open across the death: its next turn fails and the socket closes with 1011.
      const ws = new WebSocket(`${node.url.replace("http", "ws")}/v1/realtime?model=${STT}`);
      const seen: string[] = [];
      const closed = new Promise<number>((r) => (ws.onclose = (e) => r(e.code)));
      const created = new Promise((r) => (ws.onmessage = (e) => {
        seen.push(JSON.parse(e.data).type);
        r(null);
      }));
      await created;
      Deno.kill(pids[0], "SIGKILL");
      await waitForState(
        node.url,
        (s) => runnerTag(s, sttRunner) === "RunnerFailed",
        "the whisper runner to fail",
      );
      expect(pidAlive(pids[0])).toBe(false);
      const e = await errorOf(
        await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: upload(STT, hello) }),
      );
      expect(e.status).toBe(503);
      expect(e.message).toMatch(/cannot serve now/);
      const speech = new Int16Array(24000).map((_, i) => Math.round(8000 * Math.sin(i / 8)));
      let bin = "";
      for (const b of new Uint8Array(speech.buffer)) bin += String.fromCharCode(b);
      ws.send(JSON.stringify({ type: "session.update", session: { turn_detection: null } }));
      ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio: btoa(bin) }));
      ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
      expect(await closed).toBe(1011);
      expect(seen).toEqual([
        "session.created",
        "session.updated",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.failed",
        "error",
      ]);
      // The node and its other speech model keep serving.
      const tts = await fetch(`${node.url}/v1/audio/speech`, {
        method: "POST",
        body: JSON.stringify({ model: TTS, input: "still here" }),
      });
      expect(tts.status).toBe(200);
      await tts.body?.cancel();
    });
  });
});

describe("transcription through llama-server with a tiny audio projector", () => {
  const MODEL = "skulk-test/tiny-audio-llm";
  let node: Daemon;
  let wav: Uint8Array;
  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") } });
    await place(node, audioLlmCardWire(MODEL, await tinyModel(), await tinyAudioProjectorModel(64)));
    wav = await espeakWav("streaming tokens from an audio model");
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("streams token deltas as SSE, then completed with their concatenation", async () => {
    const form = new FormData();
    form.set("model", MODEL);
    form.set("stream", "true");
    form.set("file", new File([wav as BlobPart], "a.wav"));
    const res = await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: form });
    expect(res.status).toBe(200);
    const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("event: "));
    const parsed = events.map((e) => JSON.parse(e.split("data: ")[1]));
    const deltas = parsed.filter((e) => e.type === "transcription.delta").map((e) => e.delta as string);
    // A random model answers with up to 448 tokens: always several deltas, one per token.
    expect(deltas.length).toBeGreaterThan(1);
    const completed = parsed.at(-1);
    expect(completed.type).toBe("transcription.completed");
    expect(completed.text).toBe(deltas.join("").trim());
  });

  it("answers json, and transcribes realtime turns with token deltas", async () => {
    const form = new FormData();
    form.set("model", MODEL);
    form.set("file", new File([wav as BlobPart], "a.wav"));
    const res = await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: form });
    expect(res.status).toBe(200);
    expect(typeof (await res.json()).text).toBe("string");

    const ws = new WebSocket(`${node.url.replace("http", "ws")}/v1/realtime?model=${MODEL}`);
    const events: Record<string, unknown>[] = [];
    const done = new Promise<void>((resolve) => {
      ws.onmessage = (e) => {
        const ev = JSON.parse(e.data);
        events.push(ev);
        if (ev.type === "session.created") {
          sendManualTurn(ws, wav);
        }
        if (ev.type === "conversation.item.input_audio_transcription.completed" || ev.type === "error") {
          resolve();
        }
      };
    });
    try {
      await done;
    } finally {
      ws.close();
    }
    const deltas = events.filter((e) => e.type === "conversation.item.input_audio_transcription.delta").map((
      e,
    ) => e.delta as string);
    const completed = events.at(-1)!;
    expect(completed.type).toBe("conversation.item.input_audio_transcription.completed");
    expect(deltas.length).toBeGreaterThan(1);
    expect(completed.transcript).toBe(deltas.join("").trim());
  });
});

const REAL_MODEL = Deno.env.get("SKULK_TEST_WHISPER_MODEL");

describe.skipIf(!REAL_MODEL)("a real whisper model (SKULK_TEST_WHISPER_MODEL)", () => {
  let node: Daemon;
  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_WHISPER_SERVER_BIN: await whisperServerBinary() } });
    await place(node, whisperCardWire("real/whisper", REAL_MODEL!));
  }, 300_000);
  afterAll(async () => {
    await node?.stop();
  });

  it("hears the words espeak-ng says", async () => {
    const words = ["quick", "brown", "fox", "jumps", "lazy", "dog"];
    const wav = await espeakWav("The quick brown fox jumps over the lazy dog.");
    const res = await fetch(`${node.url}/v1/audio/transcriptions`, {
      method: "POST",
      body: upload("real/whisper", wav, { language: "en" }),
    });
    expect(res.status).toBe(200);
    const text = ((await res.json()).text as string).toLowerCase();
    expect(words.filter((w) => text.includes(w)).length).toBeGreaterThanOrEqual(4);
  }, 120_000);
});
