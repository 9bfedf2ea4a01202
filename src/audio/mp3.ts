/**
 * MP3 output for speech: mono MPEG-1 (32/44.1/48 kHz) or MPEG-2 (16/22.05/24 kHz) Layer III at a constant bit
 * rate with a bit reservoir, as a streaming encoder (PCM in, whole frames out) or a whole file with an Info tag.
 */
import { pcm16FromBytes, resample } from "./pcm.ts";
import { concatBytes } from "./bytes.ts";
import { BitWriter } from "./mp3-bits.ts";
import { AnalysisFilterbank, GRANULE } from "./mp3-filterbank.ts";
import {
  frameBytes,
  header,
  MP3_SAMPLE_RATES,
  type Mp3Format,
  mp3Format,
  sideInfo,
  sideInfoBytes,
} from "./mp3-frame.ts";
import { type CodedGranule, codeGranule, MAX_GRANULE_BITS, writeGranule } from "./mp3-granule.ts";
import { BITRATES, SAMPLE_RATES, SFB_WIDTHS } from "./mp3-tables.ts";

export { MP3_SAMPLE_RATES, type Mp3Format, mp3Format };

/**
 * Samples by which decoded audio trails the input: the MDCT's granule of overlap (576) and the polyphase
 * filter pair (481). A decoder that honours the Info tag's encoder delay skips it.
 */
export const CODEC_DELAY = 1057;
/** The part of CODEC_DELAY that decoders already account for themselves (the LAME tag convention). */
const DECODER_DELAY = 529;

/** The main-data buffer (bytes) a conforming decoder has: the reservoir plus this frame must fit. */
const DECODER_BUFFER = 7680 / 8;

/** Below this global gain the quantizer's steps are finer than 16-bit audio's; more bits buy nothing. */
const MIN_GAIN = 140;

/** Low-pass cut-off (Hz) by bit rate: too few bits for the full band are better spent below it. */
const LOWPASS: [kbps: number, hz: number][] = [
  [8, 2500],
  [16, 4000],
  [24, 5500],
  [32, 7000],
  [40, 8000],
  [48, 9000],
  [56, 10000],
  [64, 11000],
  [80, 13000],
  [96, 15000],
  [112, 16000],
  [128, 17000],
  [160, 18000],
  [192, 19000],
];

/** The rate an input rate is coded at: itself when MP3 has it, else the nearest rate above (or 48 kHz). */
export function mp3RateFor(inputRate: number): number {
  if (SAMPLE_RATES[inputRate]) return inputRate;
  return MP3_SAMPLE_RATES.find((r) => r >= inputRate) ?? 48000;
}

interface PendingFrame {
  bytes: Uint8Array;
  /** Next free byte of the frame's main-data slot. */
  fill: number;
}

/**
 * A streaming mono encoder: `encode` takes samples (full scale +-1) at the format's rate and returns the
 * frames completed so far; `flush` codes the rest (and enough silence to let decoders reach its end).
 * Frames are held back only while their slot may still take main data of the next frames (the reservoir).
 */
export class Mp3Encoder {
  readonly format: Mp3Format;
  #filterbank = new AnalysisFilterbank();
  #edges: number[];
  #cutoff: number;
  #buffer: Float32Array;
  #buffered = 0;
  #pending: PendingFrame[] = [];
  #out: Uint8Array[] = [];
  #paddingAcc = 0;
  #spectrum = new Float64Array(GRANULE);
  #samplesIn = 0;
  #frames = 0;
  /** The last granule's global gain, where the next one's search starts. */
  #gain = 210;

  constructor(sampleRate: number, bitrate?: number) {
    this.format = mp3Format(sampleRate, bitrate);
    this.#buffer = new Float32Array(this.format.frameSamples);
    this.#edges = [0];
    for (const w of SFB_WIDTHS[sampleRate]) this.#edges.push(this.#edges.at(-1)! + w);
    const hz = LOWPASS.find(([kbps]) => kbps >= this.format.bitrate)?.[1] ?? sampleRate / 2;
    this.#cutoff = Math.min(GRANULE, Math.ceil((hz / (sampleRate / 2)) * GRANULE));
  }

  /** Samples given to `encode` so far. */
  get samplesIn(): number {
    return this.#samplesIn;
  }

  /** Frames coded so far (flushed or not). */
  get frames(): number {
    return this.#frames;
  }

