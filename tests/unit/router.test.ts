import { describe, expect, it } from "vitest";
import type { Instance } from "../../src/cluster/instances.ts";
import { emptyState } from "../../src/cluster/state.ts";
import type { TelemetryEntry } from "../../src/cluster/telemetry.ts";
import { instanceLoads, type RouterContext, routeRequest } from "../../src/serving/router.ts";
import { runningOf, type RunningRequest } from "../../src/serving/running.ts";
import { entries } from "../helpers/synthetic-cluster.ts";

const MODEL = "m/tiny";

function single(id: string, node: string): Instance {
  return {
    MlxRingInstance: {
      instanceId: id,
      shardAssignments: {
        modelId: MODEL,
        runnerToShard: {
          [`r-${id}`]: {
            PipelineShardMetadata: {
              modelCard: {},
              deviceRank: 0,
              worldSize: 1,
              startLayer: 0,
              endLayer: 4,
              nLayers: 4,
            },
          },
        },
        nodeToRunner: { [node]: `r-${id}` },
      },
      contextTokenLimit: null,
      hostsByNode: {},
      ephemeralPort: 0,
    },
  } as unknown as Instance;
}

/** A node "self" and a peer "peer", with instance a on self and b on peer, both ready. */
function context(opts: { affinity?: boolean; peerRunning?: RunningRequest[] } = {}): RouterContext {
  const state = emptyState();
  for (const [id, node] of [["a", "self"], ["b", "peer"]]) {
    state.instances[id] = single(id, node);
    state.runners[`r-${id}`] = { RunnerReady: {} };
  }
  const telemetry: [string, TelemetryEntry][] = entries([{ id: "self", ram: 1e9 }, { id: "peer", ram: 1e9 }]);
  telemetry[1][1].reading.running = opts.peerRunning ?? [];
  return {
    nodeId: "self",
    log: { state },
    telemetry: { entries: () => telemetry },
    config: { llamaParallel: 4, queueDepth: 2, prefixAffinity: opts.affinity ?? true },
  };
}

const req = (commandId: string, instanceId: string, driverNode: string): RunningRequest => ({
  commandId,
  model: MODEL,
  instanceId,
  driverNode,
  ownerNode: "self",
  path: "/v1/chat/completions",
  startedAt: 0,
});
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const chatBody = (system: string) =>
  JSON.stringify({
    model: MODEL,
    messages: [{ role: "system", content: system }, { role: "user", content: "hi" }],
  });
const pickOf = (ctx: RouterContext, raw: string, pinned?: string) => {
  const r = routeRequest(ctx, MODEL, raw, pinned);
  if (!r.ok) throw new Error(r.message);
  return r.target.instanceId;
};

describe("router", () => {
  it("counts this node's requests and those other nodes report, each command once", () => {
    const ctx = context({
      peerRunning: [req(uuid(1), "b", "peer"), { ...req(uuid(2), "b", "peer"), ownerNode: "peer" }],
    });
    // This node forwarded uuid(1) to the peer: it knows it itself and sees it reported. uuid(2) is the
    // peer's own client's.
    runningOf(ctx).add(req(uuid(1), "b", "peer"));
    runningOf(ctx).add(req(uuid(3), "a", "self"));
    expect(Object.fromEntries(instanceLoads(ctx))).toEqual({ a: 1, b: 2 });
    // So the next request goes to the less loaded local instance.
    expect(pickOf(ctx, chatBody("x"))).toBe("a");
  });

  it("does not count a request this node owned that a peer still reports after it ended here", () => {
    // The peer's reading lags: the forward of uuid(4) ended on this node, which owns it and knows it is done.
    const ctx = context({ peerRunning: [req(uuid(4), "b", "peer")] });
    expect(Object.fromEntries(instanceLoads(ctx))).toEqual({});
    // While it runs here it counts, once.
    runningOf(ctx).add(req(uuid(4), "b", "peer"));
    expect(Object.fromEntries(instanceLoads(ctx))).toEqual({ b: 1 });
  });

  it("a repeated long prompt goes back to its instance with affinity; equals alternate without", () => {
    const long = "The same long system prompt. ".repeat(60);
    const on = context();
    const first = pickOf(on, chatBody(long));
    expect([1, 2, 3].map(() => pickOf(on, chatBody(long)))).toEqual([first, first, first]);
    const off = context({ affinity: false });
    const seq = [0, 1, 2, 3].map(() => pickOf(off, chatBody(long)));
    expect(new Set(seq)).toEqual(new Set(["a", "b"]));
    expect(seq[0]).not.toBe(seq[1]);
  });

  it("uses a pinned instance driven here, and refuses one that is not", () => {
    const ctx = context();
    expect(pickOf(ctx, chatBody("x"), "a")).toBe("a");
    const r = routeRequest(ctx, MODEL, chatBody("x"), "b");
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect([r.status, r.message]).toEqual([
        503,
        expect.stringMatching(/instance b .* not ready on this node/),
      ]);
    }
  });

  it("names a model with no instance (404)", () => {
    const r = routeRequest(context(), "other/model", "{}");
    expect(r.ok ? 200 : r.status).toBe(404);
  });
});
