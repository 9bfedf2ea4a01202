/**
 * Joining byte arrays: the audio encoders build files from headers, pages and frames made apart, and
 * streams hand over bytes in chunks.
 */

/** One array holding `parts` end to end. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
