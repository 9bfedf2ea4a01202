/**
 * A minimal WebM (Matroska) muxer for test fixtures: the Opus packets of an OGG Opus file (opusenc's
 * output) repacked as one audio track, as a browser's MediaRecorder records speech. Not for production.
 */

/** Opus packets and the OpusHead of an OGG Opus stream. */
function oggPackets(ogg: Uint8Array): Uint8Array[] {
  const packets: Uint8Array[] = [];
  let partial: number[] = [];
  let at = 0;
  while (at + 27 <= ogg.length) {
    if (String.fromCharCode(...ogg.subarray(at, at + 4)) !== "OggS") {
      throw new Error(`no OGG page at byte ${at}`);
    }
    const nSegments = ogg[at + 26];
    const table = ogg.subarray(at + 27, at + 27 + nSegments);
    let body = at + 27 + nSegments;
    for (const len of table) {
      partial.push(...ogg.subarray(body, body + len));
      body += len;
      if (len < 255) {
        packets.push(Uint8Array.from(partial));
        partial = [];
      }
    }
    at = body;
  }
  return packets;
}

/** An EBML element: id bytes, then the size as an 8-byte vint, then the body. */
function el(id: number[], body: Uint8Array | number[]): number[] {
  const b = [...body];
  const size = [0x01, 0, 0, 0];
  for (let i = 3; i >= 0; i--) size.push((b.length / 2 ** (8 * i)) & 0xff);
  return [...id, ...size, ...b];
}

const uint = (v: number, bytes = 4) =>
  Array.from({ length: bytes }, (_, i) => (v >>> (8 * (bytes - 1 - i))) & 0xff);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));
const float64 = (v: number) => [...new Uint8Array(new Float64Array([v]).buffer)].reverse();

/** WebM bytes holding the OGG Opus stream's audio (20 ms packets, as opusenc writes them). */
export function oggOpusToWebm(ogg: Uint8Array): Uint8Array {
  const [head, , ...audio] = oggPackets(ogg);
  const channels = head[9];
  const ebml = el([0x1a, 0x45, 0xdf, 0xa3], [
    ...el([0x42, 0x86], [1]), // EBMLVersion
    ...el([0x42, 0xf7], [1]), // EBMLReadVersion
    ...el([0x42, 0xf2], [4]), // EBMLMaxIDLength
    ...el([0x42, 0xf3], [8]), // EBMLMaxSizeLength
    ...el([0x42, 0x82], ascii("webm")), // DocType
    ...el([0x42, 0x87], [4]), // DocTypeVersion
    ...el([0x42, 0x85], [2]), // DocTypeReadVersion
  ]);
  const info = el([0x15, 0x49, 0xa9, 0x66], [
    ...el([0x2a, 0xd7, 0xb1], uint(1_000_000)), // TimecodeScale: 1 ms
    ...el([0x4d, 0x80], ascii("skulk-test")), // MuxingApp
    ...el([0x57, 0x41], ascii("skulk-test")), // WritingApp
  ]);
  const tracks = el(
    [0x16, 0x54, 0xae, 0x6b],
    el([0xae], [
      ...el([0xd7], [1]), // TrackNumber
      ...el([0x73, 0xc5], [1]), // TrackUID
      ...el([0x83], [2]), // TrackType: audio
      ...el([0x86], ascii("A_OPUS")),
      ...el([0x63, 0xa2], head), // CodecPrivate: OpusHead
      ...el([0xe1], [...el([0xb5], float64(48000)), ...el([0x9f], [channels])]),
    ]),
  );
  const blocks = audio.flatMap((p, i) => el([0xa3], [0x81, ...uint(i * 20, 2), 0x80, ...p]));
  const cluster = el([0x1f, 0x43, 0xb6, 0x75], [...el([0xe7], [0]), ...blocks]);
  return Uint8Array.from([...ebml, ...el([0x18, 0x53, 0x80, 0x67], [...info, ...tracks, ...cluster])]);
}
