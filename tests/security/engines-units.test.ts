/**
 * Engines' trust boundary, pure parts: the IP-literal parser and bind rule every engine address passes,
 * the donor command line's last check, the checks `POST /instance` makes, and the node's model-path check.
 */
import { describe, expect, it } from "vitest";
import type { Instance } from "../../src/cluster/instances.ts";
import { bindRefusal, parseIpLiteral } from "../../src/engines/bind-address.ts";
import { rpcServerArgs } from "../../src/engines/rpc-server.ts";
import { cardToWire, type ModelCard, parseCard } from "../../src/models/card.ts";
import { cardDifference, type InstanceFacts, instanceProblem } from "../../src/placement/instance-check.ts";
import { modelPathRefusal } from "../../src/placement/shard-check.ts";

describe("the IP-literal parser", () => {
  it.each([
    ["127.0.0.1", { family: 4, address: "127.0.0.1" }],
    ["10.9.0.2", { family: 4, address: "10.9.0.2" }],
    ["255.255.255.255", { family: 4, address: "255.255.255.255" }],
    ["::1", { family: 6, address: "::1" }],
    ["2001:DB8:0:0::1", { family: 6, address: "2001:db8::1" }],
    ["0:0:0:0:0:0:0:0", { family: 6, address: "::" }],
    ["::0", { family: 6, address: "::" }],
    ["::ffff:0.0.0.0", { family: 6, address: "::ffff:0:0" }],
  ])("reads %s as a literal", (text, want) => {
    expect(parseIpLiteral(text)).toEqual(want);
  });

  it.each([
    "",
    "0",
    "0x0",
    "0x7f000001",
    "2130706433",
    "127.1",
    "0177.0.0.1",
    "01.2.3.4",
    "1.2.3.4 ",
    " 1.2.3.4",
    "256.1.1.1",
    "1.2.3.4.5",
    "[::]",
    "[::1]",
    "fe80::1%eth0",
    "1::2::3",
    "localhost",
    "ip6-localhost",
    "node.local",
    "example.com",
    "0.0.0.0/0",
  ])("refuses %j", (text) => {
    const r = parseIpLiteral(text);
    expect("error" in r && r.error).toMatch(/not a literal IP address/);
  });
});

describe("the bind rule", () => {
  const local = ["192.168.7.20", "fd00::20", "10.9.0.2"];
  it.each([
    ["127.0.0.1"],
    ["127.0.0.2"],
    ["::1"],
    ["192.168.7.20"],
    ["10.9.0.2"],
    ["fd00:0::20"],
  ])("lets an engine bind %s", (host) => {
    expect(bindRefusal(host, local)).toBeNull();
  });

  it.each([
    ["0", /not a literal IP address/],
    ["0x0", /not a literal IP address/],
    ["127.1", /not a literal IP address/],
    ["0177.0.0.1", /not a literal IP address/],
    ["", /not a literal IP address/],
    ["localhost", /not a literal IP address/],
    ["[::]", /not a literal IP address/],
    ["0.0.0.0", /IPv4 wildcard/],
    ["0.1.2.3", /IPv4 wildcard/],
    ["::", /IPv6 wildcard/],
    ["::0", /IPv6 wildcard/],
    ["0:0:0:0:0:0:0:0", /IPv6 wildcard/],
    ["::ffff:0.0.0.0", /IPv4-mapped/],
    ["::ffff:192.168.7.20", /IPv4-mapped/],
    ["192.0.2.1", /not an address of this node.*192\.168\.7\.20/],
    ["fd00::21", /not an address of this node/],
    ["224.0.0.1", /not an address of this node/],
  ])("refuses %j, saying why", (host, why) => {
    const r = bindRefusal(host, local);
    expect(r).toMatch(why);
    expect(r).toMatch(/^refusing to bind/);
  });

  it("allows only loopback on a node that reported no interfaces", () => {
    expect(bindRefusal("127.0.0.1", [])).toBeNull();
    expect(bindRefusal("192.168.7.20", [])).toMatch(/no interface addresses/);
  });
});

describe("the donor's command line", () => {
  it.each(["0", "0x0", "0.0.0.0", "::", "::0", "[::]", "::ffff:0.0.0.0", "localhost", "", "127.1"])(
    "never passes %j to -H",
    (host) => {
      expect(() => rpcServerArgs({ bin: "x", host, port: 24001 })).toThrow(
        /refusing to bind ggml-rpc-server/,
      );
    },
  );

  it("passes a literal in canonical form", () => {
    expect(rpcServerArgs({ bin: "x", host: "fd00:0::2", port: 24001 }).slice(0, 2)).toEqual([
      "-H",
      "fd00::2",
    ]);
  });
});

