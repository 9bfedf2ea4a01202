/**
 * The band-limited resampler: tones above the output's Nyquist do not fold into the band, tones in the band
 * keep their level, lengths and identity, and chunk-by-chunk output equal to one-shot output.
 */
import { describe, expect, it } from "vitest";
import { resample } from "../../src/audio/pcm.ts";
import { FILTER, resampledLength, Resampler, resampleYielding } from "../../src/audio/resample.ts";

function tone(n: number, rate: number, hz: number, amp = 0.5): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = amp * Math.sin((2 * Math.PI * hz * i) / rate);
  return out;
}

/**
 * Amplitude of the component at exactly `hz` (Goertzel) over `n` samples from `from`. The stretch holds a
 * whole number of cycles of every frequency measured, so a pure tone leaks nothing into another's bin.
 */
function amplitudeAt(x: Float32Array, rate: number, hz: number, from: number, n: number): number {
  const w = (2 * Math.PI * hz) / rate;
  const coeff = 2 * Math.cos(w);
  let s1 = 0;
  let s2 = 0;
  for (let i = from; i < from + n; i++) {
    const s0 = x[i] + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  const re = s1 - s2 * Math.cos(w);
  const im = s2 * Math.sin(w);
  return (2 * Math.hypot(re, im)) / n;
}

const db = (ratio: number) => 20 * Math.log10(ratio);

describe("band-limited resampling", () => {
  // One second in, then 0.5 s measured from the middle (away from the edges' silence): 2000 cycles of 4 kHz
  // and 500 of 1 kHz at 16 kHz, so both bins are exact.
  const measure = (out: Float32Array, hz: number) => amplitudeAt(out, 16000, hz, 4000, 8000);

  it.each([48000, 44100, 44101])(
    "keeps a 12 kHz tone at %i Hz out of the 4 kHz bin it would fold into",
    (rate) => {
      const out = resample(tone(rate, rate, 12000), rate, 16000);
      const alias = measure(out, 4000);
      expect(db(alias / 0.5)).toBeLessThan(-60);
    },
  );

  it.each([48000, 44100, 44101, 24000, 22050, 8000])(
    "passes a 1 kHz tone from %i Hz within 0.5 dB",
    (rate) => {
      const out = resample(tone(rate, rate, 1000), rate, 16000);
      expect(Math.abs(db(measure(out, 1000) / 0.5))).toBeLessThan(0.5);
    },
  );

  it("passes a tone at 0.9 of the output's Nyquist (7.2 kHz) from 48 kHz within 0.5 dB", () => {
    const out = resample(tone(48000, 48000, 7200), 48000, 16000);
    // 7.2 kHz over 8000 samples at 16 kHz is 3600 whole cycles.
    expect(Math.abs(db(measure(out, 7200) / 0.5))).toBeLessThan(0.5);
    expect(FILTER.attenuationDb).toBeGreaterThanOrEqual(60);
  });

  it("leaves no image of a 16 kHz upload's 3 kHz tone when going up to 48 kHz", () => {
    const out = resample(tone(16000, 16000, 3000), 16000, 48000);
    // The zero-stuffed image would sit at 16 - 3 = 13 kHz; 24000 samples from the middle hold whole cycles.
    const at = (hz: number) => amplitudeAt(out, 48000, hz, 12000, 24000);
    expect(db(at(13000) / 0.5)).toBeLessThan(-60);
    expect(Math.abs(db(at(3000) / 0.5))).toBeLessThan(0.5);
  });

  it("is the identity at equal rates", () => {
    const x = tone(1000, 16000, 440);
    expect(resample(x, 16000, 16000)).toBe(x);
    const r = new Resampler(16000, 16000);
    expect([...r.push(x)]).toEqual([...x]);
    expect(r.flush().length).toBe(0);
  });

  it.each([
    [48000, 16000, 48000, 16000],
    [48000, 16000, 1, 1],
    [48000, 16000, 1001, 334],
    [44100, 16000, 44100, 16000],
    [44100, 16000, 1000, 363],
    [24000, 16000, 1001, 667],
    [16000, 48000, 333, 999],
    [22050, 24000, 999, 1087],
    [44101, 16000, 44101, 16000],
    [8000, 16000, 0, 0],
  ])("turns %i Hz into %i Hz: %i samples become %i", (from, to, n, expected) => {
    expect(resampledLength(n, from, to)).toBe(expected);
    expect(resample(new Float32Array(n), from, to).length).toBe(expected);
  });

  it.each([
    [24000, 16000],
    [44100, 16000],
    [48000, 16000],
    [16000, 48000],
    [44101, 16000],
  ])("gives the same output chunk by chunk as in one go (%i Hz to %i Hz)", (from, to) => {
    // Speech-like: a sweep plus noise from a fixed seed, cut into uneven chunks (some shorter than the filter).
    let seed = 7;
    const noise = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
    const x = new Float32Array(from);
    for (let i = 0; i < x.length; i++) x[i] = 0.4 * Math.sin(2e-4 * i * i / 48) + 0.1 * noise();
    const whole = resample(x, from, to);
    const r = new Resampler(from, to);
    const parts: Float32Array[] = [];
    const sizes = [1, 7, 480, 13, 4800, 2, 960, 3000];
    for (let at = 0, k = 0; at < x.length; k++) {
      const n = sizes[k % sizes.length];
      parts.push(r.push(x.subarray(at, at + n)));
      at += n;
    }
    parts.push(r.flush());
    const chunked = Float32Array.from(parts.flatMap((p) => [...p]));
    expect(chunked.length).toBe(whole.length);
    let maxDiff = 0;
    for (let i = 0; i < whole.length; i++) maxDiff = Math.max(maxDiff, Math.abs(chunked[i] - whole[i]));
    expect(maxDiff).toBeLessThan(1e-6);
  });

  it("resamples a long upload a slice at a time, letting timers run in between, to the same result", async () => {
    const x = tone(48000 * 12, 48000, 440);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    const sliced = await resampleYielding(x, 48000, 16000, 2);
    clearInterval(timer);
    expect(ticks).toBeGreaterThanOrEqual(5);
    const whole = resample(x, 48000, 16000);
    expect(sliced.length).toBe(whole.length);
    let maxDiff = 0;
    for (let i = 0; i < whole.length; i++) maxDiff = Math.max(maxDiff, Math.abs(sliced[i] - whole[i]));
    expect(maxDiff).toBeLessThan(1e-6);
  });

  it("refuses rates that are not positive integers and a push after the flush", () => {
    expect(() => new Resampler(0, 16000)).toThrow(RangeError);
    expect(() => new Resampler(44100.5, 16000)).toThrow(/positive integers/);
    const r = new Resampler(24000, 16000);
    r.flush();
    expect(() => r.push(new Float32Array(10))).toThrow(/flushed/);
  });
});
