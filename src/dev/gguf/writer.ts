/**
 * Writes GGUF v3 files: the header (typed metadata, tensor infos) as a pure encoder, and a file writer that
 * streams each tensor's bytes at its aligned offset. No npm package writes whole GGUF files, so this is ours.
 */

/** GGUF metadata value types (numbering fixed by the GGUF spec). */
export enum GgufType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

/** ggml tensor types this writer can lay out (element size is known without block quantisation). */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
}

const ELEMENT_BYTES: Record<GgmlType, number> = { [GgmlType.F32]: 4, [GgmlType.F16]: 2 };

type Scalar = number | bigint | boolean | string;

/**
 * One typed metadata entry; the same `{type, value, subType}` shape `@huggingface/gguf` returns as
 * `typedMetadata`, so entries read from one file can be written into another unchanged.
 */
export interface GgufEntry {
  type: GgufType;
  value: Scalar | Scalar[];
  subType?: GgufType;
}

export type GgufMetadata = Record<string, GgufEntry>;

export interface GgufTensor {
  name: string;
  /** ggml order: dims[0] is the fastest-varying (row length). */
  dims: number[];
  type: GgmlType;
  data: Uint8Array;
}

export const GGUF_DEFAULT_ALIGNMENT = 32;

// Metadata helpers: the GGUF type goes with the value, so callers never juggle type codes.
export const gguf = {
  u32: (value: number): GgufEntry => ({ type: GgufType.UINT32, value }),
  i32: (value: number): GgufEntry => ({ type: GgufType.INT32, value }),
  f32: (value: number): GgufEntry => ({ type: GgufType.FLOAT32, value }),
  bool: (value: boolean): GgufEntry => ({ type: GgufType.BOOL, value }),
  str: (value: string): GgufEntry => ({ type: GgufType.STRING, value }),
  strings: (value: string[]): GgufEntry => ({ type: GgufType.ARRAY, subType: GgufType.STRING, value }),
};

/** Growable little-endian byte sink for the header. */
class Sink {
  #buf = new Uint8Array(1 << 16);
  #view = new DataView(this.#buf.buffer);
  #len = 0;
  static #enc = new TextEncoder();

