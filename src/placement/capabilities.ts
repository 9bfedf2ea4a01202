/**
 * The capability table: what each of our runners can serve today, applied to a card's model truth.
 * A card is placed only on a runner that serves everything it advertises; otherwise the reason says why.
 */
import type { ModelCard } from "../models/card.ts";
import { resolveCapabilities } from "../models/capabilities.ts";
import { ENGINE_TAG, engineKindFor } from "../engines/kind.ts";

export const ENGINES = [
  "mlx",
  "mlx_audio",
  "llama_cpp",
  "llama_server",
  "vllm",
  "whisper_cpp",
  "espeak_ng",
  "sherpa_onnx",
] as const;
export const COMPUTES = ["metal", "vulkan", "rocm", "cuda", "cpu"] as const;
export type Engine = (typeof ENGINES)[number];
export type Compute = (typeof COMPUTES)[number];

/** Every backend tag a card may name: bare engines and `<engine>-<compute>`. */
export const KNOWN_BACKEND_TAGS: ReadonlySet<string> = new Set([
  ...ENGINES,
  ...ENGINES.flatMap((e) => COMPUTES.map((c) => `${e}-${c}`)),
]);

export function engineOf(tag: string): Engine | null {
  const e = tag.split("-")[0];
  return (ENGINES as readonly string[]).includes(e) ? e as Engine : null;
}

export function computeOf(tag: string): Compute | null {
  const c = tag.split("-")[1];
  return c && (COMPUTES as readonly string[]).includes(c) ? c as Compute : null;
}

/**
 * Our runners: llama-server (with ggml-rpc-server donors for pools), and for speech whisper.cpp's
 * whisper-server, espeak-ng and sherpa-onnx (src/engines/kind.ts decides which a card needs).
 */
export type Runner = "llama.cpp" | "whisper.cpp" | "espeak-ng" | "sherpa-onnx";

export interface RunnerCapabilities {
  /** Card engines whose tags this runner serves: upstream's in-process llama_cpp and served llama_server both load a GGUF. */
  engines: Engine[];
  /** Engines whose tags admit a multi-node (RPC) pool. */
  poolEngines: Engine[];
  text: boolean;
  tools: boolean;
  thinking: boolean;
  embeddings: boolean;
  /** Images are served only through a multimodal projector the card names (`mmproj_file`). */
  visionNeedsProjector: boolean;
  speech: boolean;
  imageGeneration: boolean;
}

/** A speech engine: one node, speech only. */
function speechOnly(engine: Engine): RunnerCapabilities {
  return {
    engines: [engine],
    poolEngines: [],
    text: false,
    tools: false,
    thinking: false,
    embeddings: false,
    visionNeedsProjector: false,
    speech: true,
    imageGeneration: false,
  };
}

export const RUNNERS: Record<Runner, RunnerCapabilities> = {
  "llama.cpp": {
    engines: ["llama_cpp", "llama_server"],
    poolEngines: ["llama_server"],
    text: true,
    tools: true,
    thinking: true,
    embeddings: true,
    visionNeedsProjector: true,
    // Transcription through an audio projector (mmproj_file); no speech synthesis.
    speech: true,
    imageGeneration: false,
  },
  "whisper.cpp": speechOnly("whisper_cpp"),
  "espeak-ng": speechOnly("espeak_ng"),
  "sherpa-onnx": speechOnly("sherpa_onnx"),
};

export type Servability =
  | {
    ok: true;
    runner: Runner;
    tags: string[];
    poolTags: string[];
    /** A backend tag the node itself must advertise (it has the engine), beyond a matching compute. */
    nodeTag?: string;
  }
  | { ok: false; reason: string };

/** Whether the card declares (as model truth) that it takes images. */
export function cardServesVision(card: ModelCard): boolean {
  return card.capabilities.includes("vision") || card.vision !== undefined;
}

