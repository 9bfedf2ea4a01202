/**
 * Ogg Opus output for speech: mono samples resampled to 48 kHz, coded in 20 ms frames by libopus (the
 * `opusscript` WebAssembly build, in-process), and wrapped in Ogg pages (OpusHead, OpusTags, audio).
 */
import { Buffer } from "node:buffer";
import { concatBytes } from "./bytes.ts";
import { floatToInt16, resample } from "./pcm.ts";

const RATE = 48_000;
const FRAME = 960; // 20 ms at 48 kHz
/** libopus's encoder delay at 48 kHz, which players skip (RFC 7845's pre-skip). */
const PRE_SKIP = 312;
const PACKETS_PER_PAGE = 50;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let k = 0; k < 8; k++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    t[i] = r >>> 0;
  }
  return t;
})();

function oggCrc(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ b) & 0xff]) >>> 0;
  return crc;
}

/** One Ogg page holding whole packets. */
function page(packets: Uint8Array[], granule: number, sequence: number, flags: number): Uint8Array {
  const lacing: number[] = [];
  for (const p of packets) {
    for (let n = p.length;; n -= 255) {
      lacing.push(Math.min(n, 255));
      if (n < 255) break;
    }
  }
  const body = packets.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(27 + lacing.length + body);
  const dv = new DataView(out.buffer);
  out.set([0x4f, 0x67, 0x67, 0x53], 0); // "OggS"
  out[5] = flags;
  dv.setBigUint64(6, BigInt(granule), true);
  dv.setUint32(14, 0x534b4c4b, true); // stream serial ("SKLK")
  dv.setUint32(18, sequence, true);
  out[26] = lacing.length;
  out.set(lacing, 27);
  let at = 27 + lacing.length;
  for (const p of packets) {
    out.set(p, at);
    at += p.length;
  }
  dv.setUint32(22, oggCrc(out), true);
  return out;
}

function opusHead(inputRate: number): Uint8Array {
  const h = new Uint8Array(19);
  const dv = new DataView(h.buffer);
  h.set(new TextEncoder().encode("OpusHead"), 0);
  h[8] = 1; // version
  h[9] = 1; // channels
  dv.setUint16(10, PRE_SKIP, true);
  dv.setUint32(12, inputRate, true);
  return h; // output gain 0, mapping family 0
}

function opusTags(): Uint8Array {
  const vendor = new TextEncoder().encode("skulk");
  const t = new Uint8Array(8 + 4 + vendor.length + 4);
  t.set(new TextEncoder().encode("OpusTags"), 0);
  new DataView(t.buffer).setUint32(8, vendor.length, true);
  t.set(vendor, 12);
  return t; // no user comments
}

/** An Ogg Opus file of the mono samples. libopus loads on first use (it costs the daemon's start otherwise). */
export async function encodeOggOpus(samples: Float32Array, sampleRate: number): Promise<Uint8Array> {
  const { default: OpusScript } = await import("opusscript");
  const pcm = floatToInt16(resample(samples, sampleRate, RATE));
  const encoder = new OpusScript(RATE, 1, OpusScript.Application.VOIP);
  const packets: Uint8Array[] = [];
  try {
    // The encoder delays its output by PRE_SKIP samples: code that much more so the tail is flushed.
    for (let at = 0; at < pcm.length + PRE_SKIP; at += FRAME) {
      const frame = new Int16Array(FRAME);
      frame.set(pcm.subarray(at, at + FRAME));
      packets.push(Uint8Array.from(encoder.encode(Buffer.from(frame.buffer), FRAME)));
    }
  } finally {
    encoder.delete();
  }
  const pages = [page([opusHead(sampleRate)], 0, 0, 0x02), page([opusTags()], 0, 1, 0)];
  for (let i = 0; i < packets.length; i += PACKETS_PER_PAGE) {
    const chunk = packets.slice(i, i + PACKETS_PER_PAGE);
    const last = i + PACKETS_PER_PAGE >= packets.length;
    // Granules count coded samples, pre-skip included; the last one trims the final frame's padding.
    const granule = last ? PRE_SKIP + pcm.length : (i + chunk.length) * FRAME;
    pages.push(page(chunk, granule, pages.length, last ? 0x04 : 0));
  }
  return concatBytes(pages);
}