  /** Reserves n bytes and returns the view to write them through (reserving may replace the buffer). */
  #at(n: number): DataView {
    this.#reserve(n);
    return this.#view;
  }
  #reserve(n: number): number {
    if (this.#len + n > this.#buf.length) {
      let size = this.#buf.length * 2;
      while (size < this.#len + n) size *= 2;
      const next = new Uint8Array(size);
      next.set(this.#buf.subarray(0, this.#len));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    const at = this.#len;
    this.#len += n;
    return at;
  }
  u8(v: number) {
    this.#at(1).setUint8(this.#len - 1, v);
  }
  i8(v: number) {
    this.#at(1).setInt8(this.#len - 1, v);
  }
  u16(v: number) {
    this.#at(2).setUint16(this.#len - 2, v, true);
  }
  i16(v: number) {
    this.#at(2).setInt16(this.#len - 2, v, true);
  }
  u32(v: number) {
    this.#at(4).setUint32(this.#len - 4, v, true);
  }
  i32(v: number) {
    this.#at(4).setInt32(this.#len - 4, v, true);
  }
  f32(v: number) {
    this.#at(4).setFloat32(this.#len - 4, v, true);
  }
  f64(v: number) {
    this.#at(8).setFloat64(this.#len - 8, v, true);
  }
  u64(v: number | bigint) {
    this.#at(8).setBigUint64(this.#len - 8, BigInt(v), true);
  }
  i64(v: number | bigint) {
    this.#at(8).setBigInt64(this.#len - 8, BigInt(v), true);
  }
  str(s: string) {
    const bytes = Sink.#enc.encode(s);
    this.u64(bytes.length);
    const at = this.#reserve(bytes.length); // before touching #buf: reserving may replace it
    this.#buf.set(bytes, at);
  }
  pad(alignment: number) {
    const rem = this.#len % alignment;
    if (rem) this.#reserve(alignment - rem);
  }
  get length() {
    return this.#len;
  }
  bytes(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }
}

function writeScalar(s: Sink, type: GgufType, v: Scalar, key: string): void {
  const num = () => {
    if (typeof v !== "number" && typeof v !== "bigint") {
      throw new TypeError(`GGUF key ${key}: expected a number, got ${typeof v}`);
    }
    return Number(v);
  };
  switch (type) {
    case GgufType.UINT8:
      return s.u8(num());
    case GgufType.INT8:
      return s.i8(num());
    case GgufType.UINT16:
      return s.u16(num());
    case GgufType.INT16:
      return s.i16(num());
    case GgufType.UINT32:
      return s.u32(num());
    case GgufType.INT32:
      return s.i32(num());
    case GgufType.FLOAT32:
      return s.f32(num());
    case GgufType.FLOAT64:
      return s.f64(num());
    case GgufType.UINT64:
      return s.u64(typeof v === "bigint" ? v : num());
    case GgufType.INT64:
      return s.i64(typeof v === "bigint" ? v : num());
    case GgufType.BOOL:
      return s.u8(v ? 1 : 0);
    case GgufType.STRING:
      if (typeof v !== "string") throw new TypeError(`GGUF key ${key}: expected a string, got ${typeof v}`);
      return s.str(v);
    default:
      throw new TypeError(`GGUF key ${key}: unsupported scalar type ${type}`);
  }
}

function writeEntry(s: Sink, key: string, e: GgufEntry): void {
  s.str(key);
  s.u32(e.type);
  if (e.type !== GgufType.ARRAY) {
    if (Array.isArray(e.value)) throw new TypeError(`GGUF key ${key}: array value for scalar type ${e.type}`);
    return writeScalar(s, e.type, e.value, key);
  }
  if (!Array.isArray(e.value) || e.subType === undefined) {
    throw new TypeError(`GGUF key ${key}: arrays need an array value and a subType`);
  }
  if (e.subType === GgufType.ARRAY) throw new TypeError(`GGUF key ${key}: nested arrays are not supported`);
  s.u32(e.subType);
  s.u64(e.value.length);
  for (const v of e.value) writeScalar(s, e.subType, v, key);
}

export function tensorByteSize(t: Pick<GgufTensor, "dims" | "type">): number {
  return t.dims.reduce((a, b) => a * b, 1) * ELEMENT_BYTES[t.type];
}

const alignUp = (n: number, a: number) => Math.ceil(n / a) * a;

export interface GgufLayout {
  /** Header bytes, padded so tensor data starts aligned. */
  header: Uint8Array;
  /** Offset of each tensor within the data section (aligned). */
  offsets: number[];
  /** Size of the data section, including padding after the last tensor. */
  dataBytes: number;
  alignment: number;
}

/**
 * Encodes the header for these tensors (their data is not read, only their size). `general.alignment`
 * in the metadata wins over the default, and is what the loader will use.
 */
export function encodeGgufHeader(
  metadata: GgufMetadata,
  tensors: Pick<GgufTensor, "name" | "dims" | "type">[],
): GgufLayout {
  const alignEntry = metadata["general.alignment"];
  const alignment = alignEntry ? Number(alignEntry.value) : GGUF_DEFAULT_ALIGNMENT;
  if (!Number.isInteger(alignment) || alignment <= 0 || alignment % 8 !== 0) {
    throw new RangeError(`general.alignment must be a positive multiple of 8, got ${alignment}`);
  }
  const s = new Sink();
  s.u32(0x46554747); // "GGUF" read as a little-endian u32
  s.u32(3);
  s.u64(tensors.length);
  s.u64(Object.keys(metadata).length);
  for (const [k, e] of Object.entries(metadata)) writeEntry(s, k, e);
  const offsets: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    if (t.dims.length < 1 || t.dims.length > 4) {
      throw new RangeError(`tensor ${t.name}: 1 to 4 dims, got ${t.dims.length}`);
    }
    s.str(t.name);
    s.u32(t.dims.length);
    for (const d of t.dims) s.u64(d);
    s.u32(t.type);
    s.u64(offset);
    offsets.push(offset);
    offset = alignUp(offset + tensorByteSize(t), alignment);
  }
  s.pad(alignment);
  return { header: s.bytes(), offsets, dataBytes: offset, alignment };
}

/** Writes a GGUF file; returns its size in bytes. */
export async function writeGguf(
  path: string,
  metadata: GgufMetadata,
  tensors: GgufTensor[],
): Promise<number> {
  for (const t of tensors) {
    if (t.data.byteLength !== tensorByteSize(t)) {
      throw new RangeError(
        `tensor ${t.name}: ${t.data.byteLength} bytes of data, its shape needs ${tensorByteSize(t)}`,
      );
    }
  }
  const layout = encodeGgufHeader(metadata, tensors);
  // Write to a sibling and rename, so a reader never sees a half-written model.
  const tmp = `${path}.${Deno.pid}.partial`;
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    await writeAll(file, layout.header);
    let pos = 0;
    for (const [i, t] of tensors.entries()) {
      if (layout.offsets[i] > pos) await writeAll(file, new Uint8Array(layout.offsets[i] - pos));
      await writeAll(file, t.data);
      pos = layout.offsets[i] + t.data.byteLength;
    }
    if (layout.dataBytes > pos) await writeAll(file, new Uint8Array(layout.dataBytes - pos));
    file.close();
    await Deno.rename(tmp, path);
  } catch (e) {
    try {
      file.close();
    } catch { /* already closed */ }
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
  return layout.header.byteLength + layout.dataBytes;
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.byteLength) done += await file.write(bytes.subarray(done));
}
