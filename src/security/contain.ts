/**
 * Containment: a path built from untrusted input is resolved (through symlinks, where it exists) and refused unless
 * it lies strictly inside its root, before anything reads, writes or removes it. ids.ts checks the names first.
 */
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { quoted, UntrustedInputError } from "./ids.ts";

/** Pure: whether `target` lies strictly below `root` (both absolute and normalised); the root itself does not. */
export function strictlyInside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel !== "" && !isAbsolute(rel) && rel !== ".." && !rel.startsWith(`..${sep}`);
}

/**
 * Pure and lexical: whether `rel` joined to `root` stays strictly inside it (no `..` escape, not absolute, no NUL or
 * backslash). For checks that must not touch the disk (a placed card, checked before its files exist).
 */
export function staysInside(root: string, rel: string): boolean {
  if (rel === "" || rel.includes("\0") || rel.includes("\\") || isAbsolute(rel)) return false;
  return strictlyInside(resolve(root), resolve(root, rel));
}

async function realPathOrNull(path: string): Promise<string | null> {
  try {
    return await Deno.realPath(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return null;
    throw e;
  }
}

/**
 * `root/relativePath`, resolved, when it lies strictly inside `root`; else UntrustedInputError. The deepest part of
 * the path that exists is resolved through symlinks too, so a link inside the root cannot lead out of it (a models
 * folder that is itself a link is fine: the root is resolved the same way). Returns the lexical path, so callers'
 * keys and messages stay as they were.
 */
export async function resolveInside(root: string, relativePath: string, field = "path"): Promise<string> {
  if (relativePath.includes("\0")) throw new UntrustedInputError(`${field} contains a NUL character`, field);
  if (isAbsolute(relativePath)) {
    throw new UntrustedInputError(`${field} ${quoted(relativePath)} is an absolute path`, field);
  }
  const base = resolve(root);
  const target = resolve(base, relativePath);
  if (!strictlyInside(base, target)) {
    throw new UntrustedInputError(
      `${field} ${quoted(relativePath)} does not name something inside ${base}`,
      field,
    );
  }
  const realBase = await realPathOrNull(base);
  if (realBase === null) return target; // no root yet: nothing below it exists to lead anywhere
  let existing = target;
  let real = await realPathOrNull(existing);
  while (real === null && existing !== base) {
    existing = dirname(existing);
    real = await realPathOrNull(existing);
  }
  const realTarget = join(real ?? realBase, relative(existing, target));
  if (!strictlyInside(realBase, realTarget)) {
    throw new UntrustedInputError(
      `${field} ${quoted(relativePath)} leads outside ${base} (through a symbolic link)`,
      field,
    );
  }
  return target;
}
