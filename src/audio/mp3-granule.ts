/**
 * Codes one granule's 576 spectral lines: x^(3/4) quantization under one global gain chosen to fit a bit
 * budget, and Huffman coding of the big-values regions and the count1 quadruples (no scalefactors).
 */
import type { BitWriter } from "./mp3-bits.ts";
import { GRANULE } from "./mp3-filterbank.ts";
import { PAIR_TABLES, type PairTable, QUAD_A } from "./mp3-tables.ts";

/** The side-info fields of a long-block granule without scalefactors. */
export interface GranuleInfo {
  part23Length: number;
  bigValues: number;
  globalGain: number;
  tableSelect: [number, number, number];
  region0Count: number;
  region1Count: number;
  count1Table: 0 | 1;
}

/** Most bits one granule's part2_3_length field can declare. */
export const MAX_GRANULE_BITS = 4095;
/** Largest quantized magnitude: table 23 or 31's escape, 15 + 2^13 - 1. */
const MAX_QUANT = 15 + 8191;
/** A cost that marks a table unable to code a value. */
const NEVER = 1 << 24;
/** Rounding offset of the quantizer (the value that minimises error for Laplacian-like spectra). */
const ROUNDING = 0.4054;

const SMALL = PAIR_TABLES.filter((t) => t.linbits === 0);
/**
 * Tables 16-23 and 24-31: two codes (families), each with escape fields of growing width; within a family
 * the narrowest escape that fits a region is the cheapest.
 */
const ESCAPE = PAIR_TABLES.filter((t) => t.linbits > 0);
const FAMILIES = [...new Set(ESCAPE.map((t) => t.lengths))].map((lengths) => ({
  lengths: Uint8Array.from(lengths),
  tables: ESCAPE.filter((t) => t.lengths === lengths).sort((a, b) => a.linbits - b.linbits),
}));
/** The distinct escape widths, each with the largest value it reaches (15 + 2^linbits - 1). */
const WIDTHS = [...new Set(ESCAPE.map((t) => t.linbits))];
const WIDTH_LIMITS = WIDTHS.map((w) => 15 + (1 << w) - 1);
const SMALL_LENGTHS = SMALL.map((t) => Uint8Array.from(t.lengths));
const MAX_PAIRS = GRANULE / 2;

export interface GranuleLayout {
  bits: number;
  /** End of the big-values region and of the count1 region, in lines. */
  big: number;
  count1End: number;
  tables: [PairTable | null, PairTable | null, PairTable | null];
  /** Region ends in lines. */
  regionEnds: [number, number];
  region0Count: number;
  region1Count: number;
  count1Table: 0 | 1;
}

/** Quantizes |xr|^(3/4) (precomputed) at `gain`; returns the largest value. */
function quantize(xr34: Float64Array, gain: number, ix: Int32Array): number {
  const scale = 2 ** ((-3 * (gain - 210)) / 16);
  let max = 0;
  for (let i = 0; i < GRANULE; i++) {
    const q = Math.floor(xr34[i] * scale + ROUNDING);
    ix[i] = q;
    if (q > max) max = q;
  }
  return max;
}

/**
 * Per-pair prefix sums, so any region's cost is one subtraction: one row per small table (NEVER where a
 * value exceeds it), one per escape family (code and signs), the count of escaped values, of nonzero pairs,
 * and of pairs too large for each escape width.
 */
const ROW = MAX_PAIRS + 1;
const CODES = SMALL.length * ROW;
const ESCAPES = CODES + FAMILIES.length * ROW;
const NONZERO = ESCAPES + ROW;
const OVER = NONZERO + ROW;
const cum = new Float64Array(OVER + WIDTHS.length * ROW);

