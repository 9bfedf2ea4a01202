/**
 * Healing of lost instances, the pure parts: the reducer's placement records and lost-instance list, and
 * the master's retry decision (backoff, bounded attempts, a retry when a node joins, min_nodes kept).
 */
import { describe, expect, it } from "vitest";
import { makeEvent } from "../../src/cluster/events.ts";
import { type Instance, instanceBody, PlacementRecordSchema } from "../../src/cluster/instances.ts";
import {
  applyEvent,
  type ClusterState,
  DUE_NOW,
  emptyState,
  type Unplaced,
} from "../../src/cluster/state.ts";
import {
  breakagesOf,
  decideHealing,
  decideRetry,
  joinedWorkers,
  MAX_PLACE_ATTEMPTS,
  recordOf,
  retryDelayMs,
} from "../../src/healing/decide.ts";
import type { ModelCard } from "../../src/models/card.ts";
import { localCard } from "../../src/models/local.ts";
import { placementRequest, plan, recordFor } from "../../src/placement/planner.ts";
import { buildClusterView, type ClusterView } from "../../src/placement/view.ts";
import { tinyModel } from "../helpers/models.ts";
import { counterIds, entries, type NodeSpec, NOW } from "../helpers/synthetic-cluster.ts";

const MIB = 1024 ** 2;
const BASE = 5000;
const card: ModelCard = await localCard(await tinyModel({ layers: 8 }), "test/tiny-heal");
/** Holds the model alone. */
const big = (id: string): NodeSpec => ({ id, ram: 4e9, ramAvailable: 2e9 });
/** Lends 263 MiB: too small alone, enough in a pool of two. */
const small = (id: string): NodeSpec => ({ id, ram: 4e9, ramAvailable: 263 * MIB });
/** Too small for anything. */
const tiny = (id: string): NodeSpec => ({ id, ram: 4e9, ramAvailable: 10 * MIB });

function view(specs: NodeSpec[], state: ClusterState = emptyState()): ClusterView {
  return buildClusterView(state, entries(specs), NOW, { nodeTimeoutMs: 30_000 });
}

function placeOn(specs: NodeSpec[], over = {}): Instance {
  const r = plan(view(specs), card, placementRequest(card.model_id, over), counterIds("u"));
  if (!r.ok) throw new Error(r.error);
  return r.placement.instance;
}

const nodesOf = (i: Instance) => Object.keys(instanceBody(i).shardAssignments.nodeToRunner).sort();

describe("the reducer keeps placement records and lost instances", () => {
  const inst = placeOn([big("a")]);
  const id = instanceBody(inst).instanceId;
  const record = recordFor(placementRequest(card.model_id, { instance_meta: "LlamaRpc", min_nodes: 2 }))!;

  it("records a placement's constraints only when they differ from the defaults", () => {
    expect(recordFor(placementRequest(card.model_id))).toBeUndefined();
    expect(recordFor(placementRequest(card.model_id, { excluded_nodes: ["x"] }))).toMatchObject({
      excludedNodes: ["x"],
    });
    const s = applyEvent(emptyState(), makeEvent("InstanceCreated", { instance: inst, placement: record }));
    expect(s.placements).toEqual({ [id]: record });
    expect(recordOf(s, id)).toEqual(record);
    expect(recordOf(emptyState(), id)).toEqual(PlacementRecordSchema.parse({}));
    // Deleting the instance or timing out its node drops the record with it.
    expect(applyEvent(s, makeEvent("InstanceDeleted", { instanceId: id })).placements).toEqual({});
    expect(applyEvent(s, makeEvent("NodeTimedOut", { nodeId: "a" })).placements).toEqual({});
  });

  it("lists the instances a timed-out node held as lost, due at once, so any master places them", () => {
    const s = applyEvent(
      applyEvent(emptyState(), makeEvent("InstanceCreated", { instance: inst, placement: record })),
      makeEvent("NodeTimedOut", { nodeId: "a" }),
    );
    expect(s.unplaced).toEqual({
      [id]: { instance: inst, placement: record, attempt: 0, retryAt: DUE_NOW, reason: "node a timed out" },
    });
    const d = decideRetry(
      id,
      s.unplaced![id],
      view([big("b"), big("c")]),
      card,
      NOW,
      [],
      BASE,
      counterIds("r"),
    );
    expect(d?.action === "replace" && d.createReason).toMatch(
      new RegExp(`^heals ${id} after node a timed out: placed on a pool of 2 .*attempt 1/5$`),
    );
  });

  it("lists a lost instance until a new instance of its model is created", () => {
    const failed = makeEvent("PlacementFailed", {
      lostInstanceId: id,
      instance: inst,
      placement: PlacementRecordSchema.parse({}),
      attempt: 1,
      retryAt: new Date(NOW + BASE).toISOString(),
      reason: "node a timed out; healing found no place",
    });
    const s = applyEvent(emptyState(), failed);
    expect(Object.keys(s.unplaced!)).toEqual([id]);
    expect(s.instances).toEqual({});
    const other = placeOn([big("b")], {});
    const settled = applyEvent(s, makeEvent("InstanceCreated", { instance: other }));
    expect(settled.unplaced).toEqual({});
  });
});

