/**
 * bench/speech: speech through a real node in one run. Each engine's time from placement to ready; TTS
 * real-time factor (synthesis time over audio length: espeak-ng, and sherpa-onnx with the tiny random Piper
 * voice); transcription real-time factor with the tiny random whisper model (straight to
 * whisper-server and through Skulk, interleaved, so the proxy's share shows), realtime latency from
 * `commit` to `completed`, what parallel transcriptions cost (whisper-server runs one at a time; Skulk
 * queues them), and how fast the in-process encoders turn speech into MP3, FLAC and Opus.
 *   deno run -A bench/speech.ts [--requests N] [--parallel N]
 */
import { encodeFlac } from "../src/audio/flac.ts";
import { encodeMp3 } from "../src/audio/mp3.ts";
import { encodeOggOpus } from "../src/audio/opus.ts";
import { parseWav, resample } from "../src/audio/pcm.ts";
import { runnerTag, singleNodeInstance, waitForState } from "../tests/helpers/cluster.ts";
import { enginePorts, startDaemon } from "../tests/helpers/daemon.ts";
import { engineBinary, tinyModel } from "../tests/helpers/models.ts";
import {
  audioLlmCardWire,
  espeakCardWire,
  espeakWav,
  piperCardWire,
  tinyAudioProjectorModel,
  tinyPiperVoice,
  tinyWhisperModel,
  whisperCardWire,
  whisperServerBinary,
} from "../tests/helpers/speech.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const REQUESTS = arg("requests", 8);
const PARALLEL = arg("parallel", 4);
const TTS = "bench/espeak";
const NEURAL = "bench/tiny-piper";
const STT = "bench/tiny-whisper";
const LLM = "bench/tiny-audio-llm";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x: number, d = 3) => x.toFixed(d);

