/**
 * Band-limited sample-rate conversion: a Kaiser-windowed sinc low-pass applied as a polyphase filter, one-shot
 * (`resample`) or chunk by chunk with the filter's state carried across chunks (`Resampler`). Pure; no I/O.
 */

/**
 * The filter's numbers, in units of the lower of the two rates (its Nyquist is where aliases or images
 * begin): flat to 0.9 of that Nyquist, at least 80 dB down from it on (60 asked; the margin covers the
 * interpolation between phases for odd rate pairs), cutoff midway. Kaiser's formulas give beta and the length.
 */
export const FILTER = {
  passband: 0.9,
  stopband: 1.0,
  attenuationDb: 80,
} as const;

const CUTOFF = (FILTER.passband + FILTER.stopband) / 4; // cycles per low-rate sample (0.475)
const TRANSITION = (FILTER.stopband - FILTER.passband) / 2; // cycles per low-rate sample (0.05)
const BETA = 0.1102 * (FILTER.attenuationDb - 8.7);
/** Half the filter's length in low-rate samples: (A - 7.95) / (2.285 * 2pi * transition) / 2, about 50. */
const HALF_WIDTH = Math.ceil((FILTER.attenuationDb - 7.95) / (2.285 * 2 * Math.PI * TRANSITION) / 2);
/**
 * Rate pairs whose reduced ratio has more phases than this (odd rates such as 44101 Hz) interpolate
 * linearly between this many: at most about (pi / 512)^2 / 8 of the signal (-107 dB), below the stopband.
 */
const MAX_PHASES = 512;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Zeroth-order modified Bessel function of the first kind (the Kaiser window's shape), by its series. */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; term > sum * 1e-17; k++) {
    term *= q / (k * k);
    sum += term;
  }
  return sum;
}

/** The precomputed filter for one pair of rates. */
interface Bank {
  /** Output rate over input rate, reduced: output k sits at input time k * down / up. */
  up: number;
  down: number;
  /** Taps per output sample; output k reads inputs floor(t) - taps/2 + 1 ... floor(t) + taps/2. */
  taps: number;
  phases: number;
  /** (phases + 1) rows of `taps` coefficients: row p is the filter for a fractional position p / phases. */
  coeffs: Float64Array;
}

const banks = new Map<string, Bank>();

function bankFor(from: number, to: number): Bank {
  const key = `${from}:${to}`;
  const cached = banks.get(key);
  if (cached) return cached;
  const g = gcd(from, to);
  const up = to / g;
  const down = from / g;
  // Downsampling stretches the kernel over more input samples so its cutoff sits below the output's Nyquist.
  const scale = Math.min(1, to / from);
  const reach = HALF_WIDTH / scale; // half-width in input samples
  const half = Math.ceil(reach);
  const taps = 2 * half;
  const phases = Math.min(up, MAX_PHASES);
  const coeffs = new Float64Array((phases + 1) * taps);
  const i0Beta = besselI0(BETA);
  for (let p = 0; p <= phases; p++) {
    const frac = p / phases;
    const row = p * taps;
    let sum = 0;
    for (let j = 0; j < taps; j++) {
      const tau = frac - (j - half + 1); // distance from the output's time to this input, in input samples
      const u = tau / reach;
      if (Math.abs(u) >= 1) continue;
      const x = 2 * CUTOFF * scale * tau;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
      const c = sinc * besselI0(BETA * Math.sqrt(1 - u * u)) / i0Beta;
      coeffs[row + j] = c;
      sum += c;
    }
    // Unit gain at DC in every phase, so no phase modulates a steady level.
    for (let j = 0; j < taps; j++) coeffs[row + j] /= sum;
  }
  const bank = { up, down, taps, phases, coeffs };
  // Callers use a handful of rate pairs; a node fed odd rates keeps only the most recent few.
  if (banks.size >= 16) banks.delete(banks.keys().next().value!);
  banks.set(key, bank);
  return bank;
}

/** Output samples for `n` input samples: n * to / from, rounded to the nearest (at least 1 for any input). */
export function resampledLength(n: number, from: number, to: number): number {
  return n === 0 ? 0 : Math.max(1, Math.round((n * to) / from));
}

/**
 * A streaming resampler: `push` chunks, then `flush` once at the end. Each output sample is emitted once
 * every input its filter reads has arrived, so the concatenated output equals `resample` of the whole
 * input; it lags the input by about HALF_WIDTH low-rate samples (3 ms at 16 kHz) until the flush.
 */
