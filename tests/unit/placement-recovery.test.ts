import { describe, expect, it } from "vitest";
import { type Instance, instanceBody } from "../../src/cluster/instances.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { placementRequest, plan } from "../../src/placement/planner.ts";
import { lineageFor, MAX_RECOVERY_HOPS, recoverFromRefusal } from "../../src/placement/recovery.ts";
import { clusterView, counterIds, GB, type NodeSpec } from "../helpers/synthetic-cluster.ts";

const catalog = Catalog.bundled();
const SMALL = catalog.get("unsloth/Qwen3.5-0.8B-GGUF")!;
const BIG = catalog.get("bartowski/Llama-3.3-70B-Instruct-GGUF")!;
const gpu = (id: string, vramGb: number): NodeSpec => ({ id, ram: 64 * GB, vram: vramGb * GB });

const nodes = (i: Instance) => Object.keys(instanceBody(i).shardAssignments.nodeToRunner).sort();

function placed(specs: NodeSpec[], card = SMALL, over = {}) {
  const view = clusterView(specs);
  const request = placementRequest(card.model_id, over);
  const r = plan(view, card, request, counterIds("orig"));
  if (!r.ok) throw new Error(r.error);
  return { view, request, instance: r.placement.instance };
}

describe("refusal recovery policy", () => {
  it("retries on one node excluding the refuser", () => {
    const { view, request, instance } = placed([{ id: "a", ram: 32 * GB }, { id: "b", ram: 16 * GB }]);
    expect(nodes(instance)).toEqual(["a"]);
    const d = recoverFromRefusal(
      { instance, nodeId: "a", reason: "needs 1.2 GB, has 0.4 GB" },
      lineageFor(request),
      view,
      SMALL,
      counterIds("r"),
    );
    if (d.action !== "replace") throw new Error(d.deleteReason);
    expect(nodes(d.instance)).toEqual(["b"]);
    expect(d.lineage.excluded).toEqual(["a"]);
    expect(d.lineage.hops).toBe(1);
    expect(d.history.map((h) => h.outcome)).toEqual(["replaced", "placed"]);
    expect(d.history[1].reason).toContain("excluding a");
  });

  it("goes one node wider when no single node remains", () => {
    // 70B: only the 40 GB + 24 GB pair or the 3-node pool fit; the driver refuses.
    const specs = [gpu("a", 40), gpu("b", 24), gpu("c", 24), gpu("d", 24)];
    const { view, request, instance } = placed(specs, BIG);
    expect(nodes(instance).length).toBe(2);
    const refuser = nodes(instance).find((n) => n !== "a")!;
    const d = recoverFromRefusal(
      { instance, nodeId: refuser, reason: "out of memory" },
      lineageFor(request),
      view,
      BIG,
      counterIds("r"),
    );
    if (d.action !== "replace") throw new Error(d.deleteReason);
    expect(nodes(d.instance)).not.toContain(refuser);
    expect(nodes(d.instance).length).toBe(3);
  });

  it("tears down with the reasons when nothing is left, cancelling partial downloads", () => {
    const { view, request, instance } = placed([{ id: "a", ram: 32 * GB }]);
    view.downloads.a = { [SMALL.model_id]: 0.4 };
    const d = recoverFromRefusal(
      { instance, nodeId: "a", reason: "no memory" },
      lineageFor(request),
      view,
      SMALL,
      counterIds("r"),
    );
    expect(d.action).toBe("tear-down");
    expect(d.cancelDownloadsOn).toEqual(["a"]);
    expect(d.deleteReason).toMatch(/node a refused .*no recovery placement: one node: .*a is excluded/);
    expect(d.history[0].outcome).toBe("failed");
  });

  it("is bounded: a lineage that used its hops is torn down, and exclusions only grow", () => {
    const specs: NodeSpec[] = Array.from({ length: 8 }, (_, i) => ({ id: `n${i}`, ram: 32 * GB }));
    let { view, request, instance } = placed(specs);
    let lineage = lineageFor(request);
    const seen: string[] = [];
    let steps = 0;
    for (;;) {
      const refuser = nodes(instance)[0];
      seen.push(refuser);
      const d = recoverFromRefusal(
        { instance, nodeId: refuser, reason: "refused" },
        lineage,
        view,
        SMALL,
        counterIds(`s${steps}`),
      );
      steps++;
      if (d.action === "tear-down") {
        expect(d.deleteReason).toContain(`giving up after ${MAX_RECOVERY_HOPS}`);
        break;
      }
      expect(d.lineage.excluded.length).toBeGreaterThan(lineage.excluded.length);
      expect(seen).not.toContain(nodes(d.instance)[0]);
      lineage = d.lineage;
      instance = d.instance;
      view = clusterView(specs);
    }
    expect(steps).toBe(MAX_RECOVERY_HOPS + 1);
  });

  it("is deterministic", () => {
    const { view, request, instance } = placed([{ id: "a", ram: 32 * GB }, { id: "b", ram: 16 * GB }, {
      id: "c",
      ram: 16 * GB,
    }]);
    const run = () =>
      recoverFromRefusal(
        { instance, nodeId: "a", reason: "x" },
        lineageFor(request),
        view,
        SMALL,
        counterIds("r"),
      );
    expect(run()).toEqual(run());
  });
});
