/** The instance names users see: engine and node count from the wire instance, never the wire tag. */
import { describe, expect, it } from "vitest";
import type { Instance } from "../../src/cluster/instances.ts";
import { instanceName, placementKindName } from "../../src/engines/instance-name.ts";

const base = {
  storageSize: { inBytes: 1000 },
  nLayers: 4,
  hiddenSize: 64,
  supportsTensor: false,
  quantization: "F16",
  baseModel: "tiny",
  trustRemoteCode: false,
};
const llama = {
  ...base,
  modelId: "t/llama",
  tasks: ["TextGeneration"],
  family: "llama",
  ggufPath: "/m/llama.gguf",
  capabilities: ["text"],
  placement: { compatibleBackends: ["llama_cpp-cpu"], backendPreference: [] },
};
const whisper = {
  ...base,
  modelId: "t/whisper",
  tasks: ["SpeechToText"],
  family: "whisper",
  ggufPath: "/m/ggml-tiny.bin",
  capabilities: ["stt"],
  audio: { kind: "stt" },
  placement: { compatibleBackends: ["whisper_cpp"], backendPreference: [] },
};
const espeak = {
  ...base,
  modelId: "t/espeak",
  tasks: ["TextToSpeech"],
  family: "espeak",
  capabilities: ["tts"],
  audio: { kind: "tts" },
  placement: { compatibleBackends: ["espeak_ng"], backendPreference: [] },
};
const piper = { ...espeak, modelId: "t/piper", family: "piper", ggufPath: "/m/voice" };
const mlxPiper = { ...piper, placement: { compatibleBackends: ["mlx_audio"], backendPreference: [] } };

function shard(card: object, rank: number, world: number, extra: Record<string, unknown> = {}) {
  const body = {
    modelCard: card,
    deviceRank: rank,
    worldSize: world,
    resolvedBackend: null,
    immediateException: false,
    shouldTimeout: null,
    startLayer: 0,
    endLayer: 4,
    nLayers: 4,
    ...extra,
  };
  return "driverNode" in extra ? { RpcDonorShardMetadata: body } : { PipelineShardMetadata: body };
}

function ring(card: { modelId: string }, nodes: number): Instance {
  const ids = Array.from({ length: nodes }, (_, i) => i);
  return {
    MlxRingInstance: {
      instanceId: "i",
      shardAssignments: {
        modelId: card.modelId,
        runnerToShard: Object.fromEntries(ids.map((i) => [`r${i}`, shard(card, i, nodes)])),
        nodeToRunner: Object.fromEntries(ids.map((i) => [`n${i}`, `r${i}`])),
      },
      contextTokenLimit: null,
      hostsByNode: {},
      ephemeralPort: 0,
    },
  } as Instance;
}

function pool(card: { modelId: string }, nodes: number): Instance {
  const ids = Array.from({ length: nodes }, (_, i) => i);
  return {
    LlamaRpcInstance: {
      instanceId: "p",
      shardAssignments: {
        modelId: card.modelId,
        runnerToShard: Object.fromEntries(ids.map((i) => [
          `r${i}`,
          i === 0
            ? shard(card, 0, nodes)
            : shard(card, i, nodes, { driverNode: "n0", rpcHost: "h", rpcPort: 1 }),
        ])),
        nodeToRunner: Object.fromEntries(ids.map((i) => [`n${i}`, `r${i}`])),
      },
      contextTokenLimit: null,
      driverNode: "n0",
      donorEndpoints: {},
    },
  } as Instance;
}

describe("instanceName", () => {
  it.each([
    ["a llama.cpp instance on one node", ring(llama, 1), "llama.cpp on one node"],
    ["a llama.cpp pool of two", pool(llama, 2), "llama.cpp RPC pool of 2 nodes"],
    ["a llama.cpp pool of three", pool(llama, 3), "llama.cpp RPC pool of 3 nodes"],
    ["a pipeline over two nodes", ring(llama, 2), "llama.cpp split across 2 nodes"],
    ["a whisper.cpp transcriber", ring(whisper, 1), "whisper.cpp on one node"],
    ["an espeak-ng voice", ring(espeak, 1), "espeak-ng on one node"],
    ["a Piper voice", ring(piper, 1), "sherpa-onnx on one node"],
    ["an MLX-only voice", ring(mlxPiper, 1), "no engine of this build on one node"],
    ["an unreadable card", ring({ modelId: "t/broken" }, 1), "no engine of this build on one node"],
  ])("%s", (_what, instance, name) => {
    expect(instanceName(instance)).toBe(name);
  });

  it("never shows a wire tag", () => {
    for (const i of [ring(llama, 1), pool(llama, 2)]) {
      expect(instanceName(i)).not.toMatch(/Instance|Mlx|Rpc[A-Z]/);
    }
  });
});

describe("placementKindName", () => {
  it.each([
    ["LlamaRpc", "an RPC pool (one llama.cpp driver, the other nodes lending memory)"],
    ["MlxRing", "one engine per node, layers split in a pipeline"],
    ["MlxJaccl", "a tensor-parallel group (Macs with MLX only)"],
    ["Other", "an unknown kind of instance"],
  ])("%s", (meta, words) => {
    expect(placementKindName(meta)).toBe(words);
  });
});