export class Resampler {
  readonly #bank: Bank | null;
  /** Inputs not yet behind every future output's filter; #buf[0] is input number #base. */
  #buf = new Float32Array(0);
  #base = 0;
  #received = 0;
  #next = 0;
  #flushed = false;

  constructor(readonly from: number, readonly to: number) {
    if (!(Number.isInteger(from) && Number.isInteger(to) && from > 0 && to > 0)) {
      throw new RangeError(`sample rates must be positive integers (got ${from} and ${to})`);
    }
    this.#bank = from === to ? null : bankFor(from, to);
  }

  push(chunk: Float32Array): Float32Array {
    if (this.#flushed) throw new Error("the resampler was flushed");
    if (!this.#bank) return chunk;
    const buf = new Float32Array(this.#buf.length + chunk.length);
    buf.set(this.#buf);
    buf.set(chunk, this.#buf.length);
    this.#buf = buf;
    this.#received += chunk.length;
    return this.#emit(Infinity);
  }

  /** The outputs still held back, computed with silence after the last input. */
  flush(): Float32Array {
    if (this.#flushed) throw new Error("the resampler was flushed");
    this.#flushed = true;
    if (!this.#bank) return new Float32Array(0);
    return this.#emit(resampledLength(this.#received, this.from, this.to));
  }

  /** Outputs from #next on: all whose inputs have arrived, or (at the flush) up to `end`, zeros beyond. */
  #emit(end: number): Float32Array {
    const { up, down, taps, phases, coeffs } = this.#bank!;
    const half = taps / 2;
    const final = end !== Infinity;
    // Output k needs inputs up to floor(k * down / up) + half.
    const ready = final ? end : Math.max(0, Math.floor(((this.#received - half) * up - 1) / down) + 1);
    const count = Math.max(0, ready - this.#next);
    const out = new Float32Array(count);
    const buf = this.#buf;
    const base = this.#base;
    for (let o = 0; o < count; o++) {
      const k = this.#next + o;
      const pos = k * down; // exact while k * down < 2^53
      const whole = Math.floor(pos / up);
      const rem = pos - whole * up;
      const first = whole - half + 1 - base;
      let phase = rem;
      let weight = 0;
      if (phases !== up) {
        const at = (rem * phases) / up;
        phase = Math.floor(at);
        weight = at - phase;
      }
      const row = phase * taps;
      let acc = 0;
      if (first >= 0 && first + taps <= buf.length) {
        if (weight === 0) {
          for (let j = 0; j < taps; j++) acc += buf[first + j] * coeffs[row + j];
        } else {
          for (let j = 0; j < taps; j++) {
            const c = coeffs[row + j] + weight * (coeffs[row + taps + j] - coeffs[row + j]);
            acc += buf[first + j] * c;
          }
        }
      } else {
        // The edges: silence before the first input and after the last.
        for (let j = 0; j < taps; j++) {
          const i = first + j;
          if (i < 0 || i >= buf.length) continue;
          const c = coeffs[row + j] + weight * (coeffs[row + taps + j] - coeffs[row + j]);
          acc += buf[i] * c;
        }
      }
      out[o] = acc;
    }
    this.#next += count;
    // Keep only the inputs the next output's filter starts at or after.
    const keepFrom = Math.floor((this.#next * down) / up) - half + 1 - base;
    if (keepFrom > 0) {
      this.#buf = this.#buf.slice(Math.min(keepFrom, this.#buf.length));
      this.#base += Math.min(keepFrom, buf.length);
    }
    return out;
  }
}

/** The samples at another rate, band-limited (see FILTER); the same array when the rates are equal. */
export function resample(samples: Float32Array, from: number, to: number): Float32Array {
  if (from === to || samples.length === 0) return samples;
  const r = new Resampler(from, to);
  const head = r.push(samples);
  const tail = r.flush();
  const out = new Float32Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}

/**
 * `resample` for a server's request path: the input goes through in slices of `sliceSeconds`, with the
 * event loop let in between, so a long upload (a 25 MiB MP3 holds about 27 minutes) does not stall the
 * node for seconds. The result equals `resample`'s.
 */
export async function resampleYielding(
  samples: Float32Array,
  from: number,
  to: number,
  sliceSeconds = 5,
): Promise<Float32Array> {
  if (from === to || samples.length === 0) return samples;
  const r = new Resampler(from, to);
  const out = new Float32Array(resampledLength(samples.length, from, to));
  const slice = Math.max(1, Math.round(sliceSeconds * from));
  let written = 0;
  for (let at = 0; at < samples.length; at += slice) {
    const part = r.push(samples.subarray(at, at + slice));
    out.set(part, written);
    written += part.length;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  out.set(r.flush(), written);
  return out;
}
