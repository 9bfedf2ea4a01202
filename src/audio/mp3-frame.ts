/**
 * The bitstream syntax of a mono Layer III frame: the formats (rates, bit rates, frame sizes), the 4-byte
 * header and the side info that tells a decoder how each granule's main data is coded.
 */
import { BitWriter } from "./mp3-bits.ts";
import type { GranuleInfo } from "./mp3-granule.ts";
import { BITRATES, SAMPLE_RATES } from "./mp3-tables.ts";

export const MP3_SAMPLE_RATES = [16000, 22050, 24000, 32000, 44100, 48000] as const;

/** Default bit rates (kbit/s): speech at 22.05 or 24 kHz is clear at 64; wider bands get more. */
const DEFAULT_KBPS: Record<number, number> = {
  16000: 48,
  22050: 64,
  24000: 64,
  32000: 80,
  44100: 96,
  48000: 96,
};

export interface Mp3Format {
  sampleRate: number;
  bitrate: number;
  mpeg1: boolean;
  /** Samples per frame: 1152 (two granules) for MPEG-1, 576 for MPEG-2. */
  frameSamples: number;
}

/** Checks a sample rate and bit rate (kbit/s) for mono Layer III; throws RangeError naming what is allowed. */
export function mp3Format(sampleRate: number, bitrate?: number): Mp3Format {
  const rate = SAMPLE_RATES[sampleRate];
  if (!rate) {
    throw new RangeError(
      `MP3 sample rate ${sampleRate} Hz is not supported; use ${MP3_SAMPLE_RATES.join(", ")} Hz`,
    );
  }
  const allowed = (rate.mpeg1 ? BITRATES.mpeg1 : BITRATES.mpeg2).slice(1);
  const kbps = bitrate ?? DEFAULT_KBPS[sampleRate];
  if (!(allowed as readonly number[]).includes(kbps)) {
    throw new RangeError(
      `MP3 bit rate ${kbps} kbit/s is not available at ${sampleRate} Hz; use ${allowed.join(", ")}`,
    );
  }
  return { sampleRate, bitrate: kbps, mpeg1: rate.mpeg1, frameSamples: rate.mpeg1 ? 1152 : 576 };
}

/** The four header bytes of a frame. */
export function header(f: Mp3Format, bitrate: number, padding: number): Uint8Array {
  const index = (f.mpeg1 ? BITRATES.mpeg1 : BITRATES.mpeg2).indexOf(bitrate as never);
  const h = new BitWriter(4);
  h.put(0x7ff, 11); // sync
  h.put(f.mpeg1 ? 3 : 2, 2); // version: MPEG-1 or MPEG-2
  h.put(1, 2); // layer III
  h.put(1, 1); // no CRC
  h.put(index, 4);
  h.put(SAMPLE_RATES[f.sampleRate].index, 2);
  h.put(padding, 1);
  h.put(0, 1); // private
  h.put(3, 2); // single channel
  h.put(0, 2); // mode extension
  h.put(0, 1); // not copyrighted
  h.put(1, 1); // original
  h.put(0, 2); // no emphasis
  return h.bytes();
}

/** Bytes of a frame at this bit rate (the format's own, or the Info frame's). */
export function frameBytes(f: Mp3Format, bitrate: number, padding: number): number {
  return Math.floor((f.frameSamples / 8) * bitrate * 1000 / f.sampleRate) + padding;
}

/** Side info of a mono frame: two granules' worth for MPEG-1, one for MPEG-2. */
export const sideInfoBytes = (f: Mp3Format) => (f.mpeg1 ? 17 : 9);

/** The side info of long-block granules without scalefactors, main data starting `mainDataBegin` bytes back. */
export function sideInfo(f: Mp3Format, mainDataBegin: number, granules: readonly GranuleInfo[]): Uint8Array {
  const w = new BitWriter(sideInfoBytes(f));
  if (f.mpeg1) {
    w.put(mainDataBegin, 9);
    w.put(0, 5); // private bits
    w.put(0, 4); // scfsi: no scalefactors to share
  } else {
    w.put(mainDataBegin, 8);
    w.put(0, 1);
  }
  for (const g of granules) {
    w.put(g.part23Length, 12);
    w.put(g.bigValues, 9);
    w.put(g.globalGain, 8);
    w.put(0, f.mpeg1 ? 4 : 9); // scalefac_compress 0: no scalefactor bits
    w.put(0, 1); // long blocks only: no window switching
    for (const t of g.tableSelect) w.put(t, 5);
    w.put(g.region0Count, 4);
    w.put(g.region1Count, 3);
    if (f.mpeg1) w.put(0, 1); // preflag
    w.put(0, 1); // scalefac_scale
    w.put(g.count1Table, 1);
  }
  return w.bytes();
}