function prefixCosts(ix: Int32Array, pairs: number) {
  for (let p = 0; p < pairs; p++) {
    const x = ix[2 * p];
    const y = ix[2 * p + 1];
    const signs = (x ? 1 : 0) + (y ? 1 : 0);
    const m = x > y ? x : y;
    for (let t = 0; t < SMALL.length; t++) {
      const dim = SMALL[t].dim;
      const cost = m < dim ? SMALL_LENGTHS[t][x * dim + y] + signs : NEVER;
      cum[t * ROW + p + 1] = cum[t * ROW + p] + cost;
    }
    const cx = x < 15 ? x : 15;
    const cy = y < 15 ? y : 15;
    for (let f = 0; f < FAMILIES.length; f++) {
      const row = CODES + f * ROW;
      cum[row + p + 1] = cum[row + p] + FAMILIES[f].lengths[cx * 16 + cy] + signs;
    }
    cum[ESCAPES + p + 1] = cum[ESCAPES + p] + (x >= 15 ? 1 : 0) + (y >= 15 ? 1 : 0);
    cum[NONZERO + p + 1] = cum[NONZERO + p] + (m ? 1 : 0);
    for (let w = 0; w < WIDTHS.length; w++) {
      cum[OVER + w * ROW + p + 1] = cum[OVER + w * ROW + p] + (m > WIDTH_LIMITS[w] ? 1 : 0);
    }
  }
}

/** The cheapest table for pairs [from, to) and its cost; table null (0) for an all-zero region. */
function bestTable(from: number, to: number): { bits: number; table: PairTable | null } {
  if (cum[NONZERO + to] === cum[NONZERO + from]) return { bits: 0, table: null };
  let best: { bits: number; table: PairTable | null } = { bits: Infinity, table: null };
  for (let t = 0; t < SMALL.length; t++) {
    const bits = cum[t * ROW + to] - cum[t * ROW + from];
    if (bits < best.bits) best = { bits, table: SMALL[t] };
  }
  const escapes = cum[ESCAPES + to] - cum[ESCAPES + from];
  const fits = (t: PairTable) => {
    const w = WIDTHS.indexOf(t.linbits);
    return cum[OVER + w * ROW + to] === cum[OVER + w * ROW + from];
  };
  for (let f = 0; f < FAMILIES.length; f++) {
    const table = FAMILIES[f].tables.find(fits);
    if (!table) continue;
    const bits = cum[CODES + f * ROW + to] - cum[CODES + f * ROW + from] + escapes * table.linbits;
    if (bits < best.bits) best = { bits, table };
  }
  return best;
}

/** Chooses the region split, the table of each region and the count1 table that code `ix` in fewest bits. */
function layout(ix: Int32Array, edges: readonly number[]): GranuleLayout {
  let count1End = GRANULE;
  while (count1End > 0 && ix[count1End - 1] === 0 && ix[count1End - 2] === 0) count1End -= 2;
  let big = count1End;
  while (big >= 4 && ix[big - 1] <= 1 && ix[big - 2] <= 1 && ix[big - 3] <= 1 && ix[big - 4] <= 1) big -= 4;

  let quadA = 0;
  let quadB = 0;
  for (let i = big; i < count1End; i += 4) {
    const signs = ix[i] + ix[i + 1] + ix[i + 2] + ix[i + 3];
    quadA += QUAD_A.lengths[ix[i] * 8 + ix[i + 1] * 4 + ix[i + 2] * 2 + ix[i + 3]] + signs;
    quadB += 4 + signs;
  }

  const pairs = big / 2;
  prefixCosts(ix, pairs);
  const memo = new Map<number, { bits: number; table: PairTable | null }>();
  const best = (from: number, to: number) => {
    const key = from * 1024 + to;
    let hit = memo.get(key);
    if (!hit) memo.set(key, hit = bestTable(from, to));
    return hit;
  };

  let chosen: GranuleLayout | null = null;
  for (let r0 = 0; r0 < 16; r0++) {
    const a = Math.min(edges[r0 + 1], big) / 2;
    for (let r1 = 0; r1 < 8 && r0 + r1 + 2 < edges.length; r1++) {
      const b = Math.min(edges[r0 + r1 + 2], big) / 2;
      const regions = [best(0, a), best(a, b), best(b, pairs)];
      const bits = regions[0].bits + regions[1].bits + regions[2].bits + Math.min(quadA, quadB);
      if (!chosen || bits < chosen.bits) {
        chosen = {
          bits,
          big,
          count1End,
          tables: [regions[0].table, regions[1].table, regions[2].table],
          regionEnds: [a * 2, b * 2],
          region0Count: r0,
          region1Count: r1,
          count1Table: quadB < quadA ? 1 : 0,
        };
      }
      // Once region 1 reaches the end of the big values, longer region 1 counts change nothing.
      if (b === pairs) break;
    }
    if (a === pairs) break;
  }
  return chosen!;
}

