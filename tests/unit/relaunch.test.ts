/**
 * Relaunching a failed single-node engine, the pure part: on its node first (bounded, with backoff), the
 * failure kept visible until the relaunch serves, then a move without that node through healing.
 */
import { describe, expect, it } from "vitest";
import { type Event, makeEvent } from "../../src/cluster/events.ts";
import { type Instance, instanceBody, type PlacementRecord } from "../../src/cluster/instances.ts";
import { applyEvent, type ClusterState, emptyState } from "../../src/cluster/state.ts";
import { breakagesOf, decideHealing, HEALED_AFTER_MS } from "../../src/healing/decide.ts";
import { MAX_RELAUNCHES, relaunched, type RelaunchStep, relaunchSteps } from "../../src/healing/relaunch.ts";
import { localCard } from "../../src/models/local.ts";
import { placementRequest, plan } from "../../src/placement/planner.ts";
import { REFUSAL_PREFIX } from "../../src/placement/shard-check.ts";
import { buildClusterView } from "../../src/placement/view.ts";
import { tinyModel } from "../helpers/models.ts";
import { counterIds, entries, type NodeSpec, NOW } from "../helpers/synthetic-cluster.ts";

const BASE = 5000;
const card = await localCard(await tinyModel({ layers: 8 }), "test/tiny-relaunch");
const big = (id: string): NodeSpec => ({ id, ram: 4e9, ramAvailable: 2e9 });

function placeOn(node: string): Instance {
  const view = buildClusterView(emptyState(), entries([big(node)]), NOW, { nodeTimeoutMs: 30_000 });
  const r = plan(view, card, placementRequest(card.model_id), counterIds(`p${node}`));
  if (!r.ok) throw new Error(r.error);
  return r.placement.instance;
}

const runnerOf = (i: Instance) => Object.values(instanceBody(i).shardAssignments.nodeToRunner)[0];
const idOf = (i: Instance) => instanceBody(i).instanceId;
const failed = (i: Instance, msg = "llama-server exited with code 1\nlast lines of the engine's log: …") =>
  makeEvent("RunnerStatusUpdated", {
    runnerId: runnerOf(i),
    runnerStatus: { RunnerFailed: { errorMessage: msg } },
  });
const ready = (i: Instance) =>
  makeEvent("RunnerStatusUpdated", { runnerId: runnerOf(i), runnerStatus: { RunnerReady: {} } });
const fold = (events: Event[], s = emptyState()): ClusterState => events.reduce(applyEvent, s);
const created = (instance: Instance, placement?: PlacementRecord) =>
  makeEvent("InstanceCreated", { instance, ...(placement ? { placement } : {}) });
const clock = (failedAt: Record<string, number>, readyAt: Record<string, number> = {}) => ({
  failedAt: new Map(Object.entries(failedAt)),
  readyAt: new Map(Object.entries(readyAt)),
});

/** The steps' outline: kind, the instance it acts on, and what it retires. */
function outline(steps: RelaunchStep[]) {
  return steps.map((s) =>
    s.kind === "retire" ? { kind: s.kind, retire: [s.retire.instanceId] } : {
      kind: s.kind,
      of: s.kind === "relaunch" ? s.failedId : s.breakage.instanceId,
      retire: s.retire.map((r) => r.instanceId),
    }
  );
}

