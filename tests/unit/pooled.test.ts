/**
 * Pooled GGUF, the pure parts: the planner's RPC protocol check, each node's role in a pool, the driver's
 * wait on its donors, the donor's command line and socket check, and the healing policy table.
 */
import { describe, expect, it } from "vitest";
import { makeEvent } from "../../src/cluster/events.ts";
import {
  type Instance,
  instanceBody,
  type PlacementRecord,
  PlacementRecordSchema,
} from "../../src/cluster/instances.ts";
import { applyEvent, type ClusterState, emptyState } from "../../src/cluster/state.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { listensIn, rpcServerArgs, tcpAccepts } from "../../src/engines/rpc-server.ts";
import {
  breakagesOf,
  decideHealing,
  HEALED_AFTER_MS,
  lineageOfCreated,
  MAX_HEAL_ATTEMPTS,
  recordOf,
  withoutInstance,
} from "../../src/healing/decide.ts";
import type { ModelCard } from "../../src/models/card.ts";
import { localCard } from "../../src/models/local.ts";
import { donorAddress, placementRequest, plan } from "../../src/placement/planner.ts";
import { buildClusterView, type ClusterView, type NodeView } from "../../src/placement/view.ts";
import { donorsPhase, poolRole } from "../../src/worker/pooled.ts";
import { tinyModel } from "../helpers/models.ts";
import { counterIds, entries, type NodeSpec, NOW } from "../helpers/synthetic-cluster.ts";

const MIB = 1024 ** 2;
/** Nodes that lend 263 MiB each: the 8-layer tiny model (~279 MB alone) needs a pool of two or more. */
const small = (id: string, extra: Partial<NodeSpec> = {}): NodeSpec => ({
  id,
  ram: 4e9,
  ramAvailable: 263 * MIB,
  ...extra,
});
/** A node that holds the model alone. */
const big = (id: string): NodeSpec => ({ id, ram: 4e9, ramAvailable: 2e9 });

const card: ModelCard = await localCard(await tinyModel({ layers: 8 }), "test/tiny-pooled");

function view(specs: NodeSpec[], state: ClusterState = emptyState()): ClusterView {
  return buildClusterView(state, entries(specs), NOW, { nodeTimeoutMs: 30_000 });
}

function nodesOf(i: Instance): string[] {
  return Object.keys(instanceBody(i).shardAssignments.nodeToRunner).sort();
}

function pooled(specs: NodeSpec[], minNodes = 3): Instance {
  const r = plan(
    view(specs),
    card,
    placementRequest(card.model_id, { instance_meta: "LlamaRpc", min_nodes: minNodes }),
    counterIds("p"),
  );
  if (!r.ok) throw new Error(r.error);
  return r.placement.instance;
}

function stateWith(instance: Instance, statuses: Record<string, Record<string, unknown>> = {}): ClusterState {
  let s = applyEvent(emptyState(), makeEvent("InstanceCreated", { instance }));
  for (const [runnerId, runnerStatus] of Object.entries(statuses)) {
    s = applyEvent(s, makeEvent("RunnerStatusUpdated", { runnerId, runnerStatus }));
  }
  return s;
}

const runnerOn = (i: Instance, node: string) => instanceBody(i).shardAssignments.nodeToRunner[node];
const driverOf = (i: Instance) =>
  (i as { LlamaRpcInstance: { driverNode: string } }).LlamaRpcInstance.driverNode;

