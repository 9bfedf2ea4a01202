/**
 * Placement previews (`GET /instance/previews`): every combination the planner can or cannot make, each
 * row telling exactly what would launch (derived from the minted instance, upstream #452) or why not.
 */
import { z } from "zod";
import type { Instance } from "../cluster/instances.ts";
import type { ModelCard } from "../models/card.ts";
import { MAX_RPC_DONORS, plan, type PlanDeps, type Sharding } from "./planner.ts";
import type { ClusterView } from "./view.ts";

/** Upstream's PlacementPreview (snake_case) plus our additions after `error`. */
export const PlacementPreviewSchema = z.object({
  model_id: z.string(),
  sharding: z.enum(["Pipeline", "Tensor"]),
  instance_meta: z.enum(["MlxRing", "MlxJaccl", "LlamaRpc"]),
  instance: z.record(z.string(), z.unknown()).nullable(),
  memory_delta_by_node: z.record(z.string(), z.number()).nullable(),
  error: z.string().nullable(),
  context_token_limit: z.number().int().nullable(),
  node_count: z.number().int(),
  expected_decode_speed_ratio: z.number().nullable(),
  warnings: z.array(z.string()),
});
export type PlacementPreview = z.infer<typeof PlacementPreviewSchema>;

export interface PreviewQuery {
  excludedNodeIds: string[];
  nodeIds: string[];
}

const COMBINATIONS: { sharding: Sharding; meta: "MlxRing" | "MlxJaccl" | "LlamaRpc" }[] = [
  { sharding: "Pipeline", meta: "MlxRing" },
  { sharding: "Pipeline", meta: "LlamaRpc" },
  { sharding: "Tensor", meta: "MlxRing" },
  { sharding: "Pipeline", meta: "MlxJaccl" },
];

/**
 * Runs the planner for each combination × node count 1..N, keeping one success row per (derived
 * sharding, meta, node count) and one error row per requested (sharding, meta).
 */
export function placementPreviews(
  view: ClusterView,
  card: ModelCard,
  q: PreviewQuery,
  deps: PlanDeps,
): PlacementPreview[] {
  const out: PlacementPreview[] = [];
  if (view.nodes.length === 0) return out;
  const seen = new Set<string>();
  const eligible = view.nodes.filter((n) => !q.excludedNodeIds.includes(n.nodeId)).length;
  for (const { sharding, meta } of COMBINATIONS) {
    let lastSize = 0;
    for (let n = 1; n <= Math.max(1, Math.min(eligible, MAX_RPC_DONORS + 1)); n++) {
      if (n <= lastSize) continue; // the planner already answered with a larger pool for this count
      // A pool of exactly n already previewed: planning again for at least n gives the same pool.
      if (n > 1 && sharding === "Pipeline" && meta !== "MlxJaccl" && seen.has(`Pipeline/LlamaRpc/${n}`)) {
        continue;
      }
      const r = plan(view, card, {
        model_id: card.model_id,
        sharding,
        instance_meta: meta,
        min_nodes: n,
        excluded_nodes: q.excludedNodeIds,
        required_nodes: q.nodeIds,
      }, deps);
      if (r.ok) {
        const p = r.placement;
        lastSize = p.nodes.length;
        const key = `${p.sharding}/${p.instanceMeta}/${p.nodes.length}`;
        if (seen.has(key)) continue;
        seen.add(key);
        out.push({
          model_id: card.model_id,
          sharding: p.sharding,
          instance_meta: p.instanceMeta,
          instance: p.instance as Instance & Record<string, unknown>,
          memory_delta_by_node: p.memoryDeltaByNode,
          error: null,
          context_token_limit: p.contextTokenLimit,
          node_count: p.nodes.length,
          expected_decode_speed_ratio: p.decodeSpeedRatio,
          warnings: p.warnings,
        });
      } else {
        const key = `${sharding}/${meta}/error`;
        if (!seen.has(key)) {
          seen.add(key);
          out.push({
            model_id: card.model_id,
            sharding,
            instance_meta: meta,
            instance: null,
            memory_delta_by_node: null,
            error: r.error,
            context_token_limit: null,
            node_count: 0,
            expected_decode_speed_ratio: null,
            warnings: [],
          });
        }
        break; // a larger count cannot succeed where this one failed for a reason other than width
      }
    }
  }
  return out;
}
