/**
 * The card audit (upstream 1.4 #k): static invariants every bundled card must hold, as a pure function
 * returning plain problems; the unit tests and `skulk cards audit` both run it.
 */
import { parse as parseToml } from "smol-toml";
import { engineOf, KNOWN_BACKEND_TAGS, servability } from "../placement/capabilities.ts";
import { type ModelCard, ModelCardSchema, normalizeModelId } from "./card.ts";
import { resolveCapabilities } from "./capabilities.ts";

const FOLDER_TASKS: Record<string, string[]> = {
  inference: ["TextGeneration"],
  embedding: ["TextEmbedding"],
  image: ["TextToImage", "ImageToImage"],
  audio: ["TextToSpeech", "SpeechToText"],
};
const DRAFT_TYPES = new Set(["draft_simple", "draft_eagle3", "draft_dflash"]);

export function isGgufNamed(card: ModelCard): boolean {
  return card.gguf_file !== undefined || card.model_id.toLowerCase().includes("gguf");
}

/**
 * Problems with one card as read from `path` (relative to model-cards/), empty when it is sound, and notes:
 * gaps in MLX cards ported verbatim from upstream 1.3.0 that no runner here serves (facts are not invented).
 */
export function auditCard(path: string, card: ModelCard): { problems: string[]; notes: string[] } {
  const p: string[] = [];
  const notes: string[] = [];
  const [folder, file] = path.includes("/") ? path.split("/") : ["", path];
  const stem = file.replace(/\.toml$/, "");
  if (stem !== normalizeModelId(card.model_id)) {
    p.push(`file name ${file} does not match model_id ${card.model_id}`);
  }
  const allowed = FOLDER_TASKS[folder];
  if (allowed && !card.tasks.some((t) => allowed.includes(t))) {
    p.push(`a card in ${folder}/ must have one of the tasks ${allowed.join(", ")}`);
  }
  if (card.storage_size !== undefined && card.storage_size.in_bytes <= 0) {
    p.push("storage_size must be positive when stated (leave it out when unknown)");
  }
  if (
    card.num_key_value_heads && card.num_attention_heads &&
    card.num_key_value_heads > card.num_attention_heads
  ) {
    p.push(
      `num_key_value_heads ${card.num_key_value_heads} exceeds num_attention_heads ${card.num_attention_heads}`,
    );
  }
  if (
    card.head_dim && card.num_attention_heads &&
    card.head_dim * card.num_attention_heads < card.hidden_size / 4
  ) {
    p.push(
      `head_dim ${card.head_dim} × ${card.num_attention_heads} heads is far below hidden_size ${card.hidden_size}`,
    );
  }
  if (!card.family) p.push("family is empty");
  const compatible = card.placement.compatible_backends;
  for (const t of compatible) if (!KNOWN_BACKEND_TAGS.has(t)) p.push(`unknown backend tag ${t}`);
  for (const t of card.placement.backend_preference) {
    if (!compatible.includes(t)) p.push(`backend_preference ${t} is not in compatible_backends`);
  }
  const engines = new Set(compatible.map(engineOf));
  const llama = engines.has("llama_cpp") || engines.has("llama_server");
  if (folder === "inference") {
    // Our runner serves GGUF cards: their memory estimate needs these facts. Ported MLX cards may lack them.
    const gaps = isGgufNamed(card) ? p : notes;
    if (card.context_length <= 0) gaps.push("context_length must be positive");
    if (!card.num_key_value_heads) gaps.push("num_key_value_heads is missing");
    if (!card.quantization) gaps.push("quantization is empty");
    if (isGgufNamed(card)) {
      if (!card.gguf_file) p.push("a GGUF card must name its file (gguf_file)");
      if (engines.has("mlx")) p.push("a GGUF card cannot list an mlx backend");
      if (!llama) p.push("a GGUF card must list a llama_cpp or llama_server backend");
    } else if (llama) p.push("a non-GGUF card cannot list llama backends");
    const caps = resolveCapabilities(card);
    const declared = card.capabilities.includes("thinking") || card.reasoning !== undefined;
    if (caps.supports_thinking !== declared) {
      p.push(
        `resolved supports_thinking=${caps.supports_thinking} but the card declares thinking=${declared}`,
      );
    }
  }
  const whisperFile = engines.has("whisper_cpp") && card.gguf_file?.endsWith(".bin");
  if (card.gguf_file !== undefined && !card.gguf_file.endsWith(".gguf") && !whisperFile) {
    p.push(`gguf_file ${card.gguf_file} is not a .gguf`);
  }
  const hears = card.audio?.kind === "stt" || card.modalities?.supports_audio_input === true;
  if (card.mmproj_file !== undefined && !card.capabilities.includes("vision") && !hears) {
    p.push("mmproj_file without the vision capability (or audio input)");
  }
  if (card.vision !== undefined && !card.capabilities.includes("vision")) {
    p.push("[vision] without the vision capability");
  }
  if (card.audio !== undefined) {
    if (!card.capabilities.some((c) => c === "tts" || c === "stt")) {
      p.push("[audio] without a tts/stt capability");
    }
    const speechEngines = [
      "mlx_audio",
      "whisper_cpp",
      "espeak_ng",
      "sherpa_onnx",
      "llama_cpp",
      "llama_server",
    ] as const;
    if (!speechEngines.some((e) => engines.has(e))) {
      p.push(`[audio] card without a speech engine (${speechEngines.join(", ")})`);
    }
  }
  const rt = card.runtime;
  if (rt?.served_spec_type !== undefined && !engines.has("llama_server")) {
    p.push("served_spec_type needs a llama_server backend");
  }
  if (
    rt?.served_spec_type && DRAFT_TYPES.has(rt.served_spec_type) &&
    (!rt.served_spec_draft_repo || !rt.served_spec_draft_file)
  ) {
    p.push(`${rt.served_spec_type} needs served_spec_draft_repo and served_spec_draft_file`);
  }
  if (rt?.served_spec_draft_repo !== undefined && rt.served_spec_type === undefined) {
    p.push("served_spec_draft_repo without served_spec_type");
  }
  const mlxOnly = [
    "mtp_heads",
    "mtp_sidecar_repo",
    "metal_fast_synch",
    "speculative_multi_node",
    "assistant_model_repo",
  ] as const;
  for (const k of mlxOnly) {
    if (rt?.[k] !== undefined && !engines.has("mlx")) p.push(`runtime.${k} needs an mlx backend`);
  }
  const s = servability(card);
  if (!s.ok && s.reason.trim().length < 10) p.push("the capability table refused without a reason");
  return { problems: p, notes };
}

