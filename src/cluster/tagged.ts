/**
 * Upstream's tagged unions: a value of variant `Name` travels as `{"Name": {...}}`. These helpers make a
 * zod schema for one variant and read the tag of a value, so the wire form is defined once per shape.
 */
import { z } from "zod";

export function tagged<const N extends string, S extends z.ZodType>(name: N, inner: S) {
  return z.object({ [name]: inner } as { [K in N]: S }).strict();
}

export function tagOf(value: object): string {
  const keys = Object.keys(value);
  if (keys.length !== 1) throw new Error(`a tagged value has exactly one key, got ${keys.length}`);
  return keys[0];
}

/** The inner object of each variant of a tagged union. */
export type Untagged<T> = T extends Record<string, infer V> ? V : never;

/** The inner object of a tagged value, whatever its tag. */
export function untag<T extends object>(value: T): Untagged<T> {
  return (value as Record<string, unknown>)[tagOf(value)] as Untagged<T>;
}

export const MemorySchema = z.object({ inBytes: z.number().int() }).strict();
export type Memory = z.infer<typeof MemorySchema>;
export const bytes = (n: number): Memory => ({ inBytes: Math.round(n) });