describe("healing a single-node instance whose node timed out", () => {
  const inst = placeOn([big("a"), small("b")]);
  const id = instanceBody(inst).instanceId;
  const before = applyEvent(emptyState(), makeEvent("InstanceCreated", { instance: inst }));
  const timeout = makeEvent("NodeTimedOut", { nodeId: nodesOf(inst)[0] });
  const after = applyEvent(before, timeout);
  const [b] = breakagesOf(timeout, before, after, new Set());

  const table: { name: string; nodes: NodeSpec[]; expect: RegExp }[] = [
    { name: "placed on another node that holds it", nodes: [big("c")], expect: /placed on one node \(c, / },
    {
      name: "placed on a pool when no node holds it alone",
      nodes: [small("b"), small("c")],
      expect: /a pool of 2/,
    },
    {
      name: "recorded with its next try when nothing fits",
      nodes: [tiny("b")],
      expect: /^node a timed out; healing found no place, attempt 1\/5, next try at /,
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      const d = decideHealing(
        b,
        undefined,
        recordOf(before, id),
        view(c.nodes, after),
        card,
        NOW,
        BASE,
        counterIds("h"),
      );
      expect(d.deleteReason).toBeNull();
      if (d.action === "replace") {
        expect(d.createReason).toMatch(c.expect);
        expect(d.createReason).toContain(`heals ${id} after node a timed out`);
        expect(nodesOf(d.instance)).not.toContain("a");
      } else {
        expect(d.failure.reason).toMatch(c.expect);
        expect(d.failure.retryAt).toBe(new Date(NOW + BASE).toISOString());
      }
    });
  }
});

