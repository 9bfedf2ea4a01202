/**
 * The Layer III analysis filterbank: the standard's 32-band polyphase filter, then per band an 18-line MDCT
 * over a sine window with the alias-reduction butterflies. 576 samples in, 576 spectral lines out.
 */
import { SYNTHESIS_WINDOW } from "./mp3-tables.ts";

export const GRANULE = 576;
const BANDS = 32;
const LINES = 18;

/** The analysis window C[i] is the synthesis window D[i] over 32 (ISO 11172-3 Tables C.1 and B.3). */
const C = SYNTHESIS_WINDOW.map((d) => d / 32);

/** Polyphase matrixing M[k][i] = cos((2k + 1)(i - 16) pi / 64). */
const M = (() => {
  const m = new Float64Array(BANDS * 64);
  for (let k = 0; k < BANDS; k++) {
    for (let i = 0; i < 64; i++) m[k * 64 + i] = Math.cos(((2 * k + 1) * (i - 16) * Math.PI) / 64);
  }
  return m;
})();

/**
 * The MDCT with the sine window folded in. The decoder's IMDCT carries no normalisation, so the 2/18 that
 * makes windowed overlap-add reconstruct the input is taken here.
 */
const MDCT = (() => {
  const t = new Float64Array(LINES * 36);
  for (let k = 0; k < LINES; k++) {
    for (let n = 0; n < 36; n++) {
      const window = Math.sin((Math.PI / 36) * (n + 0.5));
      t[k * 36 + n] = (window * Math.cos((Math.PI / 72) * (2 * n + 19) * (2 * k + 1)) * 2) / LINES;
    }
  }
  return t;
})();

/** Alias-reduction butterfly coefficients from the standard's c[i]. */
const ALIAS_C = [-0.6, -0.535, -0.33, -0.185, -0.095, -0.041, -0.0142, -0.0037];
const CS = ALIAS_C.map((c) => 1 / Math.sqrt(1 + c * c));
const CA = ALIAS_C.map((c) => c / Math.sqrt(1 + c * c));

/** One channel's filterbank; it keeps the polyphase history and the previous granule for the MDCT overlap. */
export class AnalysisFilterbank {
  #x = new Float64Array(512);
  #y = new Float64Array(64);
  /** Subband samples, [band * 36 + t]: t < 18 the previous granule, t >= 18 the current one. */
  #sub = new Float64Array(BANDS * 36);

  /** Transforms the next 576 input samples (full scale +-1) into `out`'s 576 lines, band by band. */
  granule(pcm: Float32Array, out: Float64Array): void {
    const sub = this.#sub;
    for (let b = 0; b < BANDS; b++) sub.copyWithin(b * 36, b * 36 + 18, b * 36 + 36);
    for (let t = 0; t < LINES; t++) {
      this.#polyphase(pcm, t * BANDS);
      for (let b = 0; b < BANDS; b++) {
        let s = 0;
        for (let i = 0; i < 64; i++) s += M[b * 64 + i] * this.#y[i];
        // The decoder negates odd time samples of odd bands after its IMDCT; doing it here cancels that.
        sub[b * 36 + 18 + t] = b & t & 1 ? -s : s;
      }
    }
    for (let b = 0; b < BANDS; b++) {
      for (let k = 0; k < LINES; k++) {
        let s = 0;
        for (let n = 0; n < 36; n++) s += MDCT[k * 36 + n] * sub[b * 36 + n];
        out[b * LINES + k] = s;
      }
    }
    for (let b = 1; b < BANDS; b++) {
      for (let i = 0; i < 8; i++) {
        const lo = (b - 1) * LINES + 17 - i;
        const hi = b * LINES + i;
        const a = out[lo];
        const c = out[hi];
        out[lo] = a * CS[i] + c * CA[i];
        out[hi] = c * CS[i] - a * CA[i];
      }
    }
  }

  /** Shifts 32 samples into the window (newest first) and sums the 512 taps into 64 partial sums. */
  #polyphase(pcm: Float32Array, at: number) {
    const x = this.#x;
    x.copyWithin(32, 0, 480);
    for (let i = 0; i < 32; i++) x[i] = pcm[at + 31 - i];
    for (let i = 0; i < 64; i++) {
      let s = 0;
      for (let j = i; j < 512; j += 64) s += C[j] * x[j];
      this.#y[i] = s;
    }
  }
}
