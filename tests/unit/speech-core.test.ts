/**
 * The pure parts of speech serving, table-driven: PCM/WAV, container sniffing, transcript formats,
 * delta normalisation, the energy VAD, engine choice per card, espeak-ng's voice table, the tiny whisper file.
 */
import { describe, expect, it } from "vitest";
import { decodeAudio, sniffContainer, UnsupportedAudio } from "../../src/audio/decode.ts";
import { encodeFlac } from "../../src/audio/flac.ts";
import { encodeOggOpus } from "../../src/audio/opus.ts";
import {
  AudioFormatError,
  encodeWav,
  floatToInt16,
  parseWav,
  pcm16Bytes,
  pcm16FromBytes,
  resample,
  rms,
} from "../../src/audio/pcm.ts";
import {
  normaliseDelta,
  renderTranscript,
  type Transcript,
  transcriptEvents,
} from "../../src/audio/transcript.ts";
import { EnergyVad, TurnDetectionSchema } from "../../src/audio/vad.ts";
import { engineKindFor } from "../../src/engines/dispatch.ts";
import { parseVoiceTable, wordsPerMinute } from "../../src/engines/espeak.ts";
import { parseCard } from "../../src/models/card.ts";
import { tinyWhisper } from "../../src/dev/whisper/tiny.ts";
import { tinyAudioProjector } from "../../src/dev/gguf/tiny-audio-projector.ts";

function tone(seconds: number, rate: number, amp: number, hz = 220): Float32Array {
  const out = new Float32Array(Math.round(seconds * rate));
  for (let i = 0; i < out.length; i++) out[i] = amp * Math.sin((2 * Math.PI * hz * i) / rate);
  return out;
}

describe("PCM and WAV", () => {
  it.each([8000, 16000, 22050, 24000, 48000])(
    "round-trips a %i Hz tone through WAV within 16-bit precision",
    (rate) => {
      const samples = tone(0.25, rate, 0.5);
      const back = parseWav(encodeWav({ samples, sampleRate: rate }));
      expect(back.sampleRate).toBe(rate);
      expect(back.samples.length).toBe(samples.length);
      let maxErr = 0;
      for (let i = 0; i < samples.length; i++) {
        maxErr = Math.max(
          maxErr,
          Math.abs(back.samples[i] - samples[i]),
        );
      }
      expect(maxErr).toBeLessThan(1 / 16000);
    },
  );

  it.each([
    [24000, 16000, 24000, 16000],
    [16000, 48000, 1600, 4800],
    [22050, 16000, 22050, 16000],
    [16000, 16000, 100, 100],
  ])("resamples %i Hz to %i Hz: %i samples become %i", (from, to, n, expected) => {
    expect(resample(new Float32Array(n), from, to).length).toBe(expected);
  });

  it("keeps a tone's loudness through resampling", () => {
    const t = tone(0.5, 24000, 0.5, 300);
    expect(rms(resample(t, 24000, 16000))).toBeCloseTo(rms(t), 2);
  });

  it("reads PCM16 bytes back exactly", () => {
    const s = Float32Array.from([0, 0.5, -0.5, 0.999, -1]);
    const back = pcm16FromBytes(pcm16Bytes(s));
    expect([...back].map((x) => Math.round(x * 1000) / 1000)).toEqual([0, 0.5, -0.5, 0.999, -1]);
  });

  it.each([
    ["not RIFF", new TextEncoder().encode("hello world, not audio"), /not a WAV/],
    [
      "no fmt",
      new Uint8Array([...new TextEncoder().encode("RIFF"), 4, 0, 0, 0, ...new TextEncoder().encode("WAVE")]),
      /no fmt/,
    ],
  ])("refuses %s", (_, bytes, message) => {
    expect(() => parseWav(bytes)).toThrow(message);
  });

  it("refuses a WAV with an unsupported encoding", () => {
    const wav = encodeWav({ samples: new Float32Array(100), sampleRate: 16000 });
    new DataView(wav.buffer).setUint16(20, 2, true); // ADPCM
    expect(() => parseWav(wav)).toThrow(AudioFormatError);
  });
});