export interface AuditReport {
  cards: { path: string; modelId: string | null; problems: string[]; notes: string[] }[];
  duplicates: string[];
}

/** Audits TOML sources (path relative to model-cards/, text). */
export function auditSources(sources: readonly { path: string; toml: string }[]): AuditReport {
  const seen = new Map<string, string>();
  const duplicates: string[] = [];
  const cards = sources.map(({ path, toml }) => {
    let card: ModelCard;
    try {
      card = ModelCardSchema.parse(parseToml(toml));
    } catch (e) {
      return {
        path,
        modelId: null,
        problems: [`does not parse: ${(e as Error).message.split("\n").slice(0, 6).join(" ")}`],
        notes: [],
      };
    }
    const prior = seen.get(card.model_id);
    if (prior) duplicates.push(`${card.model_id} in ${prior} and ${path}`);
    seen.set(card.model_id, path);
    return { path, modelId: card.model_id, ...auditCard(path, card) };
  });
  return { cards, duplicates };
}

/** The files a card needs from its hub repo (for the live check). */
export function referencedFiles(card: ModelCard): { repo: string; file: string }[] {
  const out: { repo: string; file: string }[] = [];
  if (card.gguf_file) out.push({ repo: card.model_id, file: card.gguf_file });
  if (card.mmproj_file) out.push({ repo: card.model_id, file: card.mmproj_file });
  const rt = card.runtime;
  if (rt?.served_spec_draft_repo && rt.served_spec_draft_file) {
    out.push({ repo: rt.served_spec_draft_repo, file: rt.served_spec_draft_file });
  }
  return out;
}