describe("the planner's RPC protocol check", () => {
  const cases: {
    name: string;
    nodes: NodeSpec[];
    required?: string[];
    nodesExpected?: string[];
    error?: RegExp;
  }[] = [
    {
      name: "one odd node is left out of the pool, which forms from the others",
      nodes: [
        small("a", { rpcProtocol: "6.0.0" }),
        small("b", { rpcProtocol: "6.0.0" }),
        small("c", { rpcProtocol: "5.0.0" }),
      ],
      nodesExpected: ["a", "b"],
    },
    {
      name: "asking for two nodes with different protocols is refused with both versions",
      nodes: [
        small("a", { rpcProtocol: "6.0.0" }),
        small("b", { rpcProtocol: "6.0.0" }),
        small("c", { rpcProtocol: "5.0.0" }),
      ],
      required: ["a", "c"],
      error: /different ggml RPC protocols \(a 6\.0\.0, c 5\.0\.0\)/,
    },
    {
      name: "two nodes with different protocols cannot pool, and the refusal says why",
      nodes: [small("a", { rpcProtocol: "6.0.0" }), small("b", { rpcProtocol: "5.0.0" })],
      error: /1 node\(s\) speak ggml RPC protocol .*speaks ggml RPC protocol/,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const r = plan(
        view(c.nodes),
        card,
        placementRequest(card.model_id, {
          instance_meta: "LlamaRpc",
          min_nodes: 2,
          required_nodes: c.required ?? [],
        }),
        counterIds(),
      );
      if (c.error) {
        expect(r.ok).toBe(false);
        if (!r.ok) expect(r.error).toMatch(c.error);
      } else {
        expect(r.ok, r.ok ? "" : r.error).toBe(true);
        if (r.ok) expect(nodesOf(r.placement.instance)).toEqual(c.nodesExpected);
      }
    });
  }

  it("pools a model no node can hold alone, and prefers one node when one can", () => {
    const r = plan(
      view([small("a"), small("b"), small("c")]),
      card,
      placementRequest(card.model_id),
      counterIds(),
    );
    expect(r.ok && Object.keys(r.placement.instance)[0]).toBe("LlamaRpcInstance");
    const one = plan(view([small("a"), big("b")]), card, placementRequest(card.model_id), counterIds());
    expect(one.ok && nodesOf(one.placement.instance)).toEqual(["b"]);
  });
});

describe("the address a driver reaches a donor by", () => {
  const node = (addresses: NodeView["addresses"]): NodeView => ({
    ...view([small("x")]).nodes[0],
    addresses,
  });
  const tb = (ip: string) => ({ ip, type: "thunderbolt" as const });
  const eth = (ip: string) => ({ ip, type: "ethernet" as const });
  const wifi = (ip: string) => ({ ip, type: "wifi" as const });
  const vpn = (ip: string) => ({ ip, type: "vpn" as const });
  const cases: {
    name: string;
    driver: NodeView["addresses"];
    donor: NodeView["addresses"];
    expect: string | null;
  }[] = [
    {
      name: "the Thunderbolt link they share first",
      driver: [tb("10.9.0.1"), eth("192.168.1.2")],
      donor: [tb("10.9.0.2"), eth("192.168.1.3")],
      expect: "10.9.0.2",
    },
    {
      name: "Ethernet when the donor's Thunderbolt cable goes to another node",
      driver: [eth("192.168.1.2")],
      donor: [tb("10.8.0.2"), eth("192.168.1.3")],
      expect: "192.168.1.3",
    },
    {
      name: "Wi-Fi before a VPN on a shared subnet",
      driver: [wifi("192.168.5.2"), vpn("100.64.0.1")],
      donor: [wifi("192.168.5.9"), vpn("100.64.0.2")],
      expect: "192.168.5.9",
    },
    {
      name: "a routed address when no subnet is shared",
      driver: [eth("192.168.1.2")],
      donor: [eth("172.16.4.2")],
      expect: "172.16.4.2",
    },
    {
      name: "no route when the donor only has a cable to someone else",
      driver: [eth("192.168.1.2")],
      donor: [tb("10.8.0.2")],
      expect: null,
    },
  ];
  for (const c of cases) {
    it(c.name, () => expect(donorAddress(node(c.driver), node(c.donor))?.ip ?? null).toBe(c.expect));
  }

  it("leaves an unreachable donor out of the pool and says why", () => {
    const r = plan(
      view([small("a"), small("b", { link: "thunderbolt", ip: "10.77.0.2" })]),
      card,
      placementRequest(card.model_id, { instance_meta: "LlamaRpc", min_nodes: 2 }),
      counterIds(),
    );
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toMatch(/has no address a can reach|has no address b can reach/);
  });
});

