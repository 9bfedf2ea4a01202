/**
 * PCM audio as plain numbers: WAV parsing and writing (16-bit PCM out), 16-bit <-> float conversion,
 * mono mix-down, resampling (band-limited, in resample.ts), duration and loudness. Pure functions; no I/O.
 */

export interface Audio {
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
  sampleRate: number;
}

export class AudioFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AudioFormatError";
  }
}

const ascii = (b: Uint8Array, at: number, n: number) => String.fromCharCode(...b.subarray(at, at + n));

export function isWav(b: Uint8Array): boolean {
  return b.length >= 12 && ascii(b, 0, 4) === "RIFF" && ascii(b, 8, 4) === "WAVE";
}

/** Reads a RIFF/WAVE file: PCM 8/16/24/32-bit or IEEE float 32/64, any channel count, mixed down to mono. */
export function parseWav(b: Uint8Array): Audio & { channels: number; bitsPerSample: number } {
  if (!isWav(b)) throw new AudioFormatError("not a WAV file (no RIFF/WAVE header)");
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let at = 12;
  let fmt: { format: number; channels: number; rate: number; bits: number } | null = null;
  while (at + 8 <= b.length) {
    const id = ascii(b, at, 4);
    let size = dv.getUint32(at + 4, true);
    const body = at + 8;
    // Streamed WAVs (espeak-ng --stdout, ffmpeg pipes) leave the data size as 0 or 0xFFFFFFFF: read to the end.
    if (id === "data" && (size === 0 || size === 0xffffffff || body + size > b.length)) {
      size = b.length - body;
    }
    if (id === "fmt ") {
      if (size < 16) throw new AudioFormatError("WAV fmt chunk is too short");
      let format = dv.getUint16(body, true);
      if (format === 0xfffe && size >= 26) format = dv.getUint16(body + 24, true); // WAVE_FORMAT_EXTENSIBLE
      fmt = {
        format,
        channels: dv.getUint16(body + 2, true),
        rate: dv.getUint32(body + 4, true),
        bits: dv.getUint16(body + 14, true),
      };
    } else if (id === "data") {
      if (!fmt) throw new AudioFormatError("WAV data chunk comes before its fmt chunk");
      return {
        ...decodeFrames(b.subarray(body, body + size), fmt),
        channels: fmt.channels,
        bitsPerSample: fmt.bits,
      };
    }
    at = body + size + (size % 2);
  }
  throw new AudioFormatError(fmt ? "WAV file has no data chunk" : "WAV file has no fmt chunk");
}

function decodeFrames(
  data: Uint8Array,
  f: { format: number; channels: number; rate: number; bits: number },
): Audio {
  if (f.channels < 1) throw new AudioFormatError("WAV declares no channels");
  if (f.rate < 1000 || f.rate > 384000) {
    throw new AudioFormatError(`WAV sample rate ${f.rate} Hz is out of range`);
  }
  const bytes = f.bits / 8;
  const pcm = f.format === 1;
  const float = f.format === 3;
  if (!(pcm && [1, 2, 3, 4].includes(bytes)) && !(float && [4, 8].includes(bytes))) {
    throw new AudioFormatError(
      `WAV encoding ${f.format} with ${f.bits}-bit samples is not supported (PCM 8/16/24/32 or float 32/64)`,
    );
  }
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const frames = Math.floor(data.length / (bytes * f.channels));
  const out = new Float32Array(frames);
  for (let i = 0; i < frames; i++) {
    let sum = 0;
    for (let ch = 0; ch < f.channels; ch++) {
      const o = (i * f.channels + ch) * bytes;
      let v: number;
      if (float) v = bytes === 4 ? dv.getFloat32(o, true) : dv.getFloat64(o, true);
      else if (bytes === 1) v = (dv.getUint8(o) - 128) / 128;
      else if (bytes === 2) v = dv.getInt16(o, true) / 32768;
      else if (bytes === 3) {
        v = (((dv.getUint8(o + 2) << 24) | (dv.getUint8(o + 1) << 16) | (dv.getUint8(o) << 8)) >> 8) /
          8388608;
      } else v = dv.getInt32(o, true) / 2147483648;
      sum += v;
    }
    out[i] = sum / f.channels;
  }
  return { samples: out, sampleRate: f.rate };
}

export function floatToInt16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    out[i] = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
  }
  return out;
}

export function int16ToFloat(pcm: Int16Array): Float32Array {
  const out = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = pcm[i] / 32768;
  return out;
}

/** Little-endian 16-bit PCM bytes (the `pcm` response format and the realtime wire format). */
export function pcm16Bytes(samples: Float32Array): Uint8Array {
  const ints = floatToInt16(samples);
  const out = new Uint8Array(ints.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < ints.length; i++) dv.setInt16(i * 2, ints[i], true);
  return out;
}

/** Reads little-endian 16-bit PCM bytes (an odd trailing byte is ignored). */
export function pcm16FromBytes(b: Uint8Array): Float32Array {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const n = Math.floor(b.length / 2);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = dv.getInt16(i * 2, true) / 32768;
  return out;
}

export function wavHeader(sampleRate: number, dataBytes: number, channels = 1): Uint8Array {
  const h = new Uint8Array(44);
  const dv = new DataView(h.buffer);
  const put = (at: number, s: string) => [...s].forEach((c, i) => (h[at + i] = c.charCodeAt(0)));
  put(0, "RIFF");
  dv.setUint32(4, 36 + dataBytes, true);
  put(8, "WAVE");
  put(12, "fmt ");
  dv.setUint32(16, 16, true);
  dv.setUint16(20, 1, true);
  dv.setUint16(22, channels, true);
  dv.setUint32(24, sampleRate, true);
  dv.setUint32(28, sampleRate * channels * 2, true);
  dv.setUint16(32, channels * 2, true);
  dv.setUint16(34, 16, true);
  put(36, "data");
  dv.setUint32(40, dataBytes, true);
  return h;
}

/** A mono 16-bit PCM WAV file. */
export function encodeWav(a: Audio): Uint8Array {
  const data = pcm16Bytes(a.samples);
  const out = new Uint8Array(44 + data.length);
  out.set(wavHeader(a.sampleRate, data.length), 0);
  out.set(data, 44);
  return out;
}

/** Band-limited resampling (src/audio/resample.ts): kept here, beside the other sample helpers, for callers. */
export { resample } from "./resample.ts";

export function durationSeconds(a: Audio): number {
  return a.samples.length / a.sampleRate;
}

/** Root-mean-square level of a stretch of samples (0 for silence). */
export function rms(samples: Float32Array, from = 0, to = samples.length): number {
  if (to <= from) return 0;
  let sum = 0;
  for (let i = from; i < to; i++) sum += samples[i] * samples[i];
  return Math.sqrt(sum / (to - from));
}
