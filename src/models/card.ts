/**
 * The model card: upstream's schema, read from TOML (snake_case) and sent on the wire as camelCase.
 * One zod schema defines both; `cardToWire` is the only place the spelling changes.
 */
import { z } from "zod";
import { ModelIdSchema, RepoPathSchema } from "../security/ids.ts";

const Memory = z.object({ in_bytes: z.number().int().nonnegative() }).strict();
const Effort = z.enum(["none", "minimal", "low", "medium", "high", "xhigh"]);

export const TASKS = [
  "TextGeneration",
  "TextToImage",
  "ImageToImage",
  "TextEmbedding",
  "TextToSpeech",
  "SpeechToText",
] as const;

export const CardComponentSchema = z.object({
  component_name: z.string(),
  component_path: z.string(),
  storage_size: Memory,
  n_layers: z.number().int().positive().optional(),
  can_shard: z.boolean(),
  safetensors_index_filename: z.string().optional(),
}).strict();

export const AudioVoiceSchema = z.object({
  id: z.string(),
  name: z.string(),
  preferred_languages: z.array(z.string()).optional(),
  reference_profile: z.string().optional(),
}).strict();

export const ModelCardSchema = z.object({
  model_id: ModelIdSchema,
  /** Absent when not yet known: resolved on first contact with the hub and recorded (resolved_model_facts). */
  storage_size: Memory.optional(),
  n_layers: z.number().int().positive(),
  hidden_size: z.number().int().positive(),
  supports_tensor: z.boolean(),
  num_key_value_heads: z.number().int().positive().optional(),
  /** Not in upstream 1.3.0 cards: attention heads, when known (GGUF header), for the KV estimate. */
  num_attention_heads: z.number().int().positive().optional(),
  head_dim: z.number().int().positive().optional(),
  tasks: z.array(z.enum(TASKS)).min(1),
  components: z.array(CardComponentSchema).optional(),
  family: z.string().default(""),
  quantization: z.string().default(""),
  base_model: z.string().default(""),
  gguf_file: RepoPathSchema.optional(),
  /** Local path of a registered GGUF (custom cards from `skulk models add --path`). */
  gguf_path: z.string().optional(),
  /**
   * The projector: a file beside the model in its repo, or, for a registered local model, an absolute path like
   * `gguf_path` (the worker accepts one only as this node's catalogue registered it: placement/shard-check.ts).
   */
  mmproj_file: z.union([
    RepoPathSchema,
    z.string().regex(/^\/[^\0]*$/, "must be a path inside the model's repo or an absolute local path"),
  ]).optional(),
  capabilities: z.array(z.string()).default([]),
  context_length: z.number().int().nonnegative().default(0),
  uses_cfg: z.boolean().default(false),
  trust_remote_code: z.boolean().default(true),
  is_custom: z.boolean().default(false),
  source_revision: z.string().optional(),
  vision: z.object({
    image_token_id: z.number().int().optional(),
    model_type: z.string().optional(),
    weights_repo: z.string().optional(),
    image_token: z.string().optional(),
    processor_repo: z.string().optional(),
    boi_token_id: z.number().int().optional(),
    eoi_token_id: z.number().int().optional(),
  }).strict().optional(),
  reasoning: z.object({
    supports_toggle: z.boolean().optional(),
    supports_budget: z.boolean().optional(),
    format: z.enum(["none", "token_delimited", "channel_delimited"]).optional(),
    default_effort: Effort.optional(),
    disabled_effort: Effort.optional(),
  }).strict().optional(),
  modalities: z.object({
    supports_audio_input: z.boolean().optional(),
    supports_native_multimodal: z.boolean().optional(),
  }).strict().optional(),
  tooling: z.object({
    supports_tool_calling: z.boolean().optional(),
    tool_call_format: z.enum(["generic", "gemma4", "gpt_oss", "dsml"]).optional(),
    builtin_tools: z.array(z.enum(["web_search", "open_url", "extract_page"])).optional(),
  }).strict().optional(),
  runtime: z.object({
    prompt_renderer: z.enum(["tokenizer", "gemma4", "dsml"]).optional(),
    output_parser: z.enum(["generic", "gemma4", "gpt_oss", "deepseek_v32"]).optional(),
    metal_fast_synch: z.boolean().optional(),
    mtp_heads: z.boolean().optional(),
    mtp_max_depth: z.number().int().optional(),
    mtp_sidecar_repo: z.string().optional(),
    mtp_norm_convention: z.enum(["zero_centered", "actual_scale"]).optional(),
    mtp_concat_order: z.enum(["embed_first", "hidden_first"]).optional(),
    speculative_multi_node: z.boolean().optional(),
    assistant_model_repo: z.string().optional(),
    served_spec_type: z.string().optional(),
    served_spec_n_max: z.number().int().optional(),
    served_spec_draft_repo: z.string().optional(),
    served_spec_draft_file: z.string().optional(),
  }).strict().optional(),
  audio: z.object({
    kind: z.enum(["tts", "stt"]),
    default_response_format: z.string().optional(),
    response_formats: z.array(z.string()).optional(),
    supports_streaming: z.boolean().optional(),
    supports_realtime: z.boolean().optional(),
    supports_translation: z.boolean().optional(),
    supports_voice_listing: z.boolean().optional(),
    supports_reference_audio: z.boolean().optional(),
    sample_rates: z.array(z.number().int().positive()).optional(),
    voices: z.array(z.string()).optional(),
    default_voice: z.string().optional(),
    voice_catalog: z.array(AudioVoiceSchema).optional(),
  }).strict().optional(),
  placement: z.object({
    compatible_backends: z.array(z.string()).default(["mlx"]),
    backend_preference: z.array(z.string()).default([]),
    min_vram_gib: z.number().positive().optional(),
    max_context_tokens: z.number().int().positive().optional(),
  }).strict().default({ compatible_backends: ["mlx"], backend_preference: [] }),
}).strict();

/** A card as read (snake_case, defaults applied). */
export type ModelCard = z.infer<typeof ModelCardSchema>;

export const camel = (k: string) => k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function toCamel(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toCamel);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [camel(k), toCamel(x)]));
  }
  return v;
}

/** Upstream wire form: camelCase keys, `{"inBytes": n}` memory, compatible backends sorted. */
export type ModelCardWire = Record<string, unknown> & { modelId: string };

export function cardToWire(card: ModelCard): ModelCardWire {
  const wire = toCamel(card) as ModelCardWire;
  const placement = wire.placement as { compatibleBackends: string[] };
  placement.compatibleBackends = [...placement.compatibleBackends].sort();
  return wire;
}

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());

function toSnake(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toSnake);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [snake(k), toSnake(x)]));
  }
  return v;
}

/** Accepts either spelling (upstream validates by name or alias). */
export function parseCard(input: unknown): ModelCard {
  return ModelCardSchema.parse(toSnake(input));
}

/** The directory name a model's files are stored under: `/` becomes `--`. */
export function normalizeModelId(modelId: string): string {
  return modelId.replaceAll("/", "--");
}