describe("retrying a lost instance with backoff", () => {
  const inst = placeOn([big("a")]);
  const lost = instanceBody(inst).instanceId;
  const at = (ms: number) => new Date(NOW + ms).toISOString();
  const entry = (over: Partial<Unplaced>): Unplaced => ({
    instance: inst,
    placement: PlacementRecordSchema.parse({}),
    attempt: 1,
    retryAt: at(0),
    reason: "node a timed out; healing found no place, attempt 1/5, next try at ...: anywhere: no",
    ...over,
  });

  it("counts a worker new to the view as joined, and nobody on the first look", () => {
    expect(joinedWorkers(null, view([big("b"), big("c")]))).toEqual({
      workers: new Set(["b", "c"]),
      joined: [],
    });
    expect(joinedWorkers(new Set(["b"]), view([big("b"), big("c")])).joined).toEqual(["c"]);
    expect(joinedWorkers(new Set(["b", "c"]), view([big("b")]))).toEqual({
      workers: new Set(["b"]),
      joined: [],
    });
  });

  it("waits twice as long after each failed attempt", () => {
    expect([1, 2, 3, 4].map((n) => retryDelayMs(n, BASE))).toEqual([5000, 10_000, 20_000, 40_000]);
  });

  const table: {
    name: string;
    u: Partial<Unplaced>;
    nodes: NodeSpec[];
    joined?: string[];
    expect: null | { placed: RegExp } | { retryAt: string | null; reason: RegExp };
  }[] = [
    { name: "nothing before its time", u: { retryAt: at(1) }, nodes: [big("b")], expect: null },
    {
      name: "placed when its time comes and a node holds it",
      u: {},
      nodes: [big("b")],
      expect: {
        placed: new RegExp(`^heals ${lost} after node a timed out: placed on one node \\(b, .*attempt 2/5$`),
      },
    },
    {
      name: "the next try twice as far off when nothing fits",
      u: { attempt: 2 },
      nodes: [tiny("b")],
      expect: {
        retryAt: at(4 * BASE),
        reason: /^node a timed out; healing found no place, attempt 3\/5, next try at .*: anywhere: /,
      },
    },
    {
      name: "gives up after the last attempt, saying why",
      u: { attempt: MAX_PLACE_ATTEMPTS - 1 },
      nodes: [tiny("b")],
      expect: {
        retryAt: null,
        reason:
          /^node a timed out; healing gave up after 5 attempt\(s\), until a node joins: anywhere: test\/tiny-heal needs .* the largest node \(b\) has 0.0 GB/,
      },
    },
    {
      name: "nothing more once it gave up",
      u: { retryAt: null, attempt: 5 },
      nodes: [big("b")],
      expect: null,
    },
    {
      name: "one more try when a node joins after it gave up",
      u: { retryAt: null, attempt: 5 },
      nodes: [big("b")],
      joined: ["b"],
      expect: { placed: /placed on one node \(b, .*node b joined$/ },
    },
    {
      name: "gave up again when the joined node cannot hold it either",
      u: { retryAt: null, attempt: 5 },
      nodes: [tiny("b")],
      joined: ["b"],
      expect: { retryAt: null, reason: /gave up after 6 attempt\(s\)/ },
    },
    {
      name: "min_nodes kept when it can be",
      u: { placement: PlacementRecordSchema.parse({ instanceMeta: "LlamaRpc", minNodes: 2 }) },
      nodes: [big("b"), big("c")],
      expect: { placed: /placed on a pool of 2 .*attempt 2\/5$/ },
    },
    {
      name: "min_nodes dropped with the reason when it cannot be",
      u: { placement: PlacementRecordSchema.parse({ instanceMeta: "LlamaRpc", minNodes: 3 }) },
      nodes: [big("b"), big("c")],
      expect: {
        placed: /placed on one node .*; min_nodes 3 not honoured \(as placed \(LlamaRpc, min_nodes 3\): /,
      },
    },
  ];
  for (const c of table) {
    it(c.name, () => {
      const d = decideRetry(
        lost,
        entry(c.u),
        view(c.nodes),
        card,
        NOW,
        c.joined ?? [],
        BASE,
        counterIds("r"),
      );
      if (c.expect === null) return expect(d).toBeNull();
      if ("placed" in c.expect) {
        expect(d?.action).toBe("replace");
        if (d?.action === "replace") {
          expect(d.createReason).toMatch(c.expect.placed);
          // The original constraints travel on, so a later breakage asks for them again.
          expect(d.placement.minNodes).toBe(entry(c.u).placement.minNodes);
        }
        return;
      }
      expect(d?.action).toBe("unplaced");
      if (d?.action === "unplaced") {
        expect(d.failure.retryAt).toBe(c.expect.retryAt);
        expect(d.failure.reason).toMatch(c.expect.reason);
        expect(d.failure.lostInstanceId).toBe(lost);
      }
    });
  }
});