describe("a node's role in a pool", () => {
  const inst = pooled([small("a"), small("b"), small("c")]);
  const driver = driverOf(inst);
  const donors = nodesOf(inst).filter((n) => n !== driver);

  it("names the driver's endpoints in a stable order and each donor's bind address", () => {
    const shardOf = (n: string) => instanceBody(inst).shardAssignments.runnerToShard[runnerOn(inst, n)];
    const d = poolRole(inst, driver, shardOf(driver));
    expect(d.kind).toBe("driver");
    if (d.kind === "driver") {
      expect(d.endpoints).toEqual(
        donors.map((n) =>
          (inst as { LlamaRpcInstance: { donorEndpoints: Record<string, string> } }).LlamaRpcInstance
            .donorEndpoints[n]
        ),
      );
      expect(d.donorRunners).toEqual(donors.map((n) => runnerOn(inst, n)));
    }
    const r = poolRole(inst, donors[0], shardOf(donors[0]));
    expect(r).toMatchObject({
      kind: "donor",
      driverNode: driver,
      host: expect.stringMatching(/^10\.0\.0\./),
    });
    const single = plan(view([big("z")]), card, placementRequest(card.model_id), counterIds()) as {
      ok: true;
      placement: { instance: Instance };
    };
    const s = single.placement.instance;
    expect(poolRole(s, "z", Object.values(instanceBody(s).shardAssignments.runnerToShard)[0]).kind).toBe(
      "single",
    );
  });

  it("lets the driver start only once every donor is ready, and never after a donor failed", () => {
    const runners = donors.map((n) => runnerOn(inst, n));
    expect(donorsPhase(stateWith(inst), "p-0", runners)).toEqual({ kind: "waiting", pending: runners });
    expect(donorsPhase(stateWith(inst, { [runners[0]]: { RunnerReady: {} } }), "p-0", runners))
      .toEqual({ kind: "waiting", pending: [runners[1]] });
    expect(
      donorsPhase(
        stateWith(inst, { [runners[0]]: { RunnerReady: {} }, [runners[1]]: { RunnerReady: {} } }),
        "p-0",
        runners,
      ),
    )
      .toEqual({ kind: "ready" });
    const failed = donorsPhase(
      stateWith(inst, { [runners[1]]: { RunnerFailed: { errorMessage: "bind: address in use" } } }),
      "p-0",
      runners,
    );
    expect(failed).toEqual({ kind: "failed", reason: `donor ${donors[1]} failed: bind: address in use` });
    expect(donorsPhase(emptyState(), "p-0", runners).kind).toBe("failed");
  });
});

describe("the donor engine", () => {
  it("binds ggml-rpc-server to the chosen address only, with the tensor cache", () => {
    expect(rpcServerArgs({ bin: "x", host: "10.0.0.2", port: 24001 })).toEqual([
      "-H",
      "10.0.0.2",
      "-p",
      "24001",
      "-c",
    ]);
    for (const host of ["0.0.0.0", "::", ""]) {
      expect(() => rpcServerArgs({ bin: "x", host, port: 24001 })).toThrow(/unauthenticated/);
    }
  });

  it("sees a listening socket in /proc/net/tcp without connecting to it", async () => {
    const sample = [
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
      "   0: 0100007F:5DC1 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1",
      "   1: 0200000A:5DC2 0300000A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1",
    ].join("\n");
    expect(listensIn(sample, "127.0.0.1", 24001)).toBe(true);
    expect(listensIn(sample, "10.0.0.2", 24002)).toBe(false); // established, not listening
    expect(listensIn(sample, "127.0.0.1", 24002)).toBe(false);
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    try {
      expect(listensIn(Deno.readTextFileSync("/proc/net/tcp"), "127.0.0.1", port)).toBe(true);
      const accepted = l.accept().then((c) => c.close());
      expect(await tcpAccepts("127.0.0.1", port)).toBe(true);
      await accepted;
    } finally {
      l.close();
    }
    expect(listensIn(Deno.readTextFileSync("/proc/net/tcp"), "127.0.0.1", port)).toBe(false);
    expect(await tcpAccepts("127.0.0.1", port, 300)).toBe(false);
  });
});

