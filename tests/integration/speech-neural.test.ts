/**
 * Neural speech end to end on a real node: sherpa-onnx in its own child process speaks with our tiny
 * random-weight Piper voices (phonemes from the system's espeak-ng data), and Silero VAD (in the node's
 * sherpa-onnx child) finds turns in realtime sessions. The sound is noise: headers, sample rates,
 * durations, voices, streaming, event order, errors and the children's deaths are what is checked.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeAudio } from "../../src/audio/decode.ts";
import { parseWav, rms } from "../../src/audio/pcm.ts";
import { EnergyVad, TurnDetectionSchema } from "../../src/audio/vad.ts";
import { speechBackendTags } from "../../src/engines/dispatch.ts";
import { pidAlive, postInstance, runnerTag, singleNodeInstance, waitForState } from "../helpers/cluster.ts";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";
import {
  espeakWav,
  expectPcmHeaders,
  expectSpokenWav,
  pcm24,
  piperCardWire,
  realtimeSession,
  sendAudio,
  sendTwoUtterances,
  sileroModel,
  tinyPiperVoice,
  tinyWhisperModel,
  whisperCardWire,
  whisperServerBinary,
} from "../helpers/speech.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { engineSettings } from "../../src/engines/settings.ts";

const SOLO = "skulk-test/tiny-piper";
const TRIO = "skulk-test/tiny-piper-3";
const NAMED = "skulk-test/tiny-piper-named";

async function place(node: Daemon, card: { modelId: string }): Promise<string> {
  const instance = singleNodeInstance(node.nodeId, card);
  const res = await postInstance(node, instance);
  expect(res.status).toBe(200);
  await res.body?.cancel();
  return Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
}

async function ready(node: Daemon, runnerId: string, what: string) {
  await waitForState(node.url, (s) => runnerTag(s, runnerId) === "RunnerReady", what, 60_000);
}

function speak(node: Daemon, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${node.url}/v1/audio/speech`, { method: "POST", body: JSON.stringify(body) });
}

async function wavOf(res: Response) {
  expect(res.status).toBe(200);
  return parseWav(new Uint8Array(await res.arrayBuffer()));
}

describe("the sherpa-onnx engine on this node", () => {
  it("is advertised as a backend tag when its native addon is installed, and can be turned off", () => {
    const tags = (env: Record<string, string>) =>
      speechBackendTags(
        engineSettings(resolveConfig({ flags: {}, env: { HOME: "/nonexistent", ...env } }).config, ""),
      );
    expect(tags({})).toEqual(["sherpa_onnx", "sherpa_onnx-cpu"]);
    expect(tags({ SKULK_SHERPA_ONNX: "0" })).toEqual([]);
  });

  it("is named by skulk engine status", async () => {
    const r = await skulk(["engine", "status", "--json"]);
    const info = JSON.parse(r.stdout);
    expect(info.sherpaOnnx).toMatch(/sherpa-onnx-(linux|darwin)-(x64|arm64)\/sherpa-onnx\.node$/);
    expect(info.backends).toEqual(expect.arrayContaining(["sherpa_onnx", "sherpa_onnx-cpu"]));
  });
});

describe("neural speech on one node", () => {
  let node: Daemon;
  let soloRunner: string;

  beforeAll(async () => {
    node = await startDaemon();
    const solo = piperCardWire(SOLO, await tinyPiperVoice(1));
    const trio = piperCardWire(TRIO, await tinyPiperVoice(3));
    const named = piperCardWire(NAMED, await tinyPiperVoice(3), {
      voices: ["alice", "bob", "carol"],
      defaultVoice: "bob",
    });
    soloRunner = await place(node, solo);
    const runners = [soloRunner, await place(node, trio), await place(node, named)];
    for (const r of runners) await ready(node, r, `runner ${r}`);
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("speaks WAV at the voice's sample rate, and it is not silence", async () => {
    const res = await speak(node, { model: SOLO, input: "The quick brown fox jumps over the lazy dog." });
    expect(res.headers.get("x-audio-voice")).toBe("tiny");
    await expectSpokenWav(res, 22050, [1, 20], 0.05);
  });

  it("speaks longer for longer input and shorter at a higher speed", async () => {
    const seconds = async (input: string, speed = 1) => {
      const wav = await wavOf(await speak(node, { model: SOLO, input, speed }));
      return wav.samples.length / wav.sampleRate;
    };
    const short = await seconds("Hello.");
    const long = await seconds("Hello. This sentence is a good deal longer than the first one.");
    expect(long).toBeGreaterThan(short * 3);
    const fast = await seconds("One two three four five six seven eight nine ten.", 2);
    const normal = await seconds("One two three four five six seven eight nine ten.", 1);
    const slow = await seconds("One two three four five six seven eight nine ten.", 0.5);
    // length_scale = 1/speed: the tiny voice holds each phoneme round(4 × length_scale) frames.
    expect(fast / normal).toBeCloseTo(0.5, 1);
    expect(slow / normal).toBeCloseTo(2, 1);
  });

  it("streams raw PCM with the format in headers, the same audio as unstreamed", async () => {
    const input = "Streaming speech. One sentence, then another. And a third.";
    const res = await speak(node, { model: SOLO, input, response_format: "pcm", stream: true });
    expectPcmHeaders(res, 22050);
    let bytes = 0;
    for await (const chunk of res.body!) bytes += chunk.length;
    const whole = await speak(node, { model: SOLO, input, response_format: "pcm" });
    expect(bytes).toBe((await whole.arrayBuffer()).byteLength);
    expect(bytes / 2 / 22050).toBeGreaterThan(1);
  });

  it("encodes MP3 from the voice's PCM, at its rate, the same length as its WAV", async () => {
    const input = "An answer spoken as MP3.";
    const mp3 = await speak(node, { model: SOLO, input, response_format: "mp3" });
    expect(mp3.headers.get("content-type")).toBe("audio/mpeg");
    const decoded = await decodeAudio(new Uint8Array(await mp3.arrayBuffer()));
    const wav = await wavOf(await speak(node, { model: SOLO, input }));
    expect(decoded.sampleRate).toBe(22050);
    expect(decoded.samples.length).toBe(wav.samples.length);
    expect(rms(decoded.samples)).toBeGreaterThan(0.01);
  });

  it("encodes FLAC and Opus from the voice's PCM", async () => {
    const flac = await speak(node, { model: SOLO, input: "Lossless.", response_format: "flac" });
    expect(flac.headers.get("content-type")).toBe("audio/flac");
    expect(new TextDecoder().decode(new Uint8Array(await flac.arrayBuffer()).subarray(0, 4))).toBe("fLaC");
    const opus = await speak(node, { model: SOLO, input: "Small.", response_format: "opus" });
    expect(opus.headers.get("content-type")).toBe("audio/ogg; codecs=opus");
    expect(new TextDecoder().decode(new Uint8Array(await opus.arrayBuffer()).subarray(0, 4))).toBe("OggS");
  });

  it("lists a multi-speaker voice's speakers, and each speaks differently", async () => {
    const res = await fetch(`${node.url}/v1/audio/voices?model=${TRIO}`);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.voices).toEqual(["speaker_0", "speaker_1", "speaker_2"]);
    expect(body.default_voice).toBe("speaker_0");
    expect(body.data[2]).toMatchObject({ id: "speaker_2", speaker_id: 2 });
    const pcm = async (voice: string) =>
      new Uint8Array(
        await (await speak(node, { model: TRIO, input: "Same words.", voice, response_format: "pcm" }))
          .arrayBuffer(),
      );
    const [a, b, a2] = [await pcm("speaker_0"), await pcm("speaker_1"), await pcm("speaker_0")];
    expect(a.length).toBe(b.length);
    expect(a).not.toEqual(b);
    expect(a2).toEqual(a);
  });

  it("names speakers after the card's voices, in speaker-id order", async () => {
    const body = await (await fetch(`${node.url}/v1/audio/voices?model=${NAMED}`)).json();
    expect(body.voices).toEqual(["alice", "bob", "carol"]);
    expect(body.default_voice).toBe("bob");
    const pcm = async (model: string, voice: string) =>
      new Uint8Array(
        await (await speak(node, { model, input: "Who speaks?", voice, response_format: "pcm" }))
          .arrayBuffer(),
      );
    // The same tiny voice with three speakers: "carol" is speaker 2.
    expect(await pcm(NAMED, "carol")).toEqual(await pcm(TRIO, "speaker_2"));
    const res = await speak(node, { model: NAMED, input: "Hi.", voice: "alloy" });
    expect(res.headers.get("x-audio-voice")).toBe("bob");
    await res.body?.cancel();
  });

  it.each([
    [{ model: TRIO, input: "x", voice: "speaker_9" }, 400, /voice speaker_9 is not offered/],
    [{ model: SOLO, input: "x", response_format: "aac" }, 400, /response_format aac is not available/],
    [{ model: SOLO, input: "x", speed: 0.1 }, 400, /speed/],
    [{ model: SOLO, input: "" }, 400, /input/],
  ])("refuses %j with %i", async (body, status, message) => {
    const res = await speak(node, body);
    expect(res.status).toBe(status);
    expect((await res.json()).error.message).toMatch(message);
  });

  it("notices a killed child at once: the runner fails, requests get 503, the node serves on", async () => {
    const r = await skulk([
      "sql",
      "--data-dir",
      node.dataDir,
      "--json",
      `SELECT pid FROM engine_processes WHERE kind = 'sherpa-onnx' AND runner_id = '${soloRunner}'`,
    ]);
    const [{ pid }] = JSON.parse(r.stdout) as { pid: number }[];
    Deno.kill(pid, "SIGKILL");
    await waitForState(
      node.url,
      (s) => runnerTag(s, soloRunner) === "RunnerFailed",
      "the voice's runner to fail",
    );
    expect(pidAlive(pid)).toBe(false);
    const res = await speak(node, { model: SOLO, input: "Anyone there?" });
    expect(res.status).toBe(503);
    expect((await res.json()).error.message).toMatch(/cannot serve now: .*sherpa-onnx was killed by SIGKILL/);
    // The node and its other voices go on.
    expect(pidAlive(node.pid)).toBe(true);
    expect((await wavOf(await speak(node, { model: TRIO, input: "Still here." }))).samples.length)
      .toBeGreaterThan(0);
  });
});

describe("a voice that cannot load", () => {
  it("fails its runner with the reason: a directory without tokens.txt", async () => {
    const node = await startDaemon();
    try {
      const dir = Deno.makeTempDirSync({ prefix: "skulk-broken-voice-" });
      Deno.copyFileSync(`${await tinyPiperVoice(1)}/model.onnx`, `${dir}/model.onnx`);
      const runnerId = await place(node, piperCardWire("skulk-test/broken-piper", dir));
      const state = await waitForState(
        node.url,
        (s) => runnerTag(s, runnerId) === "RunnerFailed",
        "the broken voice to fail",
      );
      expect(JSON.stringify(state.runners[runnerId])).toMatch(/has no tokens\.txt/);
      Deno.removeSync(dir, { recursive: true });
    } finally {
      await node.stop();
    }
  });
});

describe("Silero VAD in realtime sessions", () => {
  const STT = "skulk-test/tiny-whisper";
  let node: Daemon;
  let hello: Float32Array;

  beforeAll(async () => {
    node = await startDaemon({
      env: {
        SKULK_WHISPER_SERVER_BIN: await whisperServerBinary(),
        SKULK_SILERO_VAD_MODEL: await sileroModel(),
        SKULK_SPEECH_VAD: "silero",
      },
    });
    const runnerId = await place(node, whisperCardWire(STT, await tinyWhisperModel()));
    await ready(node, runnerId, "the tiny whisper");
    hello = pcm24(await espeakWav("hello there, this is a test of the speech system"));
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("takes the node's default detector, finds each utterance, and commits it in order", async () => {
    const { ws, next, events } = await realtimeSession(node.url, STT);
    try {
      const created = await next("session.created");
      expect((created.session as { turn_detection: { detector: string } }).turn_detection.detector).toBe(
        "silero",
      );
      ws.send(JSON.stringify({
        type: "session.update",
        session: { turn_detection: { type: "server_vad", detector: "silero", silence_duration_ms: 300 } },
      }));
      await next("session.updated");
      sendTwoUtterances(ws, hello);
      const first = await next("conversation.item.input_audio_transcription.completed");
      const second = await next("conversation.item.input_audio_transcription.completed");
      const order = events.map((e) => e.type).filter((t) =>
        typeof t === "string" && t.startsWith("input_audio_buffer.")
      );
      expect(order.slice(0, 6)).toEqual([
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
      ]);
      const commits = events.filter((e) => e.type === "input_audio_buffer.committed").map((e) => e.item_id);
      expect([first.item_id, second.item_id]).toEqual(commits.slice(0, 2));
      // The speech starts 0.5 s in and lasts as long as espeak-ng's clip; Silero's edges are within 0.3 s.
      const started = events.find((e) => e.type === "input_audio_buffer.speech_started")!;
      const stopped = events.find((e) => e.type === "input_audio_buffer.speech_stopped")!;
      const speechMs = (hello.length / 24000) * 1000;
      expect(started.audio_start_ms as number).toBeGreaterThanOrEqual(200);
      expect(started.audio_start_ms as number).toBeLessThanOrEqual(700);
      expect(stopped.audio_end_ms as number).toBeGreaterThan(500 + speechMs - 300);
      expect(stopped.audio_end_ms as number).toBeLessThan(500 + speechMs + 400);
    } finally {
      ws.close();
    }
  });

  it("hears nothing in silence and in a steady hum that an energy detector would call speech", async () => {
    const { ws, next, events } = await realtimeSession(node.url, STT);
    try {
      await next("session.created");
      const hum = new Float32Array(24000 * 2).map((_, i) => 0.05 * Math.sin((2 * Math.PI * 50 * i) / 24000));
      const energy = new EnergyVad(TurnDetectionSchema.parse({}), 24000);
      expect(energy.push(hum).map((e) => e.type)).toContain("speech_started");
      sendAudio(ws, new Float32Array(24000));
      sendAudio(ws, hum);
      ws.send(JSON.stringify({ type: "input_audio_buffer.clear" }));
      await next("input_audio_buffer.cleared");
      expect(events.map((e) => e.type)).toEqual(["session.created", "input_audio_buffer.cleared"]);
    } finally {
      ws.close();
    }
  });

  it("ends a session with 1011 when the Silero child dies, and the next session starts a new one", async () => {
    const first = await realtimeSession(node.url, STT);
    const closed = new Promise<number>((r) => (first.ws.onclose = (e) => r(e.code)));
    await first.next("session.created");
    sendAudio(first.ws, new Float32Array(2400));
    await new Promise((r) => setTimeout(r, 500)); // the child is up once an append has been answered
    const r = await skulk([
      "sql",
      "--data-dir",
      node.dataDir,
      "--json",
      "SELECT pid FROM engine_processes WHERE kind = 'sherpa-onnx-vad'",
    ]);
    const [{ pid }] = JSON.parse(r.stdout) as { pid: number }[];
    Deno.kill(pid, "SIGKILL");
    sendAudio(first.ws, new Float32Array(2400));
    const failed = await first.next("error");
    expect((failed.error as { code: string }).code).toBe("vad_failed");
    expect(await closed).toBe(1011);
    const second = await realtimeSession(node.url, STT);
    try {
      await second.next("session.created");
      sendAudio(second.ws, new Float32Array(12000));
      sendAudio(second.ws, hello);
      sendAudio(second.ws, new Float32Array(24000));
      await second.next("input_audio_buffer.committed");
    } finally {
      second.ws.close();
    }
  });

  it("refuses silero when the model is missing, naming how to get it", async () => {
    const other = await startDaemon({
      env: {
        SKULK_WHISPER_SERVER_BIN: await whisperServerBinary(),
        SKULK_SILERO_VAD_MODEL: "/nonexistent/silero.onnx",
      },
    });
    try {
      const runnerId = await place(other, whisperCardWire(STT, await tinyWhisperModel()));
      await ready(other, runnerId, "the tiny whisper");
      const { ws, next } = await realtimeSession(other.url, STT);
      try {
        const created = await next("session.created");
        expect((created.session as { turn_detection: { detector: string } }).turn_detection.detector).toBe(
          "energy",
        );
        ws.send(
          JSON.stringify({ type: "session.update", session: { turn_detection: { detector: "silero" } } }),
        );
        const e = await next("error");
        expect(e.error).toMatchObject({ code: "invalid_value" });
        expect((e.error as { message: string }).message).toMatch(/scripts\/fetch-silero-vad/);
      } finally {
        ws.close();
      }
    } finally {
      await other.stop();
    }
  });
});
