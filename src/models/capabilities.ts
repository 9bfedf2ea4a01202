/**
 * Capability resolution (upstream `resolve_model_capability_profile`): what a model can do, from its
 * card's explicit sections, then family defaults, then generic. Cards declare model truth only; what
 * a runner can serve is the placement capability table's concern.
 */
import type { ModelCard } from "./card.ts";

export interface ResolvedCapabilities {
  family: string;
  supports_thinking: boolean;
  supports_thinking_toggle: boolean;
  supports_thinking_budget: boolean;
  default_reasoning_effort: string;
  disabled_reasoning_effort: string;
  thinking_format: "none" | "token_delimited" | "channel_delimited";
  supports_image_input: boolean;
  supports_audio_input: boolean;
  supports_tool_calling: boolean;
  builtin_tools: string[];
  tool_call_format: string;
  prompt_renderer: string;
  output_parser: string;
  supports_native_multimodal: boolean;
  supports_embeddings: boolean;
  supports_speech_synthesis: boolean;
  supports_transcription: boolean;
  supports_realtime_audio: boolean;
}

export function resolveCapabilities(card: ModelCard): ResolvedCapabilities {
  const id = card.model_id.toLowerCase();
  const family = card.family || (id.split("/").at(-1)!.split("-")[0] ?? "generic") || "generic";
  const caps = new Set(card.capabilities);
  const r: ResolvedCapabilities = {
    family,
    supports_thinking: caps.has("thinking") || card.reasoning !== undefined,
    supports_thinking_toggle: caps.has("thinking_toggle"),
    supports_thinking_budget: false,
    default_reasoning_effort: "medium",
    disabled_reasoning_effort: "none",
    thinking_format: "none",
    supports_image_input: caps.has("vision") || card.vision !== undefined ||
      card.modalities?.supports_native_multimodal === true,
    supports_audio_input: card.modalities?.supports_audio_input === true,
    supports_tool_calling: card.tooling?.supports_tool_calling === true ||
      (card.tooling?.tool_call_format !== undefined && card.tooling.tool_call_format !== "generic"),
    builtin_tools: [],
    tool_call_format: "generic",
    prompt_renderer: "tokenizer",
    output_parser: "generic",
    supports_native_multimodal: card.modalities?.supports_native_multimodal === true,
    supports_embeddings: card.tasks.includes("TextEmbedding"),
    supports_speech_synthesis: card.audio?.kind === "tts" || card.tasks.includes("TextToSpeech"),
    supports_transcription: card.audio?.kind === "stt" || card.tasks.includes("SpeechToText"),
    supports_realtime_audio: card.audio?.supports_realtime === true,
  };
  // Family defaults (upstream 1.4 behaviour: instruct-only Qwen3 variants get no forced thinking).
  if (id.includes("gemma-4") || id.includes("gemma4") || family === "gemma4") {
    Object.assign(r, {
      supports_thinking: true,
      supports_thinking_toggle: true,
      supports_tool_calling: true,
      thinking_format: "channel_delimited",
      prompt_renderer: "gemma4",
      output_parser: "gemma4",
      tool_call_format: "gemma4",
      supports_native_multimodal: true,
      supports_image_input: true,
    });
  } else if (id.includes("deepseek-v3.2")) {
    Object.assign(r, {
      supports_thinking: true,
      supports_thinking_toggle: true,
      supports_tool_calling: true,
      prompt_renderer: "dsml",
      output_parser: "deepseek_v32",
      tool_call_format: "dsml",
    });
  } else if (id.includes("gpt-oss")) {
    Object.assign(r, { supports_tool_calling: true, output_parser: "gpt_oss", tool_call_format: "gpt_oss" });
  } else if (
    /qwen3(\.\d)?[-_]/.test(id) && !id.includes("coder") && !id.includes("instruct-2507") &&
    !/next-.*instruct/.test(id)
  ) {
    Object.assign(r, {
      supports_thinking: true,
      supports_thinking_toggle: true,
      thinking_format: "token_delimited",
    });
  }
  if (r.supports_thinking && r.thinking_format === "none") r.thinking_format = "token_delimited";
  // Explicit card sections override field by field.
  const rs = card.reasoning;
  if (rs) {
    if (rs.supports_toggle !== undefined) r.supports_thinking_toggle = rs.supports_toggle;
    if (rs.supports_budget !== undefined) r.supports_thinking_budget = rs.supports_budget;
    if (rs.format !== undefined) r.thinking_format = rs.format;
    if (rs.default_effort !== undefined) r.default_reasoning_effort = rs.default_effort;
    if (rs.disabled_effort !== undefined) r.disabled_reasoning_effort = rs.disabled_effort;
  }
  if (card.modalities?.supports_audio_input !== undefined) {
    r.supports_audio_input = card.modalities.supports_audio_input;
  }
  const t = card.tooling;
  if (t) {
    if (t.supports_tool_calling !== undefined) r.supports_tool_calling = t.supports_tool_calling;
    if (t.tool_call_format !== undefined) r.tool_call_format = t.tool_call_format;
    if (t.builtin_tools !== undefined) r.builtin_tools = t.builtin_tools;
  }
  if (card.runtime?.prompt_renderer !== undefined) r.prompt_renderer = card.runtime.prompt_renderer;
  if (card.runtime?.output_parser !== undefined) r.output_parser = card.runtime.output_parser;
  return r;
}