/** A granule ready to write: its side info, and what writeGranule needs to emit its main data. */
export interface CodedGranule {
  info: GranuleInfo;
  ix: Int32Array;
  negative: Uint8Array;
  layout: GranuleLayout;
}

/**
 * Quantizes `xr` with the smallest global gain (finest steps) whose coding fits `budget` bits, but never finer
 * than `minGain` (past the noise floor of 16-bit audio more bits buy nothing). `hint`, the previous
 * granule's gain, starts the search: neighbouring granules mostly need about the same gain.
 */
export function codeGranule(
  xr: Float64Array,
  budget: number,
  minGain: number,
  edges: readonly number[],
  hint = 210,
) {
  const xr34 = new Float64Array(GRANULE);
  const negative = new Uint8Array(GRANULE);
  for (let i = 0; i < GRANULE; i++) {
    xr34[i] = Math.abs(xr[i]) ** 0.75;
    negative[i] = xr[i] < 0 ? 1 : 0;
  }
  const ix = new Int32Array(GRANULE);
  const fits = (gain: number) => quantize(xr34, gain, ix) <= MAX_QUANT && layout(ix, edges).bits <= budget;
  // Bits fall as the gain rises (coarser steps); at 255 every line of real audio quantizes to zero. Gallop
  // from the hint to a bracket (lo does not fit, or is below minGain; hi fits, or is 255), then bisect.
  const start = Math.min(255, Math.max(minGain, hint));
  let lo = minGain - 1;
  let hi = 255;
  if (fits(start)) {
    hi = start;
    for (let step = 1; hi - step >= minGain; step *= 2) {
      if (!fits(hi - step)) {
        lo = hi - step;
        break;
      }
      hi -= step;
    }
  } else {
    lo = start;
    for (let step = 1; lo + step < 255; step *= 2) {
      if (fits(lo + step)) {
        hi = lo + step;
        break;
      }
      lo += step;
    }
  }
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (fits(mid)) hi = mid;
    else lo = mid;
  }
  quantize(xr34, hi, ix);
  let l = layout(ix, edges);
  // Only a budget too small for any gain (a few bytes a granule) gets here: drop the top lines until it fits.
  for (let cut = l.count1End; l.bits > budget && cut > 0;) {
    cut = Math.max(0, cut - 32);
    ix.fill(0, cut);
    l = layout(ix, edges);
  }
  const info: GranuleInfo = {
    part23Length: l.bits,
    bigValues: l.big / 2,
    globalGain: hi,
    tableSelect: [l.tables[0]?.id ?? 0, l.tables[1]?.id ?? 0, l.tables[2]?.id ?? 0],
    region0Count: l.region0Count,
    region1Count: l.region1Count,
    count1Table: l.count1Table,
  };
  return { info, ix, negative, layout: l } satisfies CodedGranule;
}

/** Writes the granule's Huffman-coded main data (part 3: no scalefactors are sent). */
export function writeGranule(w: BitWriter, g: CodedGranule): void {
  const { ix, negative, layout: l } = g;
  for (let i = 0; i < l.big; i += 2) {
    const region = i < l.regionEnds[0] ? 0 : i < l.regionEnds[1] ? 1 : 2;
    const t = l.tables[region];
    if (!t) continue; // an all-zero region with table 0 sends nothing
    const x = ix[i];
    const y = ix[i + 1];
    const dim = t.linbits ? 16 : t.dim;
    const cx = Math.min(x, 15);
    const cy = Math.min(y, 15);
    w.put(t.codes[cx * dim + cy], t.lengths[cx * dim + cy]);
    if (t.linbits && x >= 15) w.put(x - 15, t.linbits);
    if (x) w.put(negative[i], 1);
    if (t.linbits && y >= 15) w.put(y - 15, t.linbits);
    if (y) w.put(negative[i + 1], 1);
  }
  for (let i = l.big; i < l.count1End; i += 4) {
    const v = ix[i] * 8 + ix[i + 1] * 4 + ix[i + 2] * 2 + ix[i + 3];
    if (l.count1Table) w.put(15 - v, 4);
    else w.put(QUAD_A.codes[v], QUAD_A.lengths[v]);
    for (let k = 0; k < 4; k++) if (ix[i + k]) w.put(negative[i + k], 1);
  }
}