const CARD: ModelCard = parseCard({
  model_id: "org/tiny",
  storage_size: { in_bytes: 1000 },
  n_layers: 4,
  hidden_size: 64,
  supports_tensor: false,
  tasks: ["TextGeneration"],
  gguf_file: "tiny.gguf",
});
const WIRE = { modelId: "org/tiny", nLayers: 4 };
const base = {
  resolvedBackend: null,
  immediateException: false,
  shouldTimeout: null,
  nLayers: 4,
  modelCard: WIRE,
};

function ring(shards: [string, number, number][], extra: Record<string, unknown> = {}): Instance {
  return {
    MlxRingInstance: {
      instanceId: "inst-1",
      shardAssignments: {
        modelId: "org/tiny",
        runnerToShard: Object.fromEntries(shards.map(([, s, e], i) => [
          `r${i}`,
          {
            PipelineShardMetadata: {
              ...base,
              deviceRank: i,
              worldSize: shards.length,
              startLayer: s,
              endLayer: e,
            },
          },
        ])),
        nodeToRunner: Object.fromEntries(shards.map(([n], i) => [n, `r${i}`])),
      },
      contextTokenLimit: 1024,
      hostsByNode: {},
      ephemeralPort: 0,
      ...extra,
    },
  } as Instance;
}

function pool(rpcHost: string, rpcPort = 24001, endpoint = `${rpcHost}:${rpcPort}`): Instance {
  return {
    LlamaRpcInstance: {
      instanceId: "pool-1",
      shardAssignments: {
        modelId: "org/tiny",
        runnerToShard: {
          d: { PipelineShardMetadata: { ...base, deviceRank: 0, worldSize: 2, startLayer: 0, endLayer: 4 } },
          l: {
            RpcDonorShardMetadata: {
              ...base,
              deviceRank: 1,
              worldSize: 2,
              startLayer: 0,
              endLayer: 0,
              driverNode: "A",
              rpcHost,
              rpcPort,
            },
          },
        },
        nodeToRunner: { A: "d", B: "l" },
      },
      contextTokenLimit: 1024,
      driverNode: "A",
      donorEndpoints: { B: endpoint },
    },
  } as Instance;
}

const facts: InstanceFacts = {
  card: CARD,
  addressesOf: (n) => ({ A: ["10.0.0.1"], B: ["10.0.0.2"] } as Record<string, string[]>)[n],
  instanceExists: (id) => id === "taken",
};

describe("POST /instance's checks", () => {
  it.each([
    ["one node, every layer", ring([["A", 0, 4]])],
    ["two nodes, contiguous", ring([["A", 0, 2], ["B", 2, 4]])],
    ["a pool, donor on its own address", pool("10.0.0.2")],
    ["a pool, donor on loopback", pool("127.0.0.1")],
    [
      "ports in the band",
      ring([["A", 0, 4]], { ephemeralPort: 24010, hostsByNode: { A: [{ ip: "0.0.0.0", port: 24010 }] } }),
    ],
  ])("accepts %s", (_, inst) => {
    expect(instanceProblem(inst, facts)).toBeNull();
  });

  it.each([
    ["an unknown model", ring([["A", 0, 4]]), { card: undefined }, "modelId", /unknown model 'org\/tiny'/],
    [
      "overlapping layers",
      ring([["A", 0, 3], ["B", 2, 4]]),
      {},
      "runnerToShard.r1",
      /contiguous and not overlap/,
    ],
    ["a gap", ring([["A", 0, 1], ["B", 2, 4]]), {}, "runnerToShard.r1", /start at layer 1/],
    ["a short cover", ring([["A", 0, 1], ["B", 1, 3]]), {}, "runnerToShard", /cover layers 0-3/],
    ["layers past the model", ring([["A", 0, 9]]), {}, "endLayer", /not a range within/],
    ["an unknown node", ring([["Z", 0, 4]]), {}, "nodeToRunner", /node Z is not part of this cluster/],
    [
      "a port below the band",
      ring([["A", 0, 4]], { ephemeralPort: 22 }),
      {},
      "ephemeralPort",
      /outside the engine band/,
    ],
    [
      "a host port above the band",
      ring([["A", 0, 4]], { hostsByNode: { A: [{ ip: "0.0.0.0", port: 52415 }] } }),
      {},
      "hostsByNode.A",
      /52415 is outside/,
    ],
    [
      "a malformed id",
      ring([["A", 0, 4]], { instanceId: "../../x" }),
      {},
      "instanceId",
      /not a well-formed id/,
    ],
    ["an existing id", ring([["A", 0, 4]], { instanceId: "taken" }), {}, "instanceId", /already exists/],
    ["a donor on 0x0", pool("0x0"), {}, "rpcHost", /'0x0': not a literal IP/],
    ["a donor on 0", pool("0"), {}, "rpcHost", /'0': not a literal IP/],
    ["a donor on ::", pool("::", 24001, "[::]:24001"), {}, "rpcHost", /IPv6 wildcard/],
    ["a donor on another node's address", pool("10.0.0.1"), {}, "rpcHost", /not an address of node B/],
    ["a donor outside the band", pool("10.0.0.2", 80), {}, "rpcPort", /rpcPort 80 is outside/],
    [
      "endpoints that disagree",
      pool("10.0.0.2", 24001, "10.0.0.9:24001"),
      {},
      "donorEndpoints",
      /10\.0\.0\.2:24001/,
    ],
  ])("refuses %s, naming the field", (_, inst, over, param, message) => {
    const p = instanceProblem(inst as Instance, { ...facts, ...over });
    expect(p?.param).toContain(param);
    expect(p?.message).toMatch(message);
  });

  it("refuses a runner given to two nodes and a world size that disagrees", () => {
    const two = ring([["A", 0, 2], ["B", 2, 4]]);
    const body = (two as { MlxRingInstance: { shardAssignments: { nodeToRunner: Record<string, string> } } })
      .MlxRingInstance;
    body.shardAssignments.nodeToRunner.B = "r0";
    expect(instanceProblem(two, facts)?.message).toMatch(/given to two nodes|has a shard but no node/);
    const one = ring([["A", 0, 4]]);
    const shard = Object.values(
      (one as { MlxRingInstance: { shardAssignments: { runnerToShard: object } } }).MlxRingInstance
        .shardAssignments.runnerToShard,
    )[0] as { PipelineShardMetadata: { worldSize: number } };
    shard.PipelineShardMetadata.worldSize = 3;
    expect(instanceProblem(one, facts)?.param).toMatch(/worldSize$/);
  });
});

