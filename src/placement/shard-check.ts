/**
 * A node's own check of the shard it was given, before it loads or downloads anything: does the shard fit
 * the memory this node can give right now, and are its model files where this node keeps models? A "no" is
 * a refusal, which the master recovers from by placing the model again without this node
 * (placement/recovery.ts). Pure over the node's fresh reading and its catalogue.
 */
import { isAbsolute, resolve } from "node:path";
import { staysInside } from "../security/contain.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { TelemetryEntry } from "../cluster/telemetry.ts";
import { type ModelCard, normalizeModelId } from "../models/card.ts";
import { gb, shardFootprint } from "./estimate.ts";
import { available, buildClusterView } from "./view.ts";

/** The prefix of a runner's error message that marks a refusal (not an engine failure). */
export const REFUSAL_PREFIX = "refused its shard: ";

export function isRefusal(errorMessage: string | null | undefined): boolean {
  return (errorMessage ?? "").startsWith(REFUSAL_PREFIX);
}

/** The prefix of a card-path refusal (modelPathRefusal): no node serves such a card, so healing leaves it. */
export const CARD_REFUSAL_PREFIX = "the placed card of ";

export function isCardRefusal(errorMessage: string | null | undefined): boolean {
  return (errorMessage ?? "").startsWith(CARD_REFUSAL_PREFIX);
}

/**
 * Null when the shard fits; otherwise why not, in one sentence with numbers. `state` must not hold the
 * instance being checked (its own reservation would count against it).
 */
export function shardRefusal(
  state: ClusterState,
  self: TelemetryEntry,
  card: ModelCard,
  fraction: number,
  contextTokens: number,
  now: number,
  nodeTimeoutMs: number,
): string | null {
  const storage = card.storage_size?.in_bytes;
  if (storage === undefined) return null; // size still open: nothing to check against
  const view = buildClusterView(state, [[self.reading.nodeId, self]], now, { nodeTimeoutMs });
  const node = view.nodes.find((n) => n.nodeId === self.reading.nodeId);
  if (!node?.hasMemory) return null; // memory not measured: the planner's word stands
  const need = shardFootprint(card, storage, fraction, contextTokens);
  const free = available(node);
  if (need <= free) return null;
  return `${REFUSAL_PREFIX}${card.model_id} needs ${gb(need)} here (${
    Math.round(fraction * 100)
  }% of the weights, KV for ${contextTokens} tokens); this node can give ${gb(free)} now`;
}

/**
 * Null when every file the card names lies where this node keeps models: a `gguf_path` only as this
 * node's catalogue registered it for the model (a registered local model), `gguf_file` inside the
 * model's folder under the models dir, `mmproj_file` beside the model file or as registered. Otherwise why not: a placed card is
 * checked against this node's own catalogue, so a forged event cannot make an engine open any file.
 */
export function modelPathRefusal(
  card: ModelCard,
  registered: ModelCard | undefined,
  modelsDir: string,
): string | null {
  // Not a REFUSAL_PREFIX refusal: such a card is no placement to recover, whichever node gets it.
  const refuse = (what: string) =>
    `${CARD_REFUSAL_PREFIX}${card.model_id} names files this node does not serve: ${what}`;
  if (card.gguf_path !== undefined && card.gguf_path !== registered?.gguf_path) {
    return refuse(
      `its gguf_path '${card.gguf_path.slice(0, 200)}' is not a local model registered on this node ${
        registered?.gguf_path ? `(registered: ${registered.gguf_path})` : "(none is registered for it)"
      }`,
    );
  }
  const folder = normalizeModelId(card.model_id);
  if (!staysInside(modelsDir, folder) || folder.includes("/")) {
    return refuse(`its model id does not name a folder under the models dir ${modelsDir}`);
  }
  if (card.gguf_file !== undefined && !staysInside(resolve(modelsDir, folder), card.gguf_file)) {
    return refuse(
      `its gguf_file '${card.gguf_file.slice(0, 200)}' leaves the model's folder under ${modelsDir}`,
    );
  }
  // A projector sits next to the model file (relative), or where the registered card put it (absolute).
  const mmproj = card.mmproj_file;
  if (
    mmproj !== undefined &&
    (isAbsolute(mmproj)
      ? mmproj !== registered?.mmproj_file
      : !staysInside(resolve(modelsDir, folder), mmproj))
  ) {
    return refuse(
      `its mmproj_file '${mmproj.slice(0, 200)}' is neither beside the model file nor registered`,
    );
  }
  // A speculative drafter in the model's own folder: a local model's is the one registered with it.
  const draft = card.runtime?.served_spec_draft_file;
  const ownRepo = (card.runtime?.served_spec_draft_repo ?? card.model_id) === card.model_id;
  if (
    draft !== undefined && ownRepo &&
    (card.gguf_path !== undefined
      ? draft !== registered?.runtime?.served_spec_draft_file
      : !staysInside(resolve(modelsDir, folder), draft))
  ) {
    return refuse(`its draft model '${draft.slice(0, 200)}' is neither in the model's folder nor registered`);
  }
  return null;
}