describe("relaunching a single-node engine that failed on a live node", () => {
  const x1 = placeOn("a");
  const x1id = idOf(x1);
  const base = fold([created(x1), failed(x1)]);

  it("relaunches on the same node with new ids, once the backoff has passed", () => {
    expect(relaunchSteps(base, NOW + BASE - 1, clock({ [x1id]: NOW }), BASE, counterIds("r").newId))
      .toEqual([]);
    const [s] = relaunchSteps(base, NOW + BASE, clock({ [x1id]: NOW }), BASE, counterIds("r").newId);
    expect(s.kind).toBe("relaunch");
    if (s.kind !== "relaunch") return;
    const body = instanceBody(s.instance);
    expect(Object.keys(body.shardAssignments.nodeToRunner)).toEqual(["a"]);
    expect(body.instanceId).not.toBe(x1id);
    expect(runnerOf(s.instance)).not.toBe(runnerOf(x1));
    expect(Object.values(body.shardAssignments.runnerToShard)).toEqual(
      Object.values(instanceBody(x1).shardAssignments.runnerToShard),
    );
    expect(s.createReason).toBe(
      `relaunches ${x1id} on node a after the engine on node a failed: llama-server exited with code 1, relaunch 1/${MAX_RELAUNCHES}`,
    );
    expect(s.placement.relaunch).toEqual({ of: x1id, count: 1 });
    expect(s.retire).toEqual([]);
  });

  // x1 failed, relaunched as x2; x2 is then loading, serving, failing...
  const x2 = relaunched(x1, counterIds("r").newId);
  const x2id = idOf(x2);
  const withX2 = fold([
    created(x2, { ...base.placements?.[x1id] ?? rec(), relaunch: { of: x1id, count: 1 } }),
  ], base);
  const x3 = relaunched(x2, counterIds("s").newId);
  const x3id = idOf(x3);
  const withX3 = fold([
    failed(x2, "llama-server was killed by SIGKILL"),
    created(x3, { ...rec(), relaunch: { of: x2id, count: 2 } }),
  ], withX2);

  const table: {
    name: string;
    state: ClusterState;
    now: number;
    clock: ReturnType<typeof clock>;
    expect: ReturnType<typeof outline>;
    reason?: RegExp;
  }[] = [
    {
      name: "nothing while the relaunch loads: the failure stays visible",
      state: withX2,
      now: NOW + 60_000,
      clock: clock({ [x1id]: NOW }),
      expect: [],
    },
    {
      name: "the failed instance retires once its relaunch serves",
      state: fold([ready(x2)], withX2),
      now: NOW + 60_000,
      clock: clock({ [x1id]: NOW }),
      expect: [{ kind: "retire", retire: [x1id] }],
      reason: new RegExp(
        `^the engine on node a failed: llama-server exited with code 1; replaced by ${x2id}, relaunched on node a, which serves$`,
      ),
    },
    {
      name: "a failed relaunch waits twice as long, then supersedes the older failure",
      state: fold([failed(x2)], withX2),
      now: NOW + 2 * BASE,
      clock: clock({ [x1id]: NOW, [x2id]: NOW }),
      expect: [{ kind: "relaunch", of: x2id, retire: [x1id] }],
      reason: new RegExp(`its relaunch ${x2id} failed too$`),
    },
    {
      name: "not before its doubled backoff",
      state: fold([failed(x2)], withX2),
      now: NOW + 2 * BASE - 1,
      clock: clock({ [x1id]: NOW, [x2id]: NOW }),
      expect: [],
    },
    {
      name: "moved off the node when the last relaunch fails too",
      state: fold([failed(x3)], withX3),
      now: NOW,
      clock: clock({ [x2id]: NOW, [x3id]: NOW }),
      expect: [{ kind: "move", of: x3id, retire: [x2id] }],
    },
    {
      name: "a fresh count for an engine that served long before it failed",
      state: fold([failed(x3)], withX3),
      now: NOW + HEALED_AFTER_MS + BASE,
      clock: clock({ [x3id]: NOW + HEALED_AFTER_MS }, { [x3id]: NOW }),
      expect: [{ kind: "relaunch", of: x3id, retire: [x2id] }],
    },
    {
      name: "a refusal is placement/recovery.ts's, not a relaunch",
      state: fold([created(x1), failed(x1, `${REFUSAL_PREFIX}too big`)]),
      now: NOW + 60_000,
      clock: clock({}),
      expect: [],
    },
    {
      name: "a card no node serves is neither relaunched nor moved",
      state: fold([created(x1), failed(x1, "the placed card of x names files this node does not serve: y")]),
      now: NOW + 60_000,
      clock: clock({}),
      expect: [],
    },
    {
      name: "a pool's failure is not a relaunch (healing tears the pool down)",
      state: (() => {
        const view = buildClusterView(
          emptyState(),
          entries([{ id: "a", ram: 4e9, ramAvailable: 263 * 1024 ** 2 }, {
            id: "b",
            ram: 4e9,
            ramAvailable: 263 * 1024 ** 2,
          }]),
          NOW,
          { nodeTimeoutMs: 30_000 },
        );
        const r = plan(view, card, placementRequest(card.model_id), counterIds("pool"));
        if (!r.ok) throw new Error(r.error);
        return fold([created(r.placement.instance), failed(r.placement.instance)]);
      })(),
      now: NOW + 60_000,
      clock: clock({}),
      expect: [],
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      const steps = relaunchSteps(c.state, c.now, c.clock, BASE, counterIds("n").newId);
      expect(outline(steps)).toEqual(c.expect);
      if (c.reason) {
        const s = steps[0];
        const reason = s.kind === "retire" ? s.retire.reason : s.retire[0].reason;
        expect(reason).toMatch(c.reason);
      }
    });
  }

  it("moves with the original constraints, never back to the failing node, and says why", () => {
    const state = fold([failed(x3)], withX3);
    const [s] = relaunchSteps(state, NOW, clock({ [x3id]: NOW }), BASE, counterIds("n").newId);
    if (s.kind !== "move") throw new Error(s.kind);
    expect(s.record.failedOn).toEqual(["a"]);
    expect(s.record.relaunch).toBeUndefined();
    const after = fold([makeEvent("InstanceDeleted", { instanceId: x2id })], state);
    const view = (specs: NodeSpec[]) =>
      buildClusterView(after, entries(specs), NOW, { nodeTimeoutMs: 30_000 });
    const moved = decideHealing(
      s.breakage,
      undefined,
      s.record,
      view([big("a"), big("b")]),
      card,
      NOW,
      BASE,
      counterIds("m"),
    );
    expect(moved.action).toBe("replace");
    if (moved.action !== "replace") return;
    expect(Object.keys(instanceBody(moved.instance).shardAssignments.nodeToRunner)).toEqual(["b"]);
    expect(moved.createReason).toMatch(
      new RegExp(
        `^heals ${x3id} after the engine on node a failed: .* \\(after 2 relaunch\\(es\\) there\\): placed on one node \\(b, MlxRing\\) without a`,
      ),
    );
    expect(moved.deleteReason).toMatch(/; replaced by /);
    expect(moved.placement.failedOn).toEqual(["a"]);
    // Nowhere else: healing records why and retries with backoff; the failing node stays out.
    const none = decideHealing(
      s.breakage,
      undefined,
      s.record,
      view([big("a")]),
      card,
      NOW,
      BASE,
      counterIds("m"),
    );
    expect(none.action).toBe("unplaced");
    if (none.action !== "unplaced") return;
    expect(none.failure.reason).toMatch(
      /^the engine on node a failed: .*; healing found no place, attempt 1\/5, next try at .*: anywhere: /,
    );
    expect(none.failure.placement.failedOn).toEqual(["a"]);
  });

  it("leaves a single node's failure to the relaunch, even one healing placed", () => {
    const before = fold([created(x1)]);
    const ev = failed(x1);
    expect(breakagesOf(ev, before, applyEvent(before, ev), new Set([x1id]))).toEqual([]);
  });

  it("reserves no memory for a failed engine beside its relaunch", () => {
    const v = (s: ClusterState) =>
      buildClusterView(s, entries([big("a")]), NOW, { nodeTimeoutMs: 30_000 }).nodes[0].reserved;
    expect(v(fold([created(x1)]))).toBeGreaterThan(0);
    expect(v(base)).toBe(0);
  });
});

function rec(): PlacementRecord {
  return { sharding: "Pipeline", instanceMeta: "MlxRing", minNodes: 1, excludedNodes: [], healAttempt: 0 };
}
