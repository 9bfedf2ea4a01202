/**
 * bench/resample: the band-limited resampler's throughput beside the linear interpolation it replaced,
 * measured side by side (interleaved rounds) in one run, in seconds of audio per second of CPU.
 *   deno run -A bench/resample.ts [--seconds N] [--rounds N]
 */
import { cpuUsage } from "node:process";
import { resample } from "../src/audio/pcm.ts";
import { FILTER, Resampler } from "../src/audio/resample.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const SECONDS = arg("seconds", 20);
const ROUNDS = arg("rounds", 5);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The linear interpolation src/audio/pcm.ts used before: the baseline, kept here only to be measured. */
function linear(samples: Float32Array, from: number, to: number): Float32Array {
  if (from === to || samples.length === 0) return samples;
  const n = Math.max(1, Math.round(samples.length * to / from));
  const out = new Float32Array(n);
  const step = from / to;
  for (let i = 0; i < n; i++) {
    const x = i * step;
    const i0 = Math.floor(x);
    const i1 = Math.min(i0 + 1, samples.length - 1);
    const t = x - i0;
    out[i] = samples[Math.min(i0, samples.length - 1)] * (1 - t) + samples[i1] * t;
  }
  return out;
}

/** The realtime path's way: 24 kHz in 100 ms chunks through one streaming resampler. */
function chunked(samples: Float32Array, from: number, to: number): Float32Array {
  const r = new Resampler(from, to);
  const step = Math.round(from / 10);
  let n = 0;
  for (let at = 0; at < samples.length; at += step) n += r.push(samples.subarray(at, at + step)).length;
  n += r.flush().length;
  return new Float32Array(n);
}

function noise(n: number): Float32Array {
  let seed = 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
  return out;
}

/** Seconds of audio per second of this process's CPU time (user + system): other load counts less. */
function rate(
  f: (x: Float32Array, from: number, to: number) => Float32Array,
  x: Float32Array,
  from: number,
  to: number,
) {
  const t0 = cpuUsage();
  f(x, from, to);
  const used = cpuUsage(t0);
  return SECONDS / ((used.user + used.system) / 1e6);
}

console.log(
  `filter: Kaiser-windowed sinc, passband to ${FILTER.passband} and stopband from ${FILTER.stopband} of the ` +
    `lower Nyquist, ${FILTER.attenuationDb} dB; ${SECONDS} s of audio, median of ${ROUNDS} interleaved rounds`,
);
console.log("seconds of audio per CPU second");
console.log("pair                       linear         band-limited  band-limited, 100 ms chunks");
for (const [from, to] of [[48000, 16000], [44100, 16000], [24000, 16000], [22050, 16000], [16000, 48000]]) {
  const x = noise(SECONDS * from);
  const results = { linear: [] as number[], sinc: [] as number[], chunks: [] as number[] };
  resample(x.subarray(0, from), from, to); // builds (and caches) the filter outside the timing
  for (let r = 0; r < ROUNDS; r++) {
    results.linear.push(rate(linear, x, from, to));
    results.sinc.push(rate(resample, x, from, to));
    results.chunks.push(rate(chunked, x, from, to));
  }
  console.log(
    `${`${from} -> ${to}`.padEnd(20)} ${median(results.linear).toFixed(0).padStart(12)} ${
      median(results.sinc).toFixed(0).padStart(20)
    } ${median(results.chunks).toFixed(0).padStart(20)}`,
  );
}