describe("containers", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  it.each([
    ["wav", encodeWav({ samples: new Float32Array(10), sampleRate: 16000 })],
    ["flac", enc('fLaC\0\0\0"')],
    ["ogg", enc("OggS\0\x02")],
    ["webm", new Uint8Array([0x1a, 0x45, 0xdf, 0xa3, 0x9f])],
    ["mp3", enc("ID3\x04\0\0")],
    ["mp3", new Uint8Array([0xff, 0xfb, 0x90, 0x64])],
    [null, enc("\0\0\0\x18ftypM4A ")],
    [null, enc("plain text")],
  ])("sniffs %s", (expected, bytes) => {
    expect(sniffContainer(bytes)).toBe(expected);
  });

  it("names an unsupported upload in a 415-ready error", async () => {
    await expect(decodeAudio(new TextEncoder().encode("\0\0\0\x18ftypM4A isom"), "a.m4a")).rejects.toThrow(
      UnsupportedAudio,
    );
    await expect(decodeAudio(new TextEncoder().encode("\0\0\0\x18ftypM4A isom"), "a.m4a")).rejects.toThrow(
      /MP4\/M4A/,
    );
  });

  it("calls a truncated FLAC corrupt, not unsupported", async () => {
    await expect(decodeAudio(new TextEncoder().encode("fLaC garbage that is not a stream"))).rejects.toThrow(
      AudioFormatError,
    );
  });
});

describe("transcript formats", () => {
  const t: Transcript = {
    task: "transcribe",
    language: "en",
    duration: 3.5,
    text: "Hello there. General Kenobi.",
    segments: [{ id: 0, start: 0, end: 1.25, text: " Hello there." }, {
      id: 1,
      start: 1.25,
      end: 3661.5,
      text: " General Kenobi.",
    }],
  };
  it.each(
    [
      ["json", '{"text":"Hello there. General Kenobi."}', "application/json"],
      ["text", "Hello there. General Kenobi.\n", "text/plain; charset=utf-8"],
      [
        "srt",
        "1\n00:00:00,000 --> 00:00:01,250\nHello there.\n\n2\n00:00:01,250 --> 01:01:01,500\nGeneral Kenobi.\n",
        "application/x-subrip; charset=utf-8",
      ],
      [
        "vtt",
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.250\nHello there.\n\n00:00:01.250 --> 01:01:01.500\nGeneral Kenobi.\n",
        "text/vtt; charset=utf-8",
      ],
    ] as const,
  )("renders %s", (format, body, type) => {
    expect(renderTranscript(t, format)).toEqual({ body, contentType: type });
  });

  it("renders verbose_json with segments and duration", () => {
    const v = JSON.parse(renderTranscript(t, "verbose_json").body);
    expect(v).toMatchObject({ task: "transcribe", language: "en", duration: 3.5, text: t.text });
    expect(v.segments).toHaveLength(2);
  });

  it("streams one delta per segment, then completed", () => {
    const events = transcriptEvents(t).map((e) => e.split("\n")[0]);
    expect(events).toEqual([
      "event: transcription.delta",
      "event: transcription.delta",
      "event: transcription.completed",
    ]);
  });

  it.each([
    [{ type: "transcript.text.delta", delta: "hi" }, "hi"],
    [{ type: "transcription.delta", delta: "yo" }, "yo"],
    [{ choices: [{ delta: { content: "abc" } }] }, "abc"],
    [{ choices: [{ delta: { role: "assistant" } }] }, null],
    [{ choices: [{ text: "legacy" }] }, "legacy"],
    ["nope", null],
  ])("normalises %j", (chunk, expected) => {
    expect(normaliseDelta(chunk)).toBe(expected);
  });
});

describe("energy VAD", () => {
  const rate = 24000;
  const vadFor = (over: Record<string, unknown> = {}) => new EnergyVad(TurnDetectionSchema.parse(over), rate);
  const concat = (...parts: Float32Array[]) => {
    const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) (out.set(p, at), at += p.length);
    return out;
  };

  it("finds one utterance between silences, with the prefix padding", () => {
    const audio = concat(new Float32Array(rate), tone(1, rate, 0.3), new Float32Array(rate));
    const events = vadFor().push(audio);
    expect(events.map((e) => e.type)).toEqual(["speech_started", "speech_stopped"]);
    expect(events[0].atSample).toBe(rate - 0.2 * rate);
    // Stops after 400 ms of silence following the tone.
    expect(events[1].atSample).toBe(2 * rate + 0.4 * rate);
  });

  it("gives the same events however the audio is chunked", () => {
    const audio = concat(new Float32Array(rate / 2), tone(0.6, rate, 0.3), new Float32Array(rate));
    const whole = vadFor().push(audio);
    const vad = vadFor();
    const chunked = [];
    for (let i = 0; i < audio.length; i += 777) chunked.push(...vad.push(audio.subarray(i, i + 777)));
    expect(chunked).toEqual(whole);
  });

  it.each([
    [0, 0.006, true],
    [3, 0.006, false],
    [3, 0.05, true],
  ])("aggressiveness %i with a tone of amplitude %f: speech %s", (aggressiveness, amp, speech) => {
    const events = vadFor({ aggressiveness }).push(concat(tone(0.5, rate, amp), new Float32Array(rate)));
    expect(events.some((e) => e.type === "speech_started")).toBe(speech);
  });

  it("ignores a click shorter than minimum_speech_ms", () => {
    expect(vadFor({ minimum_speech_ms: 120 }).push(concat(tone(0.05, rate, 0.5), new Float32Array(rate))))
      .toEqual([]);
  });

  it("cuts an utterance at maximum_utterance_ms", () => {
    // 2.5 s of speech: cut at 1.0 s; the next utterance starts with 200 ms of padding (0.8 s) and is cut at 1.8 s.
    const events = vadFor({ maximum_utterance_ms: 1000 }).push(tone(2.5, rate, 0.3));
    expect(events.map((e) => [e.type, e.atSample / rate])).toEqual([
      ["speech_started", 0],
      ["speech_stopped", 1],
      ["speech_started", 0.8],
      ["speech_stopped", 1.8],
      ["speech_started", 1.6],
    ]);
  });
});