describe("healing policy", () => {
  const specs = [small("a"), small("b"), small("c"), small("d")];
  const inst = pooled(specs);
  const id = instanceBody(inst).instanceId;
  const driver = driverOf(inst);
  const donor = nodesOf(inst).find((n) => n !== driver)!;
  const failed = (node: string) =>
    makeEvent("RunnerStatusUpdated", {
      runnerId: runnerOn(inst, node),
      runnerStatus: { RunnerFailed: { errorMessage: "ggml-rpc-server was killed by SIGKILL\n--- log" } },
    });
  const ready = stateWith(
    inst,
    Object.fromEntries(nodesOf(inst).map((n) => [runnerOn(inst, n), { RunnerReady: {} }])),
  );

  it("finds the breakage a failed runner or a timed-out node causes, once", () => {
    const after = applyEvent(ready, failed(donor));
    const [b] = breakagesOf(failed(donor), ready, after, new Set());
    expect(b).toMatchObject({ instanceId: id, deadNode: donor, alreadyDeleted: false });
    expect(b.reason).toBe(`donor on node ${donor} failed: ggml-rpc-server was killed by SIGKILL`);
    // The driver failing next (its donor is gone) is the same breakage, not a second one.
    expect(breakagesOf(failed(driver), after, applyEvent(after, failed(driver)), new Set())).toEqual([]);
    const timeout = makeEvent("NodeTimedOut", { nodeId: driver });
    const [t] = breakagesOf(timeout, ready, applyEvent(ready, timeout), new Set());
    expect(t).toMatchObject({ deadNode: driver, alreadyDeleted: true, reason: `node ${driver} timed out` });
    expect(
      breakagesOf(
        makeEvent("RunnerStatusUpdated", {
          runnerId: runnerOn(inst, donor),
          runnerStatus: { RunnerReady: {} },
        }),
        ready,
        ready,
        new Set(),
      ),
    )
      .toEqual([]);
  });

  it("leaves a single-node engine's failure to the relaunch (relaunch.ts), even one healing placed, but heals its node's timeout", () => {
    const one = plan(view([big("z")]), card, placementRequest(card.model_id), counterIds("s")) as {
      ok: true;
      placement: { instance: Instance };
    };
    const s = stateWith(one.placement.instance);
    const ev = makeEvent("RunnerStatusUpdated", {
      runnerId: runnerOn(one.placement.instance, "z"),
      runnerStatus: { RunnerFailed: { errorMessage: "x" } },
    });
    expect(breakagesOf(ev, s, applyEvent(s, ev), new Set())).toEqual([]);
    expect(breakagesOf(ev, s, applyEvent(s, ev), new Set(["s-0"]))).toEqual([]);
    const gone = makeEvent("NodeTimedOut", { nodeId: "z" });
    expect(breakagesOf(gone, s, applyEvent(s, gone), new Set())).toMatchObject([
      { instanceId: "s-0", deadNode: "z", alreadyDeleted: true, reason: "node z timed out" },
    ]);
  });

  const BASE = 5000;
  const asPool = { instanceMeta: "LlamaRpc" as const, minNodes: 3 };
  const breakage = () => breakagesOf(failed(donor), ready, applyEvent(ready, failed(donor)), new Set())[0];
  const healView = (nodes: NodeSpec[]) => view(nodes, withoutInstance(applyEvent(ready, failed(donor)), id));

  const table: {
    name: string;
    nodes: NodeSpec[];
    record?: Partial<PlacementRecord>;
    lineage?: { attempts: number; readySince: number | null };
    expect: RegExp | { kind: string; width: number; short?: RegExp };
  }[] = [
    {
      name: "a plain placement: one node when one now fits",
      nodes: [...specs.filter((s) => s.id !== "d"), big("d")],
      expect: { kind: "MlxRingInstance", width: 1 },
    },
    {
      name: "a plain placement: the smallest pool without the dead node",
      nodes: specs,
      expect: { kind: "LlamaRpcInstance", width: 2 },
    },
    {
      name: "min_nodes 3 honoured when three nodes remain, even though one node would now do",
      nodes: [...specs.filter((s) => s.id !== "d"), big("d")],
      record: asPool,
      expect: { kind: "LlamaRpcInstance", width: 3 },
    },
    {
      name: "min_nodes 3 not honoured when only two remain, and the reason says so",
      nodes: specs.filter((s) => nodesOf(inst).includes(s.id)),
      record: asPool,
      expect: {
        kind: "LlamaRpcInstance",
        width: 2,
        short: /min_nodes 3 not honoured \(as placed .*fewer than the 3 asked for/,
      },
    },
    {
      name: "no place without the dead node: recorded, next try after the base delay",
      nodes: [small(driver), small(donor)],
      expect: /healing found no place, attempt 1\/5, next try at 2023-11-14T22:13:25.000Z: anywhere: /,
    },
    {
      name: "gives up after the bound",
      nodes: specs,
      lineage: { attempts: MAX_HEAL_ATTEMPTS, readySince: null },
      expect: /healing gave up after 1 attempt\(s\), until a node joins: 3 re-placement\(s\) did not hold/,
    },
    {
      name: "counts afresh once the last placement served a while",
      nodes: specs,
      lineage: { attempts: MAX_HEAL_ATTEMPTS, readySince: NOW - HEALED_AFTER_MS },
      expect: { kind: "LlamaRpcInstance", width: 2 },
    },
  ];
  for (const c of table) {
    it(`heals: ${c.name}`, () => {
      const b = breakage();
      const record = PlacementRecordSchema.parse(c.record ?? {});
      const d = decideHealing(b, c.lineage, record, healView(c.nodes), card, NOW, BASE, counterIds("h"));
      expect(d.deleteReason).toContain(`healing: donor on node ${donor} failed`);
      if (c.expect instanceof RegExp) {
        expect(d.action).toBe("unplaced");
        if (d.action === "unplaced") {
          expect(d.failure.reason).toMatch(c.expect);
          expect(d.failure.reason.startsWith(`donor on node ${donor} failed`)).toBe(true);
          expect(d.failure.lostInstanceId).toBe(id);
        }
        return;
      }
      expect(d.action).toBe("replace");
      if (d.action !== "replace") return;
      expect(Object.keys(d.instance)[0]).toBe(c.expect.kind);
      expect(nodesOf(d.instance)).not.toContain(donor);
      expect(nodesOf(d.instance).length).toBe(c.expect.width);
      expect(d.deleteReason).toMatch(
        new RegExp(`; replaced by h-0 on .* without ${donor}, attempt \\d/${MAX_HEAL_ATTEMPTS}`),
      );
      expect(d.createReason).toContain(`heals ${id} after donor on node ${donor} failed`);
      if (c.expect.short) expect(d.createReason).toMatch(c.expect.short);
      else expect(d.createReason).not.toContain("not honoured");
      // The new instance keeps the original constraints, so the next healing asks for them again.
      expect(d.placement).toMatchObject({ ...record, healAttempt: d.lineage.attempts });
      expect(d.lineage.readySince).toBeNull();
      // Every node reads the same lineage back from the event, so a new master keeps the count.
      const created = makeEvent("InstanceCreated", { instance: d.instance, placement: d.placement });
      expect(lineageOfCreated(created)).toEqual({ instanceId: "h-0", lineage: d.lineage });
      expect(lineageOfCreated(makeEvent("InstanceCreated", { instance: d.instance }))).toBeNull();
    });
  }

  it("needs no delete for an instance a node timeout already removed", () => {
    const timeout = makeEvent("NodeTimedOut", { nodeId: driver });
    const after = applyEvent(ready, timeout);
    const [b] = breakagesOf(timeout, ready, after, new Set());
    const d = decideHealing(
      b,
      undefined,
      recordOf(ready, id),
      view(specs, after),
      card,
      NOW,
      BASE,
      counterIds("h"),
    );
    expect(d.action === "replace" && d.deleteReason).toBe(null);
    expect(d.action === "replace" && nodesOf(d.instance)).not.toContain(driver);
  });
});

describe("node.memory_limit", () => {
  it("reads bytes or a size with a unit, and refuses nonsense", () => {
    const at = (v: string) =>
      resolveConfig({ flags: {}, env: { HOME: "/h", SKULK_MEMORY_LIMIT: v } }).config.memoryLimit;
    expect(at("263MiB")).toBe(263 * MIB);
    expect(at("1.5 GB")).toBe(1.5e9);
    expect(at("1048576")).toBe(MIB);
    expect(resolveConfig({ flags: {}, env: { HOME: "/h" } }).config.memoryLimit).toBeNull();
    expect(() => at("lots")).toThrow(/node\.memory_limit|SKULK_MEMORY_LIMIT/);
    expect(() => at("0")).toThrow();
  });
});