/** Speech cards on whisper-server, espeak-ng or sherpa-onnx; null for an audio GGUF, which llama.cpp serves like any GGUF. */
function speechServability(card: ModelCard): Servability | null {
  const chosen = engineKindFor(card);
  if ("error" in chosen) return { ok: false, reason: chosen.error };
  const nodeTag = ENGINE_TAG[chosen.kind];
  if (nodeTag === null) return null;
  const runner: Runner = chosen.kind === "whisper-server"
    ? "whisper.cpp"
    : chosen.kind === "sherpa-onnx"
    ? "sherpa-onnx"
    : "espeak-ng";
  const tags = card.placement.compatible_backends.filter((t) => t.split("-")[0] === nodeTag);
  if (tags.length === 0) {
    const listed = card.placement.compatible_backends.join(", ") || "none";
    return {
      ok: false,
      reason: `${card.model_id} needs ${runner} but its card lists only ${listed} backends (add ${nodeTag})`,
    };
  }
  return { ok: true, runner, tags, poolTags: [], nodeTag };
}

/**
 * Whether any of our runners serves this card without silently dropping something it advertises,
 * and which of the card's backend tags that runner can take (single node, and as a pool).
 */
export function servability(card: ModelCard): Servability {
  const caps = resolveCapabilities(card);
  const id = card.model_id;
  if (card.tasks.some((t) => t === "TextToImage" || t === "ImageToImage")) {
    return {
      ok: false,
      reason: `${id} generates images, which needs an MLX runner; this cluster's runner is llama.cpp`,
    };
  }
  if (caps.supports_speech_synthesis || caps.supports_transcription) {
    const speech = speechServability(card);
    if (speech) return speech;
  }
  const runner: Runner = "llama.cpp";
  const table = RUNNERS[runner];
  const tags = card.placement.compatible_backends.filter((t) => {
    const e = engineOf(t);
    return e !== null && table.engines.includes(e);
  });
  if (tags.length === 0) {
    const listed = card.placement.compatible_backends.join(", ") || "none";
    return {
      ok: false,
      reason:
        `${id} lists only ${listed} backends; MLX cards need an MLX runner, which Linux nodes lack (use a GGUF card)`,
    };
  }
  if (card.gguf_file === undefined && card.gguf_path === undefined) {
    return { ok: false, reason: `${id} names no GGUF file (gguf_file), so llama.cpp cannot load it` };
  }
  if (caps.supports_embeddings && !table.embeddings) {
    return { ok: false, reason: `${id} is an embedding model and ${runner} cannot serve embeddings` };
  }
  if (cardServesVision(card) && table.visionNeedsProjector && !card.mmproj_file) {
    return {
      ok: false,
      reason: `${id} advertises vision but names no projector (mmproj_file); llama.cpp would serve it blind`,
    };
  }
  // A pool serves text only: a projector would have to sit with the driver, which is not built yet.
  const poolTags = cardServesVision(card) ? [] : tags.filter((t) => table.poolEngines.includes(engineOf(t)!));
  return { ok: true, runner, tags, poolTags };
}

/**
 * The card tag a node runs: card preference first, then the remaining tags GPU before CPU, among the
 * tags whose compute the node offers. Bare engine tags match any compute.
 */
export function resolveNodeBackend(tags: string[], preference: string[], computes: string[]): string | null {
  const fits = (t: string) => {
    const c = computeOf(t);
    return c === null || computes.includes(c);
  };
  const usable = tags.filter(fits);
  if (usable.length === 0) return null;
  for (const p of preference) if (usable.includes(p)) return p;
  return [...usable].sort((a, b) => {
    const ca = a.endsWith("-cpu") ? 1 : 0;
    const cb = b.endsWith("-cpu") ? 1 : 0;
    return ca - cb || a.localeCompare(b);
  })[0];
}

/** Upstream's preference score: `len(pref) - i` for the first preference tag the node resolves to. */
export function preferenceScore(preference: string[], tag: string | null): number {
  if (tag === null) return 0;
  const i = preference.indexOf(tag);
  return i < 0 ? 0 : preference.length - i;
}

/** The computes a node's engine builds offer, from the backend tags it advertises; cpu when it reports none. */
export function nodeComputes(backends: readonly string[] | null | undefined): string[] {
  const out = new Set<string>();
  for (const b of backends ?? []) {
    const c = b.includes("-") ? b.split("-").at(-1)! : b;
    if ((COMPUTES as readonly string[]).includes(c)) out.add(c);
  }
  return out.size ? [...out] : ["cpu"];
}

/** The computes a card can use through the given tags, for messages. */
export function computesOf(tags: string[]): string[] {
  return [...new Set(tags.map((t) => computeOf(t) ?? "any"))];
}
