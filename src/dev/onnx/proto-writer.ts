/**
 * A protobuf message writer (varints, 64-bit integers, fixed32 floats, length-delimited bytes and nested
 * messages), as much as writing the tiny ONNX test models needs; models/onnx/protobuf.ts reads it back.
 */
import { WIRE } from "../../models/onnx/protobuf.ts";

const enc = new TextEncoder();

/** Builds one message; nested messages are encoded first and written as bytes fields. */
export class ProtoWriter {
  readonly #parts: Uint8Array[] = [];
  #length = 0;

  get length(): number {
    return this.#length;
  }

  #push(b: Uint8Array) {
    this.#parts.push(b);
    this.#length += b.length;
  }

  #varint(v: bigint) {
    // Negative int64 values are written as their two's complement in ten bytes, as protobuf does.
    let x = v < 0n ? v + (1n << 64n) : v;
    const out: number[] = [];
    while (x >= 0x80n) {
      out.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    out.push(Number(x));
    this.#push(Uint8Array.from(out));
  }

  #tag(field: number, wire: number) {
    this.#varint(BigInt((field << 3) | wire));
  }

  /** int32, int64, enum and bool fields. */
  int(field: number, v: number | bigint): this {
    this.#tag(field, WIRE.varint);
    this.#varint(BigInt(v));
    return this;
  }

  float(field: number, v: number): this {
    this.#tag(field, WIRE.fixed32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.#push(b);
    return this;
  }

  bytes(field: number, b: Uint8Array): this {
    this.#tag(field, WIRE.bytes);
    this.#varint(BigInt(b.length));
    this.#push(b);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, enc.encode(s));
  }

  message(field: number, m: ProtoWriter): this {
    return this.bytes(field, m.finish());
  }

  /** Repeated integers, packed into one length-delimited field (proto3's default for repeated scalars). */
  packedInts(field: number, vs: readonly (number | bigint)[]): this {
    const inner = new ProtoWriter();
    for (const v of vs) inner.#varint(BigInt(v));
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.#length);
    let at = 0;
    for (const p of this.#parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}
