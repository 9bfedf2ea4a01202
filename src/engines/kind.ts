/**
 * Which engine serves a model card, decided from the card alone (pure): the worker launches it, placement
 * checks a node has it (its backend tag), and the speech routes know what they talk to.
 */
import type { ModelCard } from "../models/card.ts";

export type EngineKind = "llama-server" | "whisper-server" | "espeak-ng" | "sherpa-onnx";

/** Neural voice families sherpa-onnx speaks (Piper is VITS with espeak-ng phonemes). */
const SHERPA_FAMILIES = new Set(["piper", "vits", "kokoro"]);

/** The engine for a card, or why no engine here can serve it. */
export function engineKindFor(card: ModelCard): { kind: EngineKind } | { error: string } {
  const family = card.family.toLowerCase();
  if (card.audio?.kind === "tts" || card.tasks.includes("TextToSpeech")) {
    if (family === "espeak" || family === "espeak-ng") return { kind: "espeak-ng" };
    const backends = card.placement.compatible_backends;
    if (SHERPA_FAMILIES.has(family)) {
      // An MLX build (mlx-audio's safetensors) is the same voice in weights sherpa-onnx cannot load.
      if (backends.length > 0 && backends.every((b) => b.startsWith("mlx_audio"))) {
        return {
          error:
            `${card.model_id} is an MLX build of a ${card.family} voice (mlx-audio, Macs only); sherpa-onnx speaks ONNX builds of it`,
        };
      }
      return { kind: "sherpa-onnx" };
    }
    return {
      error: `${card.model_id} is a ${
        card.family || "neural"
      } speech synthesis model; Skulk speaks with espeak-ng and, through sherpa-onnx, Piper, VITS and Kokoro voices`,
    };
  }
  const file = card.gguf_path ?? card.gguf_file ?? "";
  if (card.audio?.kind === "stt" || card.tasks.includes("SpeechToText")) {
    if (family === "whisper" || /\.bin$/i.test(file)) return { kind: "whisper-server" };
    if (/\.gguf$/i.test(file)) {
      return card.mmproj_file ? { kind: "llama-server" } : {
        error:
          `${card.model_id} is a GGUF transcription model with no audio projector (mmproj_file); llama-server cannot hear without one`,
      };
    }
    return {
      error:
        `${card.model_id} is a transcription model with no whisper.cpp (.bin) or GGUF file; no engine here can serve it`,
    };
  }
  return { kind: "llama-server" };
}

/** The backend tag a node advertises when it has the engine; null for llama-server (llama.cpp's own tags). */
export const ENGINE_TAG: Record<EngineKind, string | null> = {
  "llama-server": null,
  "whisper-server": "whisper_cpp",
  "espeak-ng": "espeak_ng",
  "sherpa-onnx": "sherpa_onnx",
};