const node = await startDaemon({
  env: {
    SKULK_WHISPER_SERVER_BIN: await whisperServerBinary(),
    SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
    SKULK_LOG_LEVEL: "warning",
  },
});
try {
  for (
    const card of [
      espeakCardWire(TTS),
      piperCardWire(NEURAL, await tinyPiperVoice(1)),
      whisperCardWire(STT, await tinyWhisperModel()),
      audioLlmCardWire(LLM, await tinyModel(), await tinyAudioProjectorModel(64)),
    ]
  ) {
    const instance = singleNodeInstance(node.nodeId, card);
    const placed = performance.now();
    await fetch(`${node.url}/instance`, { method: "POST", body: JSON.stringify({ instance }) }).then((r) =>
      r.body?.cancel()
    );
    const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
    await waitForState(node.url, (s) => runnerTag(s, runnerId) === "RunnerReady", card.modelId, 120_000);
    // Placement to ready: for the sherpa-onnx voice this is its child's start (a Deno process) and load.
    console.log(`${card.modelId}: placed to ready in ${fmt((performance.now() - placed) / 1000, 2)} s`);
  }
  const [whisperPort] = await enginePorts(node.dataDir, "whisper-server");

  // 1. TTS: real-time factor through /v1/audio/speech, espeak-ng and the tiny sherpa-onnx voice side by side.
  const texts = [
    "Hello.",
    "The quick brown fox jumps over the lazy dog.",
    "Speech served by the cluster like any model: launch it, and every node answers OpenAI's audio routes with the same voice, on Linux and Macs alike.",
  ];
  for (const [model, what] of [[TTS, "espeak-ng"], [NEURAL, "sherpa-onnx, tiny random Piper voice"]]) {
    console.log(`text-to-speech (${what}), median of ${REQUESTS}`);
    for (const input of texts) {
      const times: number[] = [];
      let seconds = 0;
      for (let i = 0; i < REQUESTS; i++) {
        const t0 = performance.now();
        const res = await fetch(`${node.url}/v1/audio/speech`, {
          method: "POST",
          body: JSON.stringify({ model, input, response_format: "wav" }),
        });
        const wav = parseWav(new Uint8Array(await res.arrayBuffer()));
        times.push((performance.now() - t0) / 1000);
        seconds = wav.samples.length / wav.sampleRate;
      }
      console.log(
        `  ${String(input.length).padStart(4)} chars -> ${fmt(seconds, 2)} s audio in ${
          fmt(median(times))
        } s: RTF ${fmt(median(times) / seconds)}`,
      );
    }
  }

  // 1b. The response formats' encoders, in-process, on the longest text's speech: times real time.
  const spoken = parseWav(await espeakWav(texts.at(-1)!));
  const spokenSeconds = spoken.samples.length / spoken.sampleRate;
  const encoders: [string, () => unknown][] = [
    ["mp3 (64 kbit/s)", () => encodeMp3(spoken.samples, spoken.sampleRate)],
    ["flac", () => encodeFlac(spoken.samples, spoken.sampleRate)],
    ["opus", () => encodeOggOpus(spoken.samples, spoken.sampleRate)],
  ];
  console.log(
    `encoding ${fmt(spokenSeconds, 2)} s of speech at ${spoken.sampleRate} Hz, median of ${REQUESTS}`,
  );
  for (const [name, encode] of encoders) {
    const times: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const t0 = performance.now();
      await encode();
      times.push((performance.now() - t0) / 1000);
    }
    console.log(
      `  ${name.padEnd(16)} ${fmt(median(times) * 1000, 1)} ms: x${
        fmt(spokenSeconds / median(times), 1)
      } real time`,
    );
  }

  // 2. Transcription: the same audio straight to whisper-server and through Skulk, interleaved.
  const speech = await espeakWav(
    "Testing the transcription path of the cluster with a short sentence of speech.",
  );
  const audioSeconds = parseWav(speech).samples.length / 22050;
  const direct: number[] = [];
  const proxied: number[] = [];
  const post = async (url: string, withModel: boolean) => {
    const form = new FormData();
    if (withModel) form.set("model", STT);
    form.set("response_format", "json");
    form.set("file", new File([speech as BlobPart], "s.wav"));
    const t0 = performance.now();
    const res = await fetch(url, { method: "POST", body: form });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    return (performance.now() - t0) / 1000;
  };
  for (let i = 0; i < REQUESTS; i++) {
    direct.push(await post(`http://127.0.0.1:${whisperPort}/inference`, false));
    proxied.push(await post(`${node.url}/v1/audio/transcriptions`, true));
  }
  console.log(
    `transcription (tiny random whisper, ${fmt(audioSeconds, 2)} s of speech), median of ${REQUESTS}`,
  );
  console.log(`  whisper-server direct: ${fmt(median(direct))} s, RTF ${fmt(median(direct) / audioSeconds)}`);
  console.log(
    `  through skulk:         ${fmt(median(proxied))} s, RTF ${fmt(median(proxied) / audioSeconds)} (x${
      fmt(median(proxied) / median(direct), 2)
    } of direct; decode + resample + format)`,
  );

  // 3. Parallel transcriptions: whisper-server holds one at a time; Skulk queues them in arrival order.
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: PARALLEL }, () => post(`${node.url}/v1/audio/transcriptions`, true)),
  );
  const wall = (performance.now() - t0) / 1000;
  console.log(
    `  ${PARALLEL} in parallel: ${fmt(wall)} s wall = x${
      fmt(wall / median(proxied), 2)
    } one request (queued: ~x${PARALLEL} expected)`,
  );

  // 3b. The token-streamed path: llama-server with a tiny audio projector, time to the first delta and to completed.
  const firsts: number[] = [];
  const totals: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const form = new FormData();
    form.set("model", LLM);
    form.set("stream", "true");
    form.set("file", new File([speech as BlobPart], "s.wav"));
    const t = performance.now();
    const res = await fetch(`${node.url}/v1/audio/transcriptions`, { method: "POST", body: form });
    let first = 0;
    let text = "";
    for await (const chunk of res.body!) {
      text += new TextDecoder().decode(chunk);
      if (!first && text.includes("transcription.delta")) first = performance.now() - t;
    }
    firsts.push(first);
    totals.push(performance.now() - t);
  }
  console.log(
    `  audio LLM (tiny llama + qwen2a projector, streamed): first delta ${
      fmt(median(firsts), 0)
    } ms, completed ${fmt(median(totals), 0)} ms (up to 448 random tokens)`,
  );

  // 4. Realtime: commit to completed over the WebSocket, manual turns.
  const a = parseWav(speech);
  const pcm24 = resample(a.samples, a.sampleRate, 24000);
  const bytes = new Uint8Array(pcm24.length * 2);
  const dv = new DataView(bytes.buffer);
  pcm24.forEach((s, i) => dv.setInt16(i * 2, Math.round(Math.max(-1, Math.min(1, s)) * 32767), true));
  const chunks: string[] = [];
  for (let i = 0; i < bytes.length; i += 9600) {
    let bin = "";
    for (const b of bytes.subarray(i, i + 9600)) bin += String.fromCharCode(b);
    chunks.push(btoa(bin));
  }
  const ws = new WebSocket(`${node.url.replace("http", "ws")}/v1/realtime?model=${STT}`);
  const inbox: Record<string, unknown>[] = [];
  let wake = () => {};
  ws.onmessage = (e) => {
    inbox.push(JSON.parse(e.data));
    wake();
  };
  await new Promise((r) => (ws.onopen = r));
  const waitFor = async (type: string) => {
    for (;;) {
      const i = inbox.findIndex((e) => e.type === type);
      if (i >= 0) return inbox.splice(0, i + 1).at(-1)!;
      await new Promise<void>((r) => (wake = r));
    }
  };
  await waitFor("session.created");
  ws.send(JSON.stringify({ type: "session.update", session: { turn_detection: null } }));
  await waitFor("session.updated");
  const latencies: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    for (const audio of chunks) ws.send(JSON.stringify({ type: "input_audio_buffer.append", audio }));
    const t = performance.now();
    ws.send(JSON.stringify({ type: "input_audio_buffer.commit" }));
    await waitFor("conversation.item.input_audio_transcription.completed");
    latencies.push(performance.now() - t);
  }
  ws.close();
  console.log(
    `realtime: commit -> completed for ${fmt(audioSeconds, 2)} s of audio, median ${
      fmt(median(latencies), 0)
    } ms (min ${fmt(Math.min(...latencies), 0)}, max ${fmt(Math.max(...latencies), 0)})`,
  );
} finally {
  await node.stop();
}
