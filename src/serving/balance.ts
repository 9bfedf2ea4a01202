/**
 * Which of a model's ready instances takes a request, pure: least in-flight first, except that a prompt
 * sharing a long prefix with a recent one goes back to the instance that holds that prefix in its KV cache.
 */
import type { Target } from "./target.ts";

/** Characters per prefix block: a prompt's prefix is known at each multiple of this. */
export const PREFIX_BLOCK_CHARS = 256;
/** The shortest shared prefix that pins a request (~250 tokens: shorter prefixes are cheap to recompute). */
export const MIN_AFFINITY_CHARS = 1024;
/** Blocks hashed per prompt at most (the rest of a longer prompt shares no more than this). */
const MAX_BLOCKS = 512;
/** Prefix hashes remembered per node (each maps to the instance that last served that prefix). */
export const AFFINITY_ENTRIES = 8192;

/**
 * The fields of a request body that make up the prompt, in the order a chat template renders them, for
 * every API routed here (Chat Completions and legacy completions, Anthropic Messages, Responses, Ollama):
 * sampling parameters and the like are left out, so they do not break a conversation's shared prefix.
 */
const PROMPT_FIELDS = ["tools", "system", "instructions", "messages", "input", "prompt"] as const;

/** The text whose prefixes identify a conversation, or "" when the body has none of the prompt fields. */
export function promptText(raw: string): string {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    return "";
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) return "";
  const b = body as Record<string, unknown>;
  const parts = PROMPT_FIELDS.filter((f) => b[f] !== undefined).map((f) => [f, b[f]]);
  if (parts.length === 0) return "";
  const text = JSON.stringify(parts);
  // A conversation grows at its end: drop the closing brackets so the next turn shares every block.
  return text.replace(/[\]}"]+$/, "");
}

/**
 * Hashes of the text's prefixes at each block boundary, shortest first (two 32-bit FNV-1a lanes, 53 bits
 * used: collisions only misroute a request to a colder cache, never to a wrong answer).
 */
export function prefixHashes(text: string): string[] {
  const out: string[] = [];
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193 ^ 0x5bd1e995;
  const end = Math.min(text.length, MAX_BLOCKS * PREFIX_BLOCK_CHARS);
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15);
    if ((i + 1) % PREFIX_BLOCK_CHARS === 0) {
      out.push(`${(h1 >>> 0).toString(36)}.${((h2 >>> 0) & 0x1fffff).toString(36)}`);
    }
  }
  return out;
}

/** A bounded LRU of prefix hash → instance id (a Map keeps insertion order: re-inserting refreshes). */
export class PrefixAffinity {
  readonly #entries = new Map<string, string>();
  constructor(readonly max = AFFINITY_ENTRIES) {}

  get size(): number {
    return this.#entries.size;
  }

  /** The instance that last served the longest recorded prefix of at least MIN_AFFINITY_CHARS, if any. */
  lookup(hashes: string[]): string | undefined {
    const min = Math.ceil(MIN_AFFINITY_CHARS / PREFIX_BLOCK_CHARS) - 1;
    for (let i = hashes.length - 1; i >= min; i--) {
      const hit = this.#entries.get(hashes[i]);
      if (hit !== undefined) return hit;
    }
    return undefined;
  }

  /** Records that `instanceId` now holds every one of these prefixes. */
  record(hashes: string[], instanceId: string): void {
    for (const h of hashes) {
      this.#entries.delete(h);
      this.#entries.set(h, instanceId);
    }
    while (this.#entries.size > this.max) {
      this.#entries.delete(this.#entries.keys().next().value!);
    }
  }
}

export interface Loaded {
  target: Target;
  /** Requests running or queued on the instance now, as this node knows them. */
  load: number;
}

export interface BalanceInput {
  /** The model's ready instances. */
  candidates: Loaded[];
  /** Requests one instance runs at once (its engine's slots); past them a request waits. */
  slots: number;
  /** How far past the least loaded an affine instance may be before a request leaves it. */
  slack: number;
  /** The instance holding the request's longest recent prefix. */
  affine?: string;
  /** A counter that rotates the pick among equally loaded instances (successive requests spread). */
  turn: number;
}

export interface Choice {
  target: Target;
  why: "only" | "affinity" | "least-loaded";
}

/**
 * The instance for one request. Affinity wins while the affine instance is as idle as any (then its cache
 * is free), or, when every instance is busy, while it has a free slot (or none has) and is at most `slack`
 * requests past the least loaded: a request never goes to a busy instance while another is idle, and never
 * waits on a full one while another has room. Otherwise the least loaded, equals in rotation.
 */
export function chooseInstance(input: BalanceInput): Choice | null {
  const { candidates } = input;
  if (candidates.length === 0) return null;
  if (candidates.length === 1) return { target: candidates[0].target, why: "only" };
  const least = Math.min(...candidates.map((c) => c.load));
  const affine = candidates.find((c) => c.target.instanceId === input.affine);
  if (affine) {
    const roomy = affine.load < input.slots || least >= input.slots;
    if (affine.load === least || (least > 0 && roomy && affine.load - least <= input.slack)) {
      return { target: affine.target, why: "affinity" };
    }
  }
  // Equals take turns, remote ones included: the hop costs about a millisecond (docs/performance.md), while
  // always preferring this node's instance would leave the others cold until a burst.
  const idlest = candidates.filter((c) => c.load === least).sort((a, b) =>
    a.target.instanceId.localeCompare(b.target.instanceId)
  );
  return { target: idlest[Math.abs(input.turn) % idlest.length].target, why: "least-loaded" };
}