describe("a node's own check of the files a placed card names", () => {
  const registered = { ...CARD, model_id: "local/m", gguf_path: "/srv/models/m.gguf" };
  it.each([
    ["the catalogue's card", CARD, CARD],
    ["a registered local model", registered, registered],
    ["a projector beside the model", { ...CARD, mmproj_file: "mmproj.gguf" }, CARD],
  ])("accepts %s", (_, card, reg) => {
    expect(modelPathRefusal(card, reg, "/data/models")).toBeNull();
  });

  it.each([
    [
      "gguf_path /etc/shadow",
      { ...CARD, gguf_path: "/etc/shadow" },
      CARD,
      /gguf_path '\/etc\/shadow' is not a local model registered/,
    ],
    [
      "another gguf_path than registered",
      { ...registered, gguf_path: "/etc/shadow" },
      registered,
      /registered: \/srv\/models\/m.gguf/,
    ],
    [
      "an unregistered model's gguf_path",
      { ...CARD, gguf_path: "/tmp/x.gguf" },
      undefined,
      /none is registered/,
    ],
    [
      "gguf_file ../../etc/shadow",
      { ...CARD, gguf_file: "../../etc/shadow" },
      CARD,
      /gguf_file .* leaves the model's folder/,
    ],
    ["an absolute gguf_file", { ...CARD, gguf_file: "/etc/shadow" }, CARD, /leaves the model's folder/],
    ["a model id of ..", { ...CARD, model_id: "..", gguf_file: "x" }, undefined, /does not name a folder/],
    ["an absolute unregistered mmproj", { ...CARD, mmproj_file: "/etc/shadow" }, CARD, /mmproj_file/],
  ])("refuses %s", (_, card, reg, why) => {
    expect(modelPathRefusal(card as ModelCard, reg as ModelCard | undefined, "/data/models")).toMatch(why);
  });
});

describe("a request's copy of the card", () => {
  const wire = cardToWire(CARD) as Record<string, unknown>;
  it("agrees when it is the catalogue's, in either spelling or in part", () => {
    expect(cardDifference(wire, CARD)).toBeNull();
    expect(
      cardDifference({
        model_id: "org/tiny",
        n_layers: 4,
        hidden_size: 64,
        supports_tensor: false,
        tasks: ["TextGeneration"],
      }, CARD),
    )
      .toBeNull();
  });

  it.each([
    ["a gguf_path", { ...wire, ggufPath: "/etc/shadow" }, "ggufPath"],
    ["a gguf_file", { ...wire, gguf_file: "other.gguf" }, "ggufFile"],
    // The card schema itself refuses a path that leaves the model's folder (src/security/ids.ts).
    ["a gguf_file that leaves its folder", { ...wire, gguf_file: "../../../etc/shadow" }, "*"],
    ["a layer count", { ...wire, nLayers: 9 }, "nLayers"],
    ["no valid card", { modelId: "org/tiny" }, "*"],
  ])("names the field when it differs in %s", (_, raw, field) => {
    expect(cardDifference(raw, CARD)).toBe(field);
  });
});
