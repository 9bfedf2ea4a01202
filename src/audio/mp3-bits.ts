/**
 * A most-significant-bit-first bit writer for MPEG audio frames: side info and Huffman-coded main data are
 * written with it, then read back as bytes (the last byte zero-padded).
 */
export class BitWriter {
  #bytes: Uint8Array;
  #length = 0;
  /** Bits not yet flushed, held in the low `#pending` bits of `#acc`. */
  #acc = 0;
  #pending = 0;

  constructor(capacity = 256) {
    this.#bytes = new Uint8Array(capacity);
  }

  /** Writes the low `width` bits of `value` (0 <= width <= 24). */
  put(value: number, width: number): void {
    if (width === 0) return;
    this.#acc = ((this.#acc << width) | (value & ((1 << width) - 1))) >>> 0;
    this.#pending += width;
    while (this.#pending >= 8) {
      this.#pending -= 8;
      this.#push((this.#acc >>> this.#pending) & 0xff);
    }
    this.#acc &= (1 << this.#pending) - 1;
  }

  get bitLength(): number {
    return this.#length * 8 + this.#pending;
  }

  /** The bytes written, the last partial byte padded with zeros. */
  bytes(): Uint8Array {
    const out = this.#bytes.slice(0, this.#length + (this.#pending ? 1 : 0));
    if (this.#pending) out[this.#length] = (this.#acc << (8 - this.#pending)) & 0xff;
    return out;
  }

  #push(byte: number) {
    if (this.#length === this.#bytes.length) {
      const grown = new Uint8Array(this.#bytes.length * 2);
      grown.set(this.#bytes);
      this.#bytes = grown;
    }
    this.#bytes[this.#length++] = byte;
  }
}
