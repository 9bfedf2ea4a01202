/**
 * Speech through any node: two real nodes in one cluster over loopback, the speech models placed on one,
 * and every speech route (JSON, multipart, GET, the realtime WebSocket) asked of the other.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeAudio } from "../../src/audio/decode.ts";
import { CODEC_DELAY } from "../../src/audio/mp3.ts";
import { parseWav } from "../../src/audio/pcm.ts";
import { postInstance, runnerTag, singleNodeInstance, waitForState } from "../helpers/cluster.ts";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { oneMaster, waitFor } from "../helpers/multinode.ts";
import {
  espeakCardWire,
  espeakWav,
  sendManualTurn,
  tinyWhisperModel,
  whisperCardWire,
  whisperServerBinary,
} from "../helpers/speech.ts";

const TTS = "skulk-test/espeak";
const STT = "skulk-test/tiny-whisper";

describe("speech asked of a node that does not run it", () => {
  let a: Daemon;
  let b: Daemon;
  let hello: Uint8Array;

  beforeAll(async () => {
    const env = { SKULK_WHISPER_SERVER_BIN: await whisperServerBinary() };
    // a closes realtime sessions idle for 3 s, so the proxied close code can be checked.
    a = await startDaemon({ args: ["--no-mdns"], env: { ...env, SKULK_REALTIME_IDLE_MS: "3000" } });
    b = await startDaemon({ args: ["--no-mdns", "--peer", `127.0.0.1:${a.port}`], env });
    await oneMaster([a.url, b.url]);
    for (const card of [espeakCardWire(TTS), whisperCardWire(STT, await tinyWhisperModel())]) {
      const instance = singleNodeInstance(a.nodeId, card);
      const res = await postInstance(b, instance, [a, b]);
      expect(res.status).toBe(200);
      const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
      await waitForState(
        b.url,
        (s) => runnerTag(s, runnerId) === "RunnerReady",
        `${card.modelId} ready, seen from b`,
      );
    }
    // b forwards to a's API address, which it learns from a's telemetry (503 until then).
    await waitFor("b to reach a's speech model", async () => {
      const res = await fetch(`${b.url}/v1/audio/voices?model=${TTS}`);
      await res.body?.cancel();
      return res.status === 200;
    });
    hello = await espeakWav("hello from the other node");
  }, 180_000);
  afterAll(async () => {
    await Promise.all([b?.stop(), a?.stop()]);
  });

  it("speaks through b", async () => {
    const res = await fetch(`${b.url}/v1/audio/speech`, {
      method: "POST",
      body: JSON.stringify({ model: TTS, input: "Forwarded speech." }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-audio-sample-rate")).toBe("22050");
    const wav = parseWav(new Uint8Array(await res.arrayBuffer()));
    expect(wav.samples.length / wav.sampleRate).toBeGreaterThan(0.5);
  });

  it("streams MP3 through b, frames intact", async () => {
    const res = await fetch(`${b.url}/v1/audio/speech`, {
      method: "POST",
      body: JSON.stringify({
        model: TTS,
        input: "Forwarded speech, as MP3.",
        response_format: "mp3",
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("audio/mpeg");
    const decoded = await decodeAudio(new Uint8Array(await res.arrayBuffer()));
    expect(decoded.sampleRate).toBe(22050);
    expect((decoded.samples.length - CODEC_DELAY) / 22050).toBeGreaterThan(0.5);
  });

  it("lists voices through b", async () => {
    const res = await fetch(`${b.url}/v1/audio/voices?model=${TTS}`);
    expect(res.status).toBe(200);
    expect((await res.json()).voices).toContain("en");
  });

  it("transcribes a multipart upload through b", async () => {
    const form = new FormData();
    form.set("model", STT);
    form.set("response_format", "verbose_json");
    form.set("file", new File([hello as BlobPart], "hello.wav"));
    const res = await fetch(`${b.url}/v1/audio/transcriptions`, { method: "POST", body: form });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.duration).toBeCloseTo(parseWav(hello).samples.length / 22050, 2);
  });

  it("proxies a realtime session through b", async () => {
    const ws = new WebSocket(`${b.url.replace("http", "ws")}/v1/realtime?model=${STT}`);
    const types: string[] = [];
    const done = new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.onerror = () => reject(new Error("socket error"));
      ws.onclose = (e) => reject(new Error(`closed ${e.code} ${e.reason} after ${types.join(", ")}`));
      ws.onmessage = (e) => {
        const ev = JSON.parse(e.data);
        types.push(ev.type);
        if (ev.type === "session.created") {
          sendManualTurn(ws, hello);
        }
        if (ev.type === "conversation.item.input_audio_transcription.completed") resolve(ev);
      };
    });
    try {
      const completed = await done;
      expect(typeof completed.transcript).toBe("string");
      expect(types.filter((t) => !t.endsWith(".delta"))).toEqual([
        "session.created",
        "session.updated",
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.completed",
      ]);
    } finally {
      ws.close();
    }
  });

  it("mirrors the driving node's idle close (4408) through b", async () => {
    const ws = new WebSocket(`${b.url.replace("http", "ws")}/v1/realtime?model=${STT}`);
    const seen: string[] = [];
    ws.onmessage = (e) => {
      const ev = JSON.parse(e.data);
      seen.push(ev.type === "error" ? `error:${ev.error.code}` : ev.type);
    };
    const code = await new Promise<number>((r) => (ws.onclose = (e) => r(e.code)));
    expect(code).toBe(4408);
    expect(seen).toEqual(["session.created", "error:session_idle"]);
  });
});
