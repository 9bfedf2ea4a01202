/**
 * A reference for what a Layer III decoder must output for given quantized lines (long blocks, mono, no
 * scalefactors): requantization, alias butterflies, IMDCT with overlap, polyphase synthesis (ISO 11172-3).
 */
import { SYNTHESIS_WINDOW } from "../../src/audio/mp3-tables.ts";

const CI = [-0.6, -0.535, -0.33, -0.185, -0.095, -0.041, -0.0142, -0.0037];
const CS = CI.map((c) => 1 / Math.sqrt(1 + c * c));
const CA = CI.map((c) => c / Math.sqrt(1 + c * c));

/** A decoder's state across granules: the IMDCT overlap and the synthesis FIFO. */
export class ReferenceDecoder {
  #overlap = new Float64Array(576);
  #v = new Float64Array(1024);

  /** 576 output samples for one granule: signed quantized lines `ix` at `globalGain`. */
  granule(ix: Int32Array, negative: Uint8Array, globalGain: number): Float64Array {
    const scale = 2 ** ((globalGain - 210) / 4);
    const xr = new Float64Array(576);
    for (let i = 0; i < 576; i++) xr[i] = (negative[i] ? -1 : 1) * ix[i] ** (4 / 3) * scale;
    for (let sb = 1; sb < 32; sb++) {
      for (let i = 0; i < 8; i++) {
        const lo = (sb - 1) * 18 + 17 - i;
        const hi = sb * 18 + i;
        const a = xr[lo];
        const b = xr[hi];
        xr[lo] = a * CS[i] - b * CA[i];
        xr[hi] = b * CS[i] + a * CA[i];
      }
    }
    const sub = new Float64Array(576); // [t * 32 + band]
    for (let sb = 0; sb < 32; sb++) {
      const y = new Float64Array(36);
      for (let n = 0; n < 36; n++) {
        let s = 0;
        for (let k = 0; k < 18; k++) {
          s += xr[sb * 18 + k] * Math.cos((Math.PI / 72) * (2 * n + 19) * (2 * k + 1));
        }
        y[n] = s * Math.sin((Math.PI / 36) * (n + 0.5));
      }
      for (let t = 0; t < 18; t++) {
        const v = y[t] + this.#overlap[sb * 18 + t];
        this.#overlap[sb * 18 + t] = y[t + 18];
        sub[t * 32 + sb] = sb & t & 1 ? -v : v;
      }
    }
    const out = new Float64Array(576);
    const v = this.#v;
    for (let t = 0; t < 18; t++) {
      v.copyWithin(64, 0, 960);
      for (let i = 0; i < 64; i++) {
        let s = 0;
        for (let k = 0; k < 32; k++) s += Math.cos(((16 + i) * (2 * k + 1) * Math.PI) / 64) * sub[t * 32 + k];
        v[i] = s;
      }
      for (let j = 0; j < 32; j++) {
        let s = 0;
        for (let i = 0; i < 8; i++) {
          s += v[i * 128 + j] * SYNTHESIS_WINDOW[i * 64 + j];
          s += v[i * 128 + 96 + j] * SYNTHESIS_WINDOW[i * 64 + 32 + j];
        }
        out[t * 32 + j] = s;
      }
    }
    return out;
  }
}
