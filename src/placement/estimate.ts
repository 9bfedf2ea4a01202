/**
 * The memory model (spec §4.2): what a shard of a model costs on a node (weights × engine factor, the
 * KV cache for a context, a fixed overhead) and how many context tokens fit next to the weights.
 */
import type { ModelCard } from "../models/card.ts";

export const GIB = 1024 ** 3;
export const MIB = 1024 ** 2;
/** MLX weights expand by ~30% once loaded (upstream's measured factor). */
export const MEMORY_OVERHEAD_FACTOR = 1.3;
/** llama.cpp maps the GGUF nearly as-is; compute buffers add ~10%. */
export const LLAMA_CPP_MEMORY_OVERHEAD_FACTOR = 1.1;
/** Per node: runtime, CUDA/Vulkan context, scratch. */
export const MEMORY_OVERHEAD_FLOOR = 256 * MIB;
/** Apple Metal caps the GPU working set at ~75% of RAM; the same cap keeps CPU nodes usable. */
export const GPU_WORKING_SET_FRACTION = 0.75;
export const GPU_VRAM_WORKING_SET_FRACTION = 0.9;
/** A UMA APU lends system RAM to the GPU, but the OS keeps this much. */
export const UMA_GPU_OS_HEADROOM = 16 * GIB;
/** Admission reserves KV for this many tokens (or the card's context, if smaller). */
export const KV_CONTEXT_BUDGET_TOKENS = 8192;
export const KV_HEAD_DIM_FALLBACK = 128;
/** f16 KV cache (llama.cpp's default cache type). */
export const KV_DTYPE_BYTES = 2;

export function isGgufCard(card: ModelCard): boolean {
  return card.gguf_file !== undefined || card.gguf_path !== undefined;
}

export function engineFactor(card: ModelCard): number {
  return isGgufCard(card) ? LLAMA_CPP_MEMORY_OVERHEAD_FACTOR : MEMORY_OVERHEAD_FACTOR;
}

/** The head dimension: the GGUF header's figure when recorded, else hidden/heads, else 128. */
export function headDim(card: ModelCard): number {
  if (card.head_dim) return card.head_dim;
  if (card.num_attention_heads) return Math.floor(card.hidden_size / card.num_attention_heads);
  return KV_HEAD_DIM_FALLBACK;
}

/** KV bytes one token costs across all layers (K and V); 0 when the card does not say its KV heads. */
export function kvBytesPerToken(card: ModelCard): number {
  if (!card.num_key_value_heads) return 0;
  return 2 * card.n_layers * card.num_key_value_heads * headDim(card) * KV_DTYPE_BYTES;
}

/** The tokens admission reserves KV for: the budget, or the card's context when that is smaller. */
export function admissionTokens(card: ModelCard): number {
  return card.context_length > 0
    ? Math.min(card.context_length, KV_CONTEXT_BUDGET_TOKENS)
    : KV_CONTEXT_BUDGET_TOKENS;
}

/** Bytes a node holding `fraction` of the model needs with `tokens` of context. */
export function shardFootprint(
  card: ModelCard,
  storageBytes: number,
  fraction: number,
  tokens: number,
): number {
  return storageBytes * fraction * engineFactor(card) + kvBytesPerToken(card) * tokens * fraction +
    MEMORY_OVERHEAD_FLOOR;
}

/** What the whole model needs beyond per-node overhead: weights × factor plus KV for `tokens`. */
export function proportionalNeed(card: ModelCard, storageBytes: number, tokens: number): number {
  return storageBytes * engineFactor(card) + kvBytesPerToken(card) * tokens;
}

/** The card's own ceiling on context: its context length and its placement cap, whichever is smaller. */
export function cardContextCeiling(card: ModelCard): number | null {
  const limits = [card.context_length, card.placement.max_context_tokens ?? 0].filter((n) => n > 0);
  return limits.length ? Math.min(...limits) : null;
}

/**
 * The context token limit of a placement: per node, the tokens whose KV fits next to its weights share
 * (KV splits with the same fraction); the smallest over nodes, capped by the card. Null when neither the
 * KV cost nor the card's context is known.
 */
export function contextTokenLimit(
  card: ModelCard,
  storageBytes: number,
  shares: { fraction: number; available: number }[],
): number | null {
  const ceiling = cardContextCeiling(card);
  const perToken = kvBytesPerToken(card);
  if (perToken === 0) return ceiling;
  let fit = Infinity;
  for (const s of shares) {
    if (s.fraction <= 0) continue;
    const budget = s.available - storageBytes * s.fraction * engineFactor(card) - MEMORY_OVERHEAD_FLOOR;
    fit = Math.min(fit, Math.floor(Math.max(0, budget) / (perToken * s.fraction)));
  }
  const limit = ceiling === null ? fit : Math.min(ceiling, fit);
  return Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : ceiling;
}

export function gb(bytes: number): string {
  return `${(bytes / 1e9).toFixed(1)} GB`;
}
