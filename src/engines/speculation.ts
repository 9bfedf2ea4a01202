/**
 * Speculative decoding, pure: which llama-server speculation a card (its `served_spec_*` fields) or the node's
 * opt-in n-gram setting asks for, the draft model it needs, and the flags that say so on the command line.
 */
import { z } from "zod";
import type { ModelCard } from "../models/card.ts";
import { ModelIdSchema, RepoPathSchema } from "../security/ids.ts";

/** Cards spell the type upstream's way (`draft_mtp`); llama-server's `--spec-type` takes `draft-mtp`. */
const CARD_TYPES = {
  draft_mtp: "draft-mtp",
  draft_simple: "draft-simple",
  draft_eagle3: "draft-eagle3",
  draft_dflash: "draft-dflash",
  ngram_cache: "ngram-cache",
} as const;

/** Types that verify a separate draft model's guesses: the card must name its GGUF (upstream's dead-config rule). */
const NEEDS_DRAFT = new Set<string>(["draft-simple", "draft-eagle3", "draft-dflash"]);

/** The n-gram modes an operator may turn on for models without a drafter (`inference.speculation_ngram`). */
export const NGRAM_MODES = ["off", "ngram-simple", "ngram-mod", "ngram-map-k", "ngram-cache"] as const;
export const NgramMode = z.enum(NGRAM_MODES);
export type NgramMode = z.infer<typeof NgramMode>;

/** The most draft tokens a card may ask for per step: upstream's cards use 3-15; past 64 it is a typo. */
export const MAX_DRAFT_N = 64;

export interface DraftModel {
  repo: string;
  file: string;
}

/** What llama-server is started with; `source` says whether the card or the node's setting asked for it. */
export interface Speculation {
  type: string;
  nMax: number | null;
  draft: DraftModel | null;
  source: "card" | "setting";
}

export class SpeculationError extends Error {
  override name = "SpeculationError";
}

/**
 * The speculation for a card on this node, or null for none. A pooled instance speculates only when the card
 * allows it across nodes (`speculative_multi_node`), as upstream: drafting over RPC costs a round trip a step.
 * A card's own drafter wins over the n-gram setting. Throws SpeculationError for a card whose fields cannot work.
 */
export function speculationFor(
  card: Pick<ModelCard, "model_id" | "runtime">,
  opts: { ngram: NgramMode; pooled: boolean },
): Speculation | null {
  const rt = card.runtime ?? {};
  if (opts.pooled && rt.speculative_multi_node !== true) return null;
  if (rt.served_spec_type === undefined) {
    if (rt.served_spec_draft_repo !== undefined || rt.served_spec_draft_file !== undefined) {
      throw new SpeculationError(
        `${card.model_id}: the card names a draft model but no served_spec_type to use it with`,
      );
    }
    return opts.ngram === "off" ? null : { type: opts.ngram, nMax: null, draft: null, source: "setting" };
  }
  const type = CARD_TYPES[rt.served_spec_type as keyof typeof CARD_TYPES];
  if (!type) {
    throw new SpeculationError(
      `${card.model_id}: served_spec_type '${rt.served_spec_type}' is not one of ${
        Object.keys(CARD_TYPES).join(", ")
      }`,
    );
  }
  const nMax = rt.served_spec_n_max ?? null;
  if (nMax !== null && (nMax < 1 || nMax > MAX_DRAFT_N)) {
    throw new SpeculationError(`${card.model_id}: served_spec_n_max must be 1-${MAX_DRAFT_N}, not ${nMax}`);
  }
  const file = rt.served_spec_draft_file;
  if (file === undefined) {
    if (NEEDS_DRAFT.has(type)) {
      throw new SpeculationError(
        `${card.model_id}: served_spec_type ${rt.served_spec_type} needs served_spec_draft_repo and served_spec_draft_file`,
      );
    }
    return { type, nMax, draft: null, source: "card" };
  }
  // The draft's repo and file come from a card a peer or the hub may have written: both are checked as
  // strictly as a model's own before they name anything on disk or on the hub.
  const repo = ModelIdSchema.safeParse(rt.served_spec_draft_repo ?? card.model_id);
  const path = RepoPathSchema.safeParse(file);
  if (!repo.success || !path.success) {
    throw new SpeculationError(
      `${card.model_id}: the card's draft model repo or file is not a valid hub name`,
    );
  }
  if (!path.data.endsWith(".gguf")) {
    throw new SpeculationError(`${card.model_id}: the draft model ${path.data} is not a GGUF file`);
  }
  return { type, nMax, draft: { repo: repo.data, file: path.data }, source: "card" };
}

/** The draft model's file lives in the model's own repo (downloaded with it) rather than a companion repo. */
export function draftInOwnRepo(card: Pick<ModelCard, "model_id">, s: Speculation): boolean {
  return s.draft !== null && s.draft.repo === card.model_id;
}

/** llama-server's flags for `s`, the draft model at `draftPath` when it has one. */
export function speculationArgs(s: Speculation, draftPath: string | null): string[] {
  const args = ["--spec-type", s.type];
  if (s.nMax !== null) args.push("--spec-draft-n-max", String(s.nMax));
  if (draftPath !== null) args.push("--spec-draft-model", draftPath);
  return args;
}

/** Acceptance so far, from llama-server's Prometheus counters (`--metrics`). */
export interface SpeculationCounts {
  draftTokens: number;
  acceptedTokens: number;
  /** Verification steps: each checks one draft. */
  drafts: number;
}

/** Reads the three speculative counters from llama-server's `/metrics` text; null when it exposes none. */
export function parseSpeculationMetrics(text: string): SpeculationCounts | null {
  const value = (name: string): number | null => {
    const m = text.match(new RegExp(`^llamacpp:${name}(?:\\{[^}]*\\})?\\s+([0-9.eE+-]+)\\s*$`, "m"));
    return m ? Number(m[1]) : null;
  };
  const draftTokens = value("spec_decode_num_draft_tokens_total");
  const acceptedTokens = value("spec_decode_num_accepted_tokens_total");
  const drafts = value("spec_decode_num_drafts_total");
  if (draftTokens === null || acceptedTokens === null) return null;
  return { draftTokens, acceptedTokens, drafts: drafts ?? 0 };
}

/**
 * A request's acceptance in OpenAI's usage terms (`completion_tokens_details.accepted_prediction_tokens` /
 * `rejected_prediction_tokens`, the fields of its predicted outputs), from the engine's timings
 * (`draft_n`, `draft_n_accepted`); the usage unchanged when the engine drafted nothing.
 */
export function withAcceptance(
  usage: Record<string, unknown> | null | undefined,
  timings: unknown,
): Record<string, unknown> | null | undefined {
  const t = (timings && typeof timings === "object" ? timings : {}) as Record<string, unknown>;
  const drafted = t.draft_n, accepted = t.draft_n_accepted;
  if (!usage || typeof drafted !== "number" || typeof accepted !== "number" || drafted <= 0) return usage;
  const details =
    (usage.completion_tokens_details && typeof usage.completion_tokens_details === "object"
      ? usage.completion_tokens_details
      : {}) as Record<string, unknown>;
  return {
    ...usage,
    completion_tokens_details: {
      ...details,
      accepted_prediction_tokens: accepted,
      rejected_prediction_tokens: drafted - accepted,
    },
  };
}
