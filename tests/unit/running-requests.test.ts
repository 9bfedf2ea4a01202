/** The running-request registry's pure decisions: where a cancel goes, and `/state` tasks from reports. */
import { describe, expect, it } from "vitest";
import { topologyOf } from "../../src/api/wire/state.ts";
import { cancelRoute, type RunningRequest, RunningRequests, tasksOf } from "../../src/serving/running.ts";

const req = (commandId: string, driverNode: string, ownerNode: string, startedAt = 1): RunningRequest => ({
  commandId,
  model: "m",
  instanceId: "inst",
  driverNode,
  ownerNode,
  path: "/v1/chat/completions",
  startedAt,
});
const ID = "0b7e2f5e-3c4a-4c8e-9a53-6f1f0a7b9d11";

describe("cancelRoute", () => {
  it.each([
    ["the engine runs here", req(ID, "a", "a"), [], { kind: "local" }],
    ["this node owns it, B drives it", req(ID, "b", "a"), [], { kind: "forward", driverNode: "b" }],
    ["only B's report knows it", undefined, [req(ID, "b", "c")], { kind: "forward", driverNode: "b" }],
    ["nobody knows it", undefined, [req("other", "b", "b")], { kind: "unknown" }],
  ])("%s", (_what, local, reported, want) => {
    expect(cancelRoute(ID, "a", local as RunningRequest | undefined, reported as RunningRequest[])).toEqual(
      want,
    );
  });
});

describe("tasksOf", () => {
  it("lists each running request as a Running TextGeneration task, oldest first", () => {
    const t = tasksOf([req("y", "b", "a", 2), { ...req("x", "a", "a", 1), path: "/v1/embeddings" }], true);
    expect(Object.keys(t)).toEqual(["x", "y"]);
    expect(t.y).toEqual({
      TextGeneration: {
        taskId: "y",
        taskStatus: "Running",
        instanceId: "inst",
        commandId: "y",
        ownerNode: "a",
        taskParams: { model: "m" },
        traceEnabled: true,
      },
    });
    expect(Object.keys(t.x)).toEqual(["TextEmbedding"]);
  });
});

describe("RunningRequests", () => {
  it("reports only what this node's engines generate", () => {
    const r = new RunningRequests();
    r.add(req("1", "a", "a", 3));
    r.add(req("2", "b", "a", 1));
    r.add(req("3", "a", "b", 2));
    expect(r.driven("a").map((x) => x.commandId)).toEqual(["3", "1"]);
    r.remove("1");
    expect(r.has("1")).toBe(false);
    expect(r.driven("a").map((x) => x.commandId)).toEqual(["3"]);
  });
});

describe("topologyOf", () => {
  const reading = (nodeId: string, links: unknown[]) => ({ reading: { nodeId, links } }) as never;
  it("draws one edge per measured link between seen nodes, skipping unknown peers and bad addresses", () => {
    const t = topologyOf([
      [
        "a",
        reading("a", [
          { nodeId: "b", address: "10.0.0.2:52415", rttMs: 1.5, measuredAt: 7 },
          { nodeId: "gone", address: "10.0.0.9:52415", rttMs: 1, measuredAt: 7 },
        ]),
      ],
      [
        "b",
        reading("b", [
          { nodeId: "a", address: "[fd00::1]:52416", rttMs: 2, measuredAt: 8 },
          { nodeId: "a", address: "nonsense", rttMs: 2, measuredAt: 9 },
        ]),
      ],
      ["c", reading("c", [])],
    ]);
    expect(t.nodes).toEqual(["a", "b", "c"]);
    expect(t.connections).toEqual({
      a: {
        b: [{
          sinkMultiaddr: {
            address: "/ip4/10.0.0.2/tcp/52415",
            address_type: "ip4",
            ip_address: "10.0.0.2",
            port: 52415,
          },
          rttMs: 1.5,
          measuredAt: 7,
        }],
      },
      b: {
        a: [{
          sinkMultiaddr: {
            address: "/ip6/fd00::1/tcp/52416",
            address_type: "ip6",
            ip_address: "fd00::1",
            port: 52416,
          },
          rttMs: 2,
          measuredAt: 8,
        }],
      },
    });
  });
});
