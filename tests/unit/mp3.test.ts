/**
 * Our MP3 encoder judged by independent decoders: mpg123 (the audio-decode library) and Debian's
 * `lame --decode`. Rates, exact lengths, SNR per rate and bit rate, silence, frame sizes, the streamed form.
 */
import { beforeAll, describe, expect, it } from "vitest";
import decodeWithMpg123 from "audio-decode";
import { decodeAudio } from "../../src/audio/decode.ts";
import {
  CODEC_DELAY,
  encodeMp3,
  encodeMp3FromPcm16,
  Mp3Encoder,
  mp3EncoderStream,
  mp3Format,
  mp3RateFor,
} from "../../src/audio/mp3.ts";
import { BitWriter } from "../../src/audio/mp3-bits.ts";
import { frameBytes, header, sideInfo, sideInfoBytes } from "../../src/audio/mp3-frame.ts";
import { type CodedGranule, type GranuleInfo, writeGranule } from "../../src/audio/mp3-granule.ts";
import { PAIR_TABLES, type PairTable, QUAD_A, SFB_WIDTHS } from "../../src/audio/mp3-tables.ts";
import { parseWav, pcm16Bytes, pcm16FromBytes, resample, rms } from "../../src/audio/pcm.ts";
import { ReferenceDecoder } from "../helpers/mp3-reference.ts";
import { espeakWav, snr } from "../helpers/speech.ts";

/** The shift of `decoded` against `input` (within the codec delay) that matches them best. */
function bestLag(input: Float32Array, decoded: Float32Array): number {
  let best = { lag: 0, err: Infinity };
  // A sparse sample of the input is enough to tell the lags apart and keeps this cheap.
  const step = Math.max(1, Math.floor((input.length - 2 * CODEC_DELAY) / 3000));
  for (let lag = -CODEC_DELAY; lag <= CODEC_DELAY; lag += 1) {
    let err = 0;
    for (let i = CODEC_DELAY; i < input.length - CODEC_DELAY; i += step) {
      err += ((decoded[i + lag] ?? 0) - input[i]) ** 2;
    }
    if (err < best.err) best = { lag, err };
  }
  return best.lag;
}

/** A linear sweep at half scale from 100 Hz up to `to`. */
function sweep(rate: number, seconds: number, to: number): Float32Array {
  const out = new Float32Array(Math.round(rate * seconds));
  let phase = 0;
  for (let i = 0; i < out.length; i++) {
    phase += (2 * Math.PI * (100 + ((to - 100) * i) / out.length)) / rate;
    out[i] = 0.5 * Math.sin(phase);
  }
  return out;
}

interface Frame {
  at: number;
  size: number;
  mpeg1: boolean;
  rate: number;
  kbps: number;
  mono: boolean;
}

