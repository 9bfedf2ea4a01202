/**
 * Uploaded audio to mono PCM, in-process: the container is sniffed from its first bytes, WAV is parsed
 * here, MP3, FLAC, OGG (Opus/Vorbis) and WebM go through the `audio-decode` library (WebAssembly decoders).
 */
import decodeWithLibrary from "audio-decode";
import { type Audio, AudioFormatError, isWav, parseWav } from "./pcm.ts";

export type Container = "wav" | "mp3" | "flac" | "ogg" | "webm";
export const ACCEPTED_CONTAINERS: readonly Container[] = ["wav", "mp3", "flac", "ogg", "webm"];

/** What the bytes are, from their magic numbers; null when none matches. */
export function sniffContainer(b: Uint8Array): Container | null {
  if (isWav(b)) return "wav";
  const s = (n: number) => String.fromCharCode(...b.subarray(0, n));
  if (b.length >= 4 && s(4) === "fLaC") return "flac";
  if (b.length >= 4 && s(4) === "OggS") return "ogg";
  if (b.length >= 4 && b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return "webm";
  if (b.length >= 3 && s(3) === "ID3") return "mp3";
  if (b.length >= 2 && b[0] === 0xff && (b[1] & 0xe0) === 0xe0 && (b[1] & 0x06) !== 0) return "mp3";
  return null;
}

/** A name for what an unaccepted upload looks like, for the 415 message. */
export function describeUnknown(b: Uint8Array, filename?: string): string {
  const s = String.fromCharCode(...b.subarray(0, 12));
  if (s.startsWith("ftyp", 4)) return "MP4/M4A (AAC)";
  if (s.startsWith("FORM")) return "AIFF";
  if (s.startsWith("#!AMR")) return "AMR";
  const ext = filename?.match(/\.([A-Za-z0-9]{1,6})$/)?.[1];
  return ext ? `an unrecognised '.${ext}' file` : "unrecognised data";
}

export class UnsupportedAudio extends Error {
  constructor(readonly what: string) {
    super(`audio format not supported: ${what}; send ${ACCEPTED_CONTAINERS.join(", ")}`);
    this.name = "UnsupportedAudio";
  }
}

interface LibraryAudio {
  channelData: Float32Array[];
  sampleRate: number;
}

/** Decodes an upload to mono; throws UnsupportedAudio (415) or AudioFormatError (400, corrupt data). */
export async function decodeAudio(
  b: Uint8Array,
  filename?: string,
): Promise<Audio & { container: Container }> {
  const container = sniffContainer(b);
  if (!container) throw new UnsupportedAudio(describeUnknown(b, filename));
  if (container === "wav") return { ...parseWav(b), container };
  let decoded: LibraryAudio;
  try {
    decoded = await decodeWithLibrary(b) as unknown as LibraryAudio;
  } catch (e) {
    throw new AudioFormatError(`the ${container} audio could not be decoded: ${(e as Error).message}`);
  }
  const channels = decoded?.channelData ?? [];
  if (!channels.length || !channels[0].length || !decoded.sampleRate) {
    throw new AudioFormatError(`the ${container} audio decoded to no samples`);
  }
  const n = channels[0].length;
  const mono = new Float32Array(n);
  for (const ch of channels) for (let i = 0; i < n; i++) mono[i] += ch[i] / channels.length;
  return { samples: mono, sampleRate: decoded.sampleRate, container };
}
