/**
 * Placement benchmark: previews for every bundled card over a synthetic 100-node cluster (target: at most
 * 50 ms per model), then how the time per model grows with the node count (10, 100, 1000), side by side.
 */
import { Catalog } from "../src/models/catalog.ts";
import type { ModelCard } from "../src/models/card.ts";
import { servability } from "../src/placement/capabilities.ts";
import { placementPreviews } from "../src/placement/previews.ts";
import { buildClusterView } from "../src/placement/view.ts";
import { emptyState } from "../src/cluster/state.ts";
import { counterIds, entries, GB, type NodeSpec, NOW, rng } from "../tests/helpers/synthetic-cluster.ts";

function cluster(n: number, seed = 7): NodeSpec[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const id = `node-${String(i).padStart(4, "0")}`;
    const kind = r();
    const link = (["ethernet", "thunderbolt", "wifi"] as const)[Math.floor(r() * 3)];
    if (kind < 0.4) return { id, ram: (8 + Math.floor(r() * 120)) * GB, link };
    if (kind < 0.8) return { id, ram: 64 * GB, vram: (8 + Math.floor(r() * 72)) * GB, link };
    return {
      id,
      ram: (64 + Math.floor(r() * 64)) * GB,
      vram: 0.5 * GB,
      gtt: 120 * GB,
      unified: true,
      vendor: "amd",
      computes: ["vulkan", "cpu"],
      link,
    };
  });
}

/** Cards with an open size get a nominal one so they take the planner's full path, not its early refusal. */
function sized(card: ModelCard): ModelCard {
  return card.storage_size ? card : { ...card, storage_size: { in_bytes: 5 * GB } };
}

function timePreviews(cards: ModelCard[], nodes: number): { perModelMs: number[]; rows: number } {
  const view = buildClusterView(emptyState(), entries(cluster(nodes)), NOW, { nodeTimeoutMs: 30_000 });
  const perModelMs: number[] = [];
  let rows = 0;
  for (const card of cards) {
    const t0 = performance.now();
    rows += placementPreviews(view, card, { excludedNodeIds: [], nodeIds: [] }, counterIds()).length;
    perModelMs.push(performance.now() - t0);
  }
  return { perModelMs, rows };
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return {
    mean: s.reduce((a, b) => a + b, 0) / s.length,
    p50: s[Math.floor(s.length / 2)],
    max: s[s.length - 1],
  };
};
const ms = (x: number) => `${x.toFixed(2)} ms`;

const all = Catalog.bundled().all().map(sized);
const servable = all.filter((c) => servability(c).ok);
timePreviews(servable.slice(0, 5), 100); // warm the JIT before measuring

console.log(`placement previews: ${all.length} bundled cards (${servable.length} servable by llama.cpp)`);
const hundred = timePreviews(all, 100);
const h = stats(hundred.perModelMs);
console.log(
  `100 nodes, every card: mean ${ms(h.mean)}, p50 ${ms(h.p50)}, max ${
    ms(h.max)
  } per model; ${hundred.rows} rows`,
);
console.log(`target <= 50 ms per model: ${h.max <= 50 ? "met" : "MISSED"} (max ${ms(h.max)})`);

console.log("\ngrowth (servable cards only, the ones that plan in full):");
console.log("nodes   mean/model   max/model   rows/model   vs 10 nodes");
let base = 0;
for (const n of [10, 100, 1000]) {
  const r = timePreviews(servable, n);
  const s = stats(r.perModelMs);
  if (n === 10) base = s.mean;
  console.log(
    `${String(n).padStart(5)}   ${ms(s.mean).padStart(10)}   ${ms(s.max).padStart(9)}   ${
      (r.rows / servable.length).toFixed(1).padStart(10)
    }   ${(s.mean / base).toFixed(1).padStart(9)}x`,
  );
}