  encode(samples: Float32Array): Uint8Array {
    this.#samplesIn += samples.length;
    let at = 0;
    while (at < samples.length) {
      const n = Math.min(samples.length - at, this.#buffer.length - this.#buffered);
      // Full scale is +-1: beyond it the quantizer could need more than its largest escape value.
      for (let i = 0; i < n; i++) {
        const x = samples[at + i];
        this.#buffer[this.#buffered + i] = x > 1 ? 1 : x < -1 ? -1 : x === x ? x : 0;
      }
      this.#buffered += n;
      at += n;
      if (this.#buffered === this.#buffer.length) {
        this.#frame(this.#buffer);
        this.#buffered = 0;
      }
    }
    return this.#take();
  }

  /** Codes what is buffered plus the silence that carries the last samples through the codec delay. */
  flush(): Uint8Array {
    const total = this.#samplesIn + CODEC_DELAY;
    const frames = Math.ceil(total / this.format.frameSamples);
    while (this.#frames < frames) {
      this.#buffer.fill(0, this.#buffered);
      this.#frame(this.#buffer);
      this.#buffered = 0;
    }
    for (const p of this.#pending) this.#out.push(p.bytes);
    this.#pending = [];
    return this.#take();
  }

  #take(): Uint8Array {
    const out = concatBytes(this.#out);
    this.#out = [];
    return out;
  }

  #frame(pcm: Float32Array) {
    const f = this.format;
    const num = (f.frameSamples / 8) * f.bitrate * 1000;
    this.#paddingAcc += num % f.sampleRate;
    const padding = this.#paddingAcc >= f.sampleRate ? 1 : 0;
    this.#paddingAcc -= padding * f.sampleRate;
    const size = frameBytes(f, f.bitrate, padding);
    const slot = size - 4 - sideInfoBytes(f);

    // The reservoir: free bytes at the end of earlier frames' slots, up to what main_data_begin can point
    // back to, and within the standard decoder's 7680-bit input buffer (which high bit rates fill alone).
    const maxBegin = Math.max(0, Math.min(f.mpeg1 ? 511 : 255, DECODER_BUFFER - size));
    let free = this.#pending.reduce((n, p) => n + p.bytes.length - p.fill, 0);
    if (free > maxBegin) {
      this.#write(new Uint8Array(free - maxBegin)); // stuffing the decoder skips
      free = maxBegin;
    }

    const granules: CodedGranule[] = [];
    const data = new BitWriter(free + slot);
    const count = f.mpeg1 ? 2 : 1;
    for (let g = 0; g < count; g++) {
      this.#filterbank.granule(pcm.subarray(g * GRANULE, (g + 1) * GRANULE), this.#spectrum);
      this.#spectrum.fill(0, this.#cutoff);
      const left = (free + slot) * 8 - data.bitLength;
      const budget = Math.min(MAX_GRANULE_BITS, Math.floor(left / (count - g)));
      const coded = codeGranule(this.#spectrum, budget, MIN_GAIN, this.#edges, this.#gain);
      this.#gain = coded.info.globalGain;
      writeGranule(data, coded);
      granules.push(coded);
    }
    const bytes = new Uint8Array(size);
    bytes.set(header(f, f.bitrate, padding), 0);
    bytes.set(sideInfo(f, free, granules.map((g) => g.info)), 4);
    this.#pending.push({ bytes, fill: 4 + sideInfoBytes(f) });
    this.#write(data.bytes());
    this.#frames++;
  }

  /** Appends main data to the pending slots in order; frames whose slots are full are done. */
  #write(data: Uint8Array) {
    let at = 0;
    while (at < data.length) {
      const p = this.#pending.find((q) => q.fill < q.bytes.length);
      if (!p) throw new Error("MP3 main data overflowed its frames' slots"); // the budget rules this out
      const n = Math.min(data.length - at, p.bytes.length - p.fill);
      p.bytes.set(data.subarray(at, at + n), p.fill);
      p.fill += n;
      at += n;
    }
    while (this.#pending.length && this.#pending[0].fill === this.#pending[0].bytes.length) {
      this.#out.push(this.#pending.shift()!.bytes);
    }
  }
}

/**
 * The Info frame (Xing header of a constant-bit-rate file) with a LAME-style extension: frame and byte
 * counts give players the duration, and the encoder delay and padding let gapless decoders trim to the
 * exact input. Its side info is zero, so a decoder that does not know it plays one frame of silence.
 */
function infoFrame(f: Mp3Format, frames: number, audioBytes: number, samples: number): Uint8Array {
  const side = sideInfoBytes(f);
  const need = 4 + side + 4 + 4 + 8 + 36;
  const rates = (f.mpeg1 ? BITRATES.mpeg1 : BITRATES.mpeg2).slice(1);
  // Low bit rates make frames too small for the tag: the Info frame alone may use a higher one.
  const bitrate = rates.find((r) => r >= f.bitrate && frameBytes(f, r, 0) >= need) ??
    rates.find((r) => frameBytes(f, r, 0) >= need)!;
  const bytes = new Uint8Array(frameBytes(f, bitrate, 0));
  bytes.set(header(f, bitrate, 0), 0);
  const dv = new DataView(bytes.buffer);
  let at = 4 + side;
  bytes.set(new TextEncoder().encode("Info"), at);
  dv.setUint32(at + 4, 0x3, false); // fields present: frames, bytes
  dv.setUint32(at + 8, frames, false);
  dv.setUint32(at + 12, audioBytes + bytes.length, false);
  at += 16;
  bytes.set(new TextEncoder().encode("Skulk1.0 "), at); // encoder name, 9 bytes
  bytes[at + 9] = 0x01; // tag revision 0, constant bit rate
  bytes[at + 10] = Math.min(255, Math.round(f.sampleRate / 2 / 100)); // low-pass, in 100 Hz
  bytes[at + 20] = Math.min(255, f.bitrate);
  const delay = CODEC_DELAY - DECODER_DELAY;
  const padding = frames * f.frameSamples - samples - delay;
  bytes[at + 21] = delay >> 4;
  bytes[at + 22] = ((delay & 0xf) << 4) | ((padding >> 8) & 0xf);
  bytes[at + 23] = padding & 0xff;
  dv.setUint32(at + 28, audioBytes + bytes.length, false); // music length
  return bytes;
}

/**
 * A complete MP3 file of mono samples: an Info frame, then the audio frames. A rate MP3 lacks is resampled
 * to the nearest one above; `bitrate` (kbit/s) defaults per rate (64 for speech at 22.05 kHz).
 */
export function encodeMp3(samples: Float32Array, sampleRate: number, bitrate?: number): Uint8Array {
  const rate = mp3RateFor(sampleRate);
  const input = resample(samples, sampleRate, rate);
  const encoder = new Mp3Encoder(rate, bitrate);
  return withInfoFrame(encoder, concatBytes([encoder.encode(input), encoder.flush()]));
}

/** `audio`, every frame `encoder` wrote (flushed), behind the Info frame that describes them. */
function withInfoFrame(encoder: Mp3Encoder, audio: Uint8Array): Uint8Array {
  return concatBytes([infoFrame(encoder.format, encoder.frames, audio.length, encoder.samplesIn), audio]);
}

/**
 * A complete MP3 file (Info frame first) of a stream of 16-bit PCM bytes, coded chunk by chunk as they
 * arrive, so a long synthesis does not hold the event loop for the whole encoding at the end.
 */
export async function encodeMp3FromPcm16(
  pcm: ReadableStream<Uint8Array>,
  sampleRate: number,
  bitrate?: number,
): Promise<Uint8Array> {
  const encoder = new Mp3Encoder(sampleRate, bitrate);
  const audio = await new Response(pcm.pipeThrough(mp3EncoderStream(encoder))).arrayBuffer();
  return withInfoFrame(encoder, new Uint8Array(audio));
}

/**
 * Streaming MP3 of little-endian 16-bit mono PCM bytes (chunked anyhow) through `encoder`: frames go out as
 * soon as they are complete. There is no Info frame, since the length is not known up front, so decoders
 * play the codec delay (CODEC_DELAY samples of silence) first and up to one frame of padding last.
 */
export function mp3EncoderStream(encoder: Mp3Encoder): TransformStream<Uint8Array, Uint8Array> {
  let odd: number | null = null;
  return new TransformStream({
    transform(chunk, controller) {
      let bytes = chunk;
      if (odd !== null) {
        bytes = new Uint8Array(chunk.length + 1);
        bytes[0] = odd;
        bytes.set(chunk, 1);
        odd = null;
      }
      if (bytes.length % 2) {
        odd = bytes[bytes.length - 1];
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      const frames = encoder.encode(pcm16FromBytes(bytes));
      if (frames.length) controller.enqueue(frames);
    },
    flush(controller) {
      const frames = encoder.flush();
      if (frames.length) controller.enqueue(frames);
    },
  });
}