/** Walks the frames by their headers alone (ISO 11172-3 / 13818-3 layout), independent of the encoder. */
function frames(b: Uint8Array): Frame[] {
  const out: Frame[] = [];
  for (let at = 0; at < b.length;) {
    expect(b[at], `sync at byte ${at}`).toBe(0xff);
    expect(b[at + 1] & 0xe0, `sync at byte ${at}`).toBe(0xe0);
    const mpeg1 = ((b[at + 1] >> 3) & 3) === 3;
    expect((b[at + 1] >> 1) & 3, "layer III").toBe(1);
    const kbps = (mpeg1
      ? [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
      : [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160])[b[at + 2] >> 4];
    const rate = [44100, 48000, 32000][(b[at + 2] >> 2) & 3] / (mpeg1 ? 1 : 2);
    const padding = (b[at + 2] >> 1) & 1;
    const size = Math.floor(((mpeg1 ? 144 : 72) * kbps * 1000) / rate) + padding;
    out.push({ at, size, mpeg1, rate, kbps, mono: b[at + 3] >> 6 === 3 });
    at += size;
    expect(at, "the last frame ends at the end of the file").toBeLessThanOrEqual(b.length);
  }
  return out;
}

let speech: { samples: Float32Array; sampleRate: number };
beforeAll(async () => {
  speech = parseWav(await espeakWav("The quick brown fox jumps over the lazy dog."));
});

describe("MP3 encoder, decoded by mpg123", () => {
  // SNR floors are the measured values less about 4 dB (espeak-ng speech, resampled for the other rates).
  it.each([
    [16000, "default", 27],
    [16000, 8, 7],
    [16000, 32, 20],
    [22050, "default", 28],
    [22050, 32, 18],
    [22050, 128, 43],
    [24000, "default", 29],
    [24000, 160, 50],
    [32000, "default", 29],
    [44100, "default", 28],
    [44100, 320, 54],
    [48000, "default", 31],
    [48000, 32, 18],
  ] as [number, number | "default", number][])(
    "codes speech at %i Hz, %s kbit/s, to the exact length with SNR above %i dB",
    async (rate, kbps, floor) => {
      const input = resample(speech.samples, speech.sampleRate, rate);
      const decoded = await decodeAudio(encodeMp3(input, rate, kbps === "default" ? undefined : kbps));
      expect(decoded.container).toBe("mp3");
      expect(decoded.sampleRate).toBe(rate);
      // The Info tag's encoder delay and padding let the decoder trim to the input exactly.
      expect(decoded.samples.length).toBe(input.length);
      expect(bestLag(input, decoded.samples)).toBe(0);
      expect(snr(input, decoded.samples)).toBeGreaterThan(floor);
    },
  );

  it.each([16000, 22050, 24000, 32000, 44100, 48000])(
    "codes a sweep at %i Hz with its default bit rate above 55 dB SNR",
    async (rate) => {
      const input = sweep(rate, 1.5, Math.min(4000, rate / 4));
      const decoded = await decodeAudio(encodeMp3(input, rate));
      expect(decoded.samples.length).toBe(input.length);
      expect(snr(input, decoded.samples)).toBeGreaterThan(55);
    },
  );

  it("spends its bits where they help: more bit rate, less noise", async () => {
    const levels: number[] = [];
    for (const kbps of [16, 32, 64, 128]) {
      levels.push(snr(speech.samples, (await decodeAudio(encodeMp3(speech.samples, 22050, kbps))).samples));
    }
    expect(levels).toEqual([...levels].sort((a, b) => a - b));
    expect(levels[3] - levels[0]).toBeGreaterThan(20);
  });

  it("codes silence as silence, in few bytes", async () => {
    const input = new Float32Array(22050 * 2);
    const mp3 = encodeMp3(input, 22050);
    const decoded = await decodeAudio(mp3);
    expect(decoded.samples.length).toBe(input.length);
    expect(decoded.samples.every((x) => x === 0)).toBe(true);
    // Constant bit rate: the size is the bit rate's, however little there is to say.
    expect(mp3.length).toBeGreaterThan(0.9 * 2 * 64000 / 8);
    expect(mp3.length).toBeLessThan(1.1 * 2 * 64000 / 8 + 2 * 209);
  });

  it("reports no decoding errors and no clipping for full-scale input", async () => {
    const loud = sweep(22050, 1, 5000).map((x) => Math.sign(x) * Math.min(1, Math.abs(x) * 2.2));
    const result = await decodeWithMpg123(encodeMp3(loud, 22050)) as unknown as {
      channelData: Float32Array[];
      errors?: unknown[];
    };
    expect(result.errors ?? []).toEqual([]);
    expect(snr(loud, result.channelData[0])).toBeGreaterThan(25);
  });

  it("clips input beyond full scale and takes NaN for silence, rather than coding a broken frame", async () => {
    const wild = sweep(22050, 0.5, 3000).map((x, i) => (i % 1000 === 0 ? NaN : x * 40));
    const decoded = await decodeAudio(encodeMp3(wild, 22050));
    const clipped = wild.map((x) => (Number.isNaN(x) ? 0 : Math.max(-1, Math.min(1, x))));
    expect(decoded.samples.length).toBe(wild.length);
    expect(snr(clipped, decoded.samples)).toBeGreaterThan(20);
  });

  it("resamples a rate MP3 lacks to the nearest one above", async () => {
    expect(mp3RateFor(8000)).toBe(16000);
    expect(mp3RateFor(11025)).toBe(16000);
    expect(mp3RateFor(96000)).toBe(48000);
    const input = resample(speech.samples, speech.sampleRate, 11025);
    const decoded = await decodeAudio(encodeMp3(input, 11025));
    expect(decoded.sampleRate).toBe(16000);
    expect(Math.abs(decoded.samples.length / 16000 - input.length / 11025)).toBeLessThan(0.001);
    expect(rms(decoded.samples)).toBeCloseTo(rms(input), 2);
  });
});

describe("MP3 framing", () => {
  it.each([
    [16000, 8],
    [22050, 64],
    [22050, 160],
    [24000, 24],
    [32000, 32],
    [44100, 128],
    [48000, 320],
  ])("at %i Hz and %i kbit/s every frame is the size its header says", (rate, kbps) => {
    const mp3 = encodeMp3(resample(speech.samples, 22050, rate), rate, kbps);
    const list = frames(mp3);
    expect(list.at(-1)!.at + list.at(-1)!.size).toBe(mp3.length);
    expect(list.every((f) => f.rate === rate && f.mono && f.mpeg1 === rate >= 32000)).toBe(true);
    // The audio frames keep the asked bit rate; only the Info frame may take a bigger one to fit its tag.
    expect(new Set(list.slice(1).map((f) => f.kbps))).toEqual(new Set([kbps]));
    // main_data_begin points back into earlier frames no further than the field and a standard decoder's
    // 7680-bit buffer allow, and never before the first audio frame.
    const begins = list.slice(1).map((f) =>
      f.mpeg1 ? (mp3[f.at + 4] << 1) | (mp3[f.at + 5] >> 7) : mp3[f.at + 4]
    );
    expect(begins[0]).toBe(0);
    for (const [i, begin] of begins.entries()) {
      expect(begin + list[i + 1].size <= 960 || begin === 0, `frame ${i + 1}`).toBe(true);
    }
    // The Info frame counts the audio frames and the bytes of the file.
    const info = list[0];
    const tag = info.at + 4 + (info.mpeg1 ? 17 : 9);
    expect(new TextDecoder().decode(mp3.subarray(tag, tag + 4))).toBe("Info");
    const dv = new DataView(mp3.buffer, mp3.byteOffset);
    expect(dv.getUint32(tag + 8)).toBe(list.length - 1);
    expect(dv.getUint32(tag + 12)).toBe(mp3.length);
  });

  it("refuses rates and bit rates Layer III has not, naming those it has", () => {
    expect(() => mp3Format(11025)).toThrow(/11025 Hz is not supported; use 16000, 22050, 24000/);
    expect(() => mp3Format(22050, 192)).toThrow(/192 kbit\/s is not available at 22050 Hz; use 8, 16,/);
    expect(() => mp3Format(44100, 8)).toThrow(/use 32, 40/);
    expect(mp3Format(22050)).toMatchObject({ bitrate: 64, mpeg1: false, frameSamples: 576 });
    expect(mp3Format(44100)).toMatchObject({ bitrate: 96, mpeg1: true, frameSamples: 1152 });
  });

  it("uses complete prefix codes (the Huffman tables are intact)", () => {
    for (const t of [...PAIR_TABLES, { id: 32, ...QUAD_A }]) {
      const words = t.codes.map((c, i) => c.toString(2).padStart(t.lengths[i], "0"));
      const kraft = t.lengths.reduce((s, l) => s + 2 ** -l, 0);
      expect(kraft, `table ${t.id}`).toBe(1);
      for (const a of words) {
        expect(words.filter((b) => b.startsWith(a)), `table ${t.id}: ${a} is a prefix`).toEqual([a]);
      }
    }
  });
});

describe("streamed MP3", () => {
  it("gives the same frames however the PCM is chunked, and frames before the end", async () => {
    const pcm = pcm16Bytes(speech.samples);
    const whole = new Mp3Encoder(22050);
    const reference = [...whole.encode(pcm16FromBytes(pcm)), ...whole.flush()];
    // Odd chunk sizes split samples across chunks.
    const sizes = [1, 777, 4096, 3, 10_001];
    const chunks: Uint8Array[] = [];
    for (let at = 0, i = 0; at < pcm.length; at += sizes[i++ % sizes.length]) {
      chunks.push(pcm.subarray(at, at + sizes[i % sizes.length]));
    }
    const out: Uint8Array[] = [];
    const writer = mp3EncoderStream(new Mp3Encoder(22050));
    const reading = (async () => {
      for await (const c of writer.readable) out.push(c);
    })();
    const w = writer.writable.getWriter();
    let beforeEnd = 0;
    for (const c of chunks) {
      await w.write(c);
      beforeEnd = out.reduce((n, o) => n + o.length, 0);
    }
    expect(beforeEnd, "frames came out while PCM was still arriving").toBeGreaterThan(0);
    await w.close();
    await reading;
    const streamed = out.flatMap((c) => [...c]);
    expect(streamed.length).toBe(reference.length);
    expect(streamed.every((b, i) => b === reference[i])).toBe(true);
  });

  it("codes a whole file from PCM bytes as they arrive, identical to coding the samples at once", async () => {
    const pcm = pcm16Bytes(speech.samples);
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < pcm.length; at += 3001) controller.enqueue(pcm.slice(at, at + 3001));
        controller.close();
      },
    });
    const file = await encodeMp3FromPcm16(chunked, 22050);
    expect(file).toEqual(encodeMp3(pcm16FromBytes(pcm), 22050));
    expect((await decodeAudio(file)).samples.length).toBe(speech.samples.length);
  });

  it("decodes without an Info tag to the input, delayed by the codec delay and padded to a frame", async () => {
    const encoder = new Mp3Encoder(22050);
    const mp3 = new Uint8Array([...encoder.encode(speech.samples), ...encoder.flush()]);
    const decoded = await decodeAudio(mp3);
    const n = speech.samples.length;
    expect(decoded.samples.length).toBe(encoder.frames * 576);
    expect(decoded.samples.length).toBeGreaterThanOrEqual(n + CODEC_DELAY);
    expect(decoded.samples.length).toBeLessThan(n + CODEC_DELAY + 576);
    expect(bestLag(speech.samples, decoded.samples)).toBe(CODEC_DELAY);
    expect(snr(speech.samples, decoded.samples.subarray(CODEC_DELAY))).toBeGreaterThan(28);
  });
});