describe("engine per card", () => {
  const base = {
    model_id: "m/x",
    storage_size: { in_bytes: 1 },
    n_layers: 1,
    hidden_size: 1,
    supports_tensor: false,
  };
  it.each([
    [{ tasks: ["TextGeneration"], gguf_file: "a.gguf" }, "llama-server"],
    [{ tasks: ["TextEmbedding"], gguf_file: "a.gguf" }, "llama-server"],
    [
      { tasks: ["SpeechToText"], family: "whisper", gguf_file: "ggml-base.bin", audio: { kind: "stt" } },
      "whisper-server",
    ],
    [{ tasks: ["SpeechToText"], gguf_file: "ggml-tiny.en.bin" }, "whisper-server"],
    [{
      tasks: ["SpeechToText"],
      family: "voxtral",
      gguf_file: "voxtral.gguf",
      mmproj_file: "mmproj.gguf",
      audio: { kind: "stt" },
    }, "llama-server"],
    [{ tasks: ["TextToSpeech"], family: "espeak", audio: { kind: "tts" } }, "espeak-ng"],
    [{ tasks: ["TextToSpeech"], family: "piper", audio: { kind: "tts" } }, "sherpa-onnx"],
    [{ tasks: ["TextToSpeech"], family: "Kokoro", audio: { kind: "tts" } }, "sherpa-onnx"],
    [{ tasks: ["TextToSpeech"], family: "vits" }, "sherpa-onnx"],
  ])("%j is served by %s", (card, kind) => {
    expect(engineKindFor(parseCard({ ...base, ...card }))).toEqual({ kind });
  });

  it.each([
    [{
      tasks: ["TextToSpeech"],
      family: "kokoro",
      audio: { kind: "tts" },
      placement: { compatible_backends: ["mlx_audio", "mlx_audio-metal"] },
    }, /MLX build of a kokoro voice/],
    [{ tasks: ["TextToSpeech"], family: "bark", audio: { kind: "tts" } }, /Piper, VITS and Kokoro voices/],
    [{ tasks: ["SpeechToText"], family: "parakeet", audio: { kind: "stt" } }, /no engine here/],
    [{ tasks: ["SpeechToText"], gguf_file: "voxtral.gguf", audio: { kind: "stt" } }, /no audio projector/],
  ])("%j has no engine here", (card, message) => {
    const r = engineKindFor(parseCard({ ...base, ...card }));
    expect("error" in r && r.error).toMatch(message);
  });
});

describe("espeak-ng", () => {
  it("reads its voice table", () => {
    const table = `Pty Language       Age/Gender VoiceName          File                 Other Languages
 5  af              --/M      Afrikaans          gmw/af
 5  en-gb-x-gbclan  --/M      English_(Lancaster) gmw/en-GB-x-gbclan   (en-gb 3)(en 5)
 2  en-gb           --/M      English_(Great_Britain) gmw/en  (en 2)
 5  fr-fr           --/F      French_(France)    roa/fr               (fr 5)
`;
    expect(parseVoiceTable(table)).toEqual([
      { id: "af", language: "af", gender: "male", name: "Afrikaans", aliases: [] },
      {
        id: "en-gb-x-gbclan",
        language: "en-gb-x-gbclan",
        gender: "male",
        name: "English (Lancaster)",
        aliases: ["en-gb", "en"],
      },
      { id: "en-gb", language: "en-gb", gender: "male", name: "English (Great Britain)", aliases: ["en"] },
      { id: "fr-fr", language: "fr-fr", gender: "female", name: "French (France)", aliases: ["fr"] },
    ]);
  });

  it.each([[1, 175], [2, 350], [0.25, 80], [4, 450], [0.5, 88]])(
    "speed %f is %i words per minute",
    (speed, wpm) => {
      expect(wordsPerMinute(speed)).toBe(wpm);
    },
  );
});

