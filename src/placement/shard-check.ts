/**
 * A node's own check of the shard it was given, before it loads or downloads anything: does the shard fit
 * the memory this node can give right now? A "no" is a refusal, which the master recovers from by placing
 * the model again without this node (placement/recovery.ts). Pure over the node's fresh reading.
 */
import type { ClusterState } from "../cluster/state.ts";
import type { TelemetryEntry } from "../cluster/telemetry.ts";
import type { ModelCard } from "../models/card.ts";
import { gb, shardFootprint } from "./estimate.ts";
import { available, buildClusterView } from "./view.ts";

/** The prefix of a runner's error message that marks a refusal (not an engine failure). */
export const REFUSAL_PREFIX = "refused its shard: ";

export function isRefusal(errorMessage: string | null | undefined): boolean {
  return (errorMessage ?? "").startsWith(REFUSAL_PREFIX);
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
