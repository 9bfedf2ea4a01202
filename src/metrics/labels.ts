/**
 * Keeps label values bounded: a value becomes a label only when the node knows it (a catalogue model id,
 * an instance in its state) and only while fewer than `max` distinct values have been seen; else `other`.
 */

/** The label every value past the cap, or unknown to the node, is counted under. */
export const OTHER = "other";

export class BoundedLabel {
  readonly #seen = new Set<string>();
  constructor(readonly max: number) {}

  /** `""` stays `""` (the request named none); a known value keeps its name while the cap allows. */
  of(value: string | null | undefined, known: (v: string) => boolean): string {
    if (!value) return "";
    if (this.#seen.has(value)) return value;
    if (this.#seen.size >= this.max || !known(value)) return OTHER;
    this.#seen.add(value);
    return value;
  }
}

/** An HTTP status as a label: the code itself (a bounded set), or `other` for anything outside 100..599. */
export function codeLabel(status: number): string {
  return Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : OTHER;
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]);

/** An HTTP method as a label: a client may send any token as its method, so only the usual ones are named. */
export function methodLabel(method: string): string {
  return METHODS.has(method) ? method : OTHER;
}