describe("tiny audio projector", () => {
  it("is a qwen2a clip projector whose output width is the text model's", () => {
    const { metadata, tensors } = tinyAudioProjector({ projectionDim: 96, seed: 2 });
    expect(metadata["clip.projector_type"].value).toBe("qwen2a");
    expect(metadata["clip.has_audio_encoder"].value).toBe(true);
    expect(metadata["clip.audio.projection_dim"].value).toBe(96);
    expect(tensors.find((t) => t.name === "mm.a.fc.weight")!.dims).toEqual([64, 96]);
    // Convolution kernels are f16 (ggml's CPU im2col needs that); norms stay f32.
    expect(tensors.find((t) => t.name === "a.conv1d.1.weight")!.type).toBe(1);
    expect(tensors.find((t) => t.name === "a.blk.0.ln1.weight")!.type).toBe(0);
    const again = tinyAudioProjector({ projectionDim: 96, seed: 2 }).tensors;
    expect(again.every((t, i) => t.data.every((b, j) => b === tensors[i].data[j]))).toBe(true);
  });
});

describe("tiny whisper model", () => {
  it("is deterministic by seed and starts with whisper.cpp's header", () => {
    const a = tinyWhisper({ seed: 3 });
    const b = tinyWhisper({ seed: 3 });
    const c = tinyWhisper({ seed: 4 });
    expect(a.length).toBe(b.length);
    expect(a.every((x, i) => x === b[i])).toBe(true);
    expect(a.some((x, i) => x !== c[i])).toBe(true);
    const dv = new DataView(a.buffer);
    expect(dv.getUint32(0, true)).toBe(0x67676d6c);
    // n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
    expect(Array.from({ length: 11 }, (_, i) => dv.getInt32(4 + 4 * i, true))).toEqual([
      51865,
      1500,
      64,
      2,
      1,
      448,
      64,
      2,
      1,
      80,
      1,
    ]);
  });

  it.each([{ width: 65, heads: 2 }, { audioLayers: 0 }, { seed: -1 }])("refuses %j", (opts) => {
    expect(() => tinyWhisper(opts)).toThrow(RangeError);
  });
});

describe("FLAC encoder", () => {
  it.each([
    ["a tone", 22050, 1.3],
    ["a block-sized tone", 16000, 4096 / 16000],
    ["a short tone", 48000, 0.001],
    ["an odd rate", 11025, 0.5],
  ])("codes %s at %i Hz losslessly (checked by the FLAC decoder)", async (_, rate, seconds) => {
    const t = tone(seconds, rate, 0.4, 330);
    const flac = encodeFlac(t, rate);
    const back = await decodeAudio(flac);
    expect(back.sampleRate).toBe(rate);
    expect(back.samples.length).toBe(t.length);
    // The decoder scales positive samples by 1/32767: undo that to compare the 16-bit integers exactly.
    const ints = floatToInt16(t);
    expect(back.samples.every((x, i) => Math.round(x * (x >= 0 ? 32767 : 32768)) === ints[i])).toBe(true);
  });
});

describe("Ogg Opus encoder", () => {
  it.each([[22050, 1.3], [16000, 0.02], [48000, 0.5], [24000, 2.01]])(
    "codes %i Hz audio of %f s that decodes to the same length",
    async (rate, seconds) => {
      const t = tone(seconds, rate, 0.4, 330);
      const back = await decodeAudio(await encodeOggOpus(t, rate));
      expect(back.container).toBe("ogg");
      expect(Math.abs(back.samples.length / back.sampleRate - t.length / rate)).toBeLessThan(0.0005);
      expect(rms(back.samples)).toBeCloseTo(rms(t), 1);
    },
  );
});

describe("the audio LLM's transcript budget", () => {
  it.each([[0, 16], [4, 46], [30, 240], [60, 448], [600, 448]])(
    "%d s of audio may take %d tokens",
    async (s, cap) => {
      const { transcriptTokenCap } = await import("../../src/serving/speech.ts");
      expect(transcriptTokenCap(s)).toBe(cap);
    },
  );
});
