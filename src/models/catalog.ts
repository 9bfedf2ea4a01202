/**
 * The model catalogue: bundled cards (embedded from model-cards/ at build time) plus custom cards
 * (kept in SQLite), keyed by model id, and the `/models` list shape built from them.
 */
import { parse as parseToml } from "smol-toml";
import { BUNDLED_CARDS } from "../generated/cards.gen.ts";
import { type ModelCard, ModelCardSchema } from "./card.ts";
import { resolveCapabilities, type ResolvedCapabilities } from "./capabilities.ts";
import { servability } from "../placement/capabilities.ts";

export interface CardLoadError {
  path: string;
  message: string;
}

/** Parses every bundled card; a bad card is reported, never silently dropped (the audit test fails on it). */
export function loadBundledCards(): { cards: ModelCard[]; errors: CardLoadError[] } {
  const cards: ModelCard[] = [];
  const errors: CardLoadError[] = [];
  for (const { path, toml } of BUNDLED_CARDS) {
    try {
      cards.push(ModelCardSchema.parse(parseToml(toml)));
    } catch (e) {
      errors.push({ path, message: (e as Error).message });
    }
  }
  return { cards, errors };
}

export class Catalog {
  readonly #cards = new Map<string, ModelCard>();

  constructor(bundled: ModelCard[], custom: ModelCard[] = []) {
    // Upstream: first writer wins per model id, bundled before custom.
    for (const c of bundled) if (!this.#cards.has(c.model_id)) this.#cards.set(c.model_id, c);
    for (const c of custom) {
      if (!this.#cards.has(c.model_id)) this.#cards.set(c.model_id, { ...c, is_custom: true });
    }
  }

  static bundled(): Catalog {
    return new Catalog(loadBundledCards().cards);
  }

  get(modelId: string): ModelCard | undefined {
    return this.#cards.get(modelId);
  }

  all(): ModelCard[] {
    return [...this.#cards.values()];
  }

  add(card: ModelCard): void {
    this.#cards.set(card.model_id, card);
  }

  remove(modelId: string): boolean {
    return this.#cards.delete(modelId);
  }
}

const IMAGE_TASKS = new Set(["TextToImage", "ImageToImage"]);

export function isImageCard(card: ModelCard): boolean {
  return card.tasks.some((t) => IMAGE_TASKS.has(t));
}

/** One entry of `GET /models` (snake_case on the wire, as upstream's ModelListModel). */
export interface ModelListEntry {
  id: string;
  object: "model";
  created: number;
  owned_by: "skulk";
  hugging_face_id: string;
  name: string;
  description: string;
  context_length: number;
  tags: string[];
  /** Null while the card's size is open (resolved on first placement preview, then recorded): never a made-up 0. */
  storage_size_megabytes: number | null;
  /** Not upstream: the exact size in bytes, null while unknown. */
  storage_size_bytes: number | null;
  supports_tensor: boolean;
  tasks: string[];
  is_custom: boolean;
  family: string;
  quantization: string;
  base_model: string;
  capabilities: string[];
  reasoning: ModelCard["reasoning"] | null;
  modalities: ModelCard["modalities"] | null;
  tooling: ModelCard["tooling"] | null;
  runtime: ModelCard["runtime"] | null;
  resolved_capabilities: ResolvedCapabilities;
  /** Ours: how this build's runners serve the card (the capability table), for the store's "runs here" filter. */
  serving: ModelServing;
}

/**
 * The runner and card backend tags that serve a model (a node must offer one tag's compute, and advertise
 * `node_tag` when set), or why none of our runners can.
 */
export type ModelServing =
  | { ok: true; runner: string; backends: string[]; backend_preference: string[]; node_tag: string | null }
  | { ok: false; reason: string };

function modelServing(card: ModelCard): ModelServing {
  const s = servability(card);
  if (!s.ok) return { ok: false, reason: s.reason };
  return {
    ok: true,
    runner: s.runner,
    backends: s.tags,
    backend_preference: card.placement.backend_preference,
    node_tag: s.nodeTag ?? null,
  };
}

export function modelListEntry(card: ModelCard, now = Date.now()): ModelListEntry {
  const caps = resolveCapabilities(card);
  const tags: string[] = [];
  if (card.model_id.toLowerCase().includes("optiq") || card.quantization.toLowerCase().includes("optiq")) {
    tags.push("optiq");
  }
  if (caps.supports_thinking) tags.push("thinking");
  if (caps.supports_image_input) tags.push("vision");
  if (card.supports_tensor) tags.push("tensor");
  if (card.tasks.includes("TextEmbedding")) tags.push("embedding");
  if (caps.supports_speech_synthesis) tags.push("tts");
  if (caps.supports_transcription) tags.push("stt");
  const features = [
    caps.supports_thinking && "thinking",
    caps.supports_tool_calling && "tool calling",
    caps.supports_image_input && "image input",
    caps.supports_audio_input && "audio input",
    caps.supports_speech_synthesis && "speech synthesis",
    caps.supports_transcription && "transcription",
    caps.supports_realtime_audio && "realtime transcription",
  ].filter(Boolean);
  return {
    id: card.model_id,
    object: "model",
    created: Math.floor(now / 1000),
    owned_by: "skulk",
    hugging_face_id: card.model_id,
    name: card.model_id.split("/").at(-1)!,
    description: features.length
      ? `Resolved capabilities: ${features.join(", ")}.`
      : "Resolved capabilities: text.",
    context_length: card.context_length,
    tags,
    storage_size_megabytes: card.storage_size ? Math.round(card.storage_size.in_bytes / 1_000_000) : null,
    storage_size_bytes: card.storage_size?.in_bytes ?? null,
    supports_tensor: card.supports_tensor,
    tasks: card.tasks,
    is_custom: card.is_custom,
    family: card.family,
    quantization: card.quantization,
    base_model: card.base_model,
    capabilities: card.capabilities,
    reasoning: card.reasoning ?? null,
    modalities: card.modalities ?? null,
    tooling: card.tooling ?? null,
    runtime: card.runtime ?? null,
    resolved_capabilities: caps,
    serving: modelServing(card),
  };
}