describe("cross-check with lame --decode", () => {
  it("decodes our file to the same samples' length and the same sound", async () => {
    const dir = Deno.makeTempDirSync({ prefix: "skulk-mp3-" });
    try {
      Deno.writeFileSync(`${dir}/speech.mp3`, encodeMp3(speech.samples, 22050));
      const run = await new Deno.Command("lame", {
        args: ["--quiet", "--decode", `${dir}/speech.mp3`, `${dir}/speech.wav`],
        stderr: "piped",
      }).output();
      expect(run.success, new TextDecoder().decode(run.stderr)).toBe(true);
      const wav = parseWav(Deno.readFileSync(`${dir}/speech.wav`));
      expect(wav.sampleRate).toBe(22050);
      expect(wav.samples.length).toBe(speech.samples.length);
      expect(snr(speech.samples, wav.samples)).toBeGreaterThan(28);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
});

describe("every Huffman code, as mpg123 reads it", () => {
  const format = mp3Format(22050, 160);
  const edges = SFB_WIDTHS[22050].reduce((e, w) => [...e, e.at(-1)! + w], [0]);
  /** A granule of the given lines, coded as asked: pairs in `table` (all three regions), then quadruples. */
  function granule(
    values: number[],
    o: { table: PairTable | null; bigLines: number; count1Table?: 0 | 1; gain: number },
  ): CodedGranule {
    const ix = new Int32Array(576);
    ix.set(values);
    // Signs from a fixed pattern, so sign bits are checked too.
    const negative = Uint8Array.from({ length: 576 }, (_, i) => ((i * 7) % 5 < 2 ? 1 : 0));
    const layout = {
      bits: 0,
      big: o.bigLines,
      count1End: values.length,
      tables: [o.table, o.table, o.table] as [PairTable | null, PairTable | null, PairTable | null],
      regionEnds: [Math.min(edges[8], o.bigLines), Math.min(edges[16], o.bigLines)] as [number, number],
      region0Count: 7,
      region1Count: 7,
      count1Table: o.count1Table ?? 0,
    };
    const probe = new BitWriter();
    const info: GranuleInfo = {
      part23Length: 0,
      bigValues: o.bigLines / 2,
      globalGain: o.gain,
      tableSelect: [o.table?.id ?? 0, o.table?.id ?? 0, o.table?.id ?? 0],
      region0Count: 7,
      region1Count: 7,
      count1Table: layout.count1Table,
    };
    const g = { info, ix, negative, layout };
    writeGranule(probe, g);
    info.part23Length = probe.bitLength;
    return g;
  }

  const granules: { name: string; g: CodedGranule }[] = [];
  for (const t of PAIR_TABLES) {
    // Every pair of the table's code; with linbits, 15 stands for 15 plus a small escape value.
    const dim = t.linbits ? 16 : t.dim;
    const escape = Math.min(3, 1 << t.linbits);
    const values: number[] = [];
    for (let x = 0; x < dim; x++) {
      for (let y = 0; y < dim; y++) {
        values.push(x === 15 ? 15 + (y % escape) : x, y === 15 ? 15 + (x % escape) : y);
      }
    }
    granules.push({
      name: `table ${t.id}`,
      g: granule(values, { table: t, bigLines: values.length, gain: 170 }),
    });
    if (t.linbits) {
      // The widest escapes the table can code, at a gain that keeps them in range.
      const top = 15 + (1 << t.linbits) - 1;
      const ends = [top, top, top, 0, 0, top, 15, top - 1, top - 1, 15, 1, top];
      const gain = Math.floor(210 + 4 * Math.log2(0.1 / top ** (4 / 3)));
      granules.push({
        name: `table ${t.id} escapes`,
        g: granule(ends, { table: t, bigLines: ends.length, gain }),
      });
    }
  }
  for (const count1Table of [0, 1] as const) {
    // All 16 quadruples of count1 table A or B, after a short big-values region.
    const quads = Array.from({ length: 16 }, (_, v) => [v >> 3, (v >> 2) & 1, (v >> 1) & 1, v & 1]).flat();
    const values = [2, 1, ...quads];
    granules.push({
      name: `count1 table ${count1Table ? "B" : "A"}`,
      g: granule(values, { table: PAIR_TABLES[1], bigLines: 2, count1Table, gain: 180 }),
    });
  }

  it("decodes each table's every code to the reference decoder's samples", async () => {
    // Two silent granules after each: a granule's sound spreads over the next (the IMDCT overlap) and
    // into the one after (the synthesis filter's 512 taps), so each test granule is heard alone.
    const silence = { name: "silence", g: granule([], { table: null, bigLines: 0, gain: 0 }) };
    const sequence = granules.flatMap((g) => [g, silence, silence]);
    const frames = sequence.map(({ g }) => {
      const bytes = new Uint8Array(frameBytes(format, 160, 0));
      bytes.set(header(format, 160, 0), 0);
      bytes.set(sideInfo(format, 0, [g.info]), 4);
      const main = new BitWriter();
      writeGranule(main, g);
      bytes.set(main.bytes(), 4 + sideInfoBytes(format));
      return bytes;
    });
    const decoded = await decodeAudio(new Uint8Array(frames.flatMap((f) => [...f])));
    expect(decoded.samples.length).toBe(sequence.length * 576);
    const reference = new ReferenceDecoder();
    const expected = Float32Array.from(
      sequence.flatMap(({ g }) => [...reference.granule(g.ix, g.negative, g.info.globalGain)]),
    );
    for (let i = 0; i < granules.length; i++) {
      const want = expected.subarray(i * 3 * 576, (i + 1) * 3 * 576);
      const got = decoded.samples.subarray(i * 3 * 576, (i + 1) * 3 * 576);
      expect(rms(want), granules[i].name).toBeGreaterThan(1e-4);
      // Exact decoding measures about 125 dB (float32 against float64); one wrong code, under 50.
      expect(snr(want, got), granules[i].name).toBeGreaterThan(70);
    }
  });
});
