/**
 * The protobuf wire format, as much as reading ONNX files needs: a reader that walks a message's fields
 * (the writer the tiny test models use is dev/onnx/proto-writer.ts).
 */

/** Wire types (protobuf encoding spec): 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32. */
export const WIRE = { varint: 0, fixed64: 1, bytes: 2, fixed32: 5 } as const;

export interface ProtoField {
  field: number;
  wire: number;
  /** The varint (as bigint), or the fixed value's raw bytes, or the length-delimited payload. */
  varint?: bigint;
  bytes?: Uint8Array;
}

export class ProtoError extends Error {}

/** A varint at `at`: its value and the offset after it. */
export function readVarint(buf: Uint8Array, at: number): [bigint, number] {
  let v = 0n;
  let shift = 0n;
  for (let i = at; i < buf.length; i++) {
    v |= BigInt(buf[i] & 0x7f) << shift;
    if ((buf[i] & 0x80) === 0) return [v, i + 1];
    shift += 7n;
    if (shift > 70n) break;
  }
  throw new ProtoError(`bad varint at byte ${at}`);
}

/** The fields of one message, in order; throws ProtoError on truncated or malformed input. */
export function readFields(buf: Uint8Array): ProtoField[] {
  const fields: ProtoField[] = [];
  let at = 0;
  while (at < buf.length) {
    const [key, next] = readVarint(buf, at);
    at = next;
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (field === 0) throw new ProtoError(`field number 0 at byte ${at}`);
    if (wire === WIRE.varint) {
      const [v, n] = readVarint(buf, at);
      fields.push({ field, wire, varint: v });
      at = n;
    } else if (wire === WIRE.bytes) {
      const [len, n] = readVarint(buf, at);
      const end = n + Number(len);
      if (end > buf.length) throw new ProtoError(`field ${field} runs past the end (${end} > ${buf.length})`);
      fields.push({ field, wire, bytes: buf.subarray(n, end) });
      at = end;
    } else if (wire === WIRE.fixed32 || wire === WIRE.fixed64) {
      const size = wire === WIRE.fixed32 ? 4 : 8;
      if (at + size > buf.length) throw new ProtoError(`field ${field} runs past the end`);
      fields.push({ field, wire, bytes: buf.subarray(at, at + size) });
      at += size;
    } else {
      throw new ProtoError(`unsupported wire type ${wire} for field ${field}`);
    }
  }
  return fields;
}

/** A varint field as a signed 64-bit number (ONNX's int64 fields are two's complement). */
export function signed(v: bigint): number {
  return Number(v >= 1n << 63n ? v - (1n << 64n) : v);
}

/** Repeated integers, whether packed (one bytes field) or not (one varint field each). */
export function intsOf(fields: ProtoField[], field: number): number[] {
  const out: number[] = [];
  for (const f of fields) {
    if (f.field !== field) continue;
    if (f.varint !== undefined) out.push(signed(f.varint));
    else if (f.bytes && f.wire === WIRE.bytes) {
      let at = 0;
      while (at < f.bytes.length) {
        const [v, n] = readVarint(f.bytes, at);
        out.push(signed(v));
        at = n;
      }
    }
  }
  return out;
}

const dec = new TextDecoder();

export function stringOf(fields: ProtoField[], field: number): string | undefined {
  const f = fields.find((x) => x.field === field && x.bytes);
  return f?.bytes ? dec.decode(f.bytes) : undefined;
}

export function stringsOf(fields: ProtoField[], field: number): string[] {
  return fields.filter((x) => x.field === field && x.bytes).map((x) => dec.decode(x.bytes!));
}

export function messagesOf(fields: ProtoField[], field: number): ProtoField[][] {
  return fields.filter((x) => x.field === field && x.wire === WIRE.bytes).map((x) => readFields(x.bytes!));
}

export function intOf(fields: ProtoField[], field: number): number | undefined {
  const f = fields.find((x) => x.field === field && x.varint !== undefined);
  return f?.varint === undefined ? undefined : signed(f.varint);
}

export function floatOf(fields: ProtoField[], field: number): number | undefined {
  const f = fields.find((x) => x.field === field && x.wire === WIRE.fixed32);
  return f?.bytes ? new DataView(f.bytes.buffer, f.bytes.byteOffset, 4).getFloat32(0, true) : undefined;
}
