/**
 * Helpers for tests that place models on real nodes: a card for a local GGUF in wire form, a
 * single-node instance, and polling /state until a condition holds (with a generous deadline).
 */
import type { Instance } from "../../src/cluster/instances.ts";

export function localCardWire(modelId: string, ggufPath: string, extra: Record<string, unknown> = {}) {
  const size = Deno.statSync(ggufPath).size;
  return {
    modelId,
    storageSize: { inBytes: size },
    nLayers: 4,
    hiddenSize: 64,
    supportsTensor: false,
    numKeyValueHeads: 2,
    tasks: ["TextGeneration"],
    family: "llama",
    quantization: "F16",
    baseModel: "tiny",
    ggufPath,
    capabilities: ["text"],
    contextLength: 4096,
    trustRemoteCode: false,
    placement: { compatibleBackends: ["llama_cpp-cpu"], backendPreference: ["llama_cpp-cpu"] },
    ...extra,
  };
}

export function singleNodeInstance(
  nodeId: string,
  card: { modelId: string },
  contextTokenLimit = 2048,
): Extract<Instance, { MlxRingInstance: unknown }> {
  const runnerId = crypto.randomUUID();
  return {
    MlxRingInstance: {
      instanceId: crypto.randomUUID(),
      shardAssignments: {
        modelId: card.modelId,
        runnerToShard: {
          [runnerId]: {
            PipelineShardMetadata: {
              modelCard: card,
              deviceRank: 0,
              worldSize: 1,
              resolvedBackend: "llama_cpp-cpu",
              immediateException: false,
              shouldTimeout: null,
              startLayer: 0,
              endLayer: 4,
              nLayers: 4,
            },
          },
        },
        nodeToRunner: { [nodeId]: runnerId },
      },
      contextTokenLimit,
      hostsByNode: {},
      ephemeralPort: 0,
    },
  };
}

// deno-lint-ignore no-explicit-any
export type WireState = Record<string, any>;

export async function waitForState(
  url: string,
  pred: (s: WireState) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<WireState> {
  const deadline = Date.now() + timeoutMs;
  let last: WireState = {};
  while (Date.now() < deadline) {
    last = await (await fetch(`${url}/state`)).json();
    if (pred(last)) return last;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`timed out waiting for ${what}; last runners: ${JSON.stringify(last.runners)}`);
}

export function runnerTag(s: WireState, runnerId: string): string | undefined {
  const st = s.runners?.[runnerId];
  return st ? Object.keys(st)[0] : undefined;
}

export function pidAlive(pid: number): boolean {
  try {
    return !/\) Z /.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

/** Places `card` on one node as a single-node instance and waits until its runner is ready; its runner id. */
export async function placeOnNode(
  node: { url: string; nodeId: string },
  card: { modelId: string },
  contextTokenLimit?: number,
  timeoutMs?: number,
): Promise<string> {
  const instance = singleNodeInstance(node.nodeId, card, contextTokenLimit);
  const res = await fetch(`${node.url}/instance`, { method: "POST", body: JSON.stringify({ instance }) });
  if (res.status !== 200) throw new Error(`POST /instance answered ${res.status}: ${await res.text()}`);
  const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
  await waitForState(
    node.url,
    (s) => runnerTag(s, runnerId) === "RunnerReady",
    `${card.modelId} to be ready`,
    timeoutMs,
  );
  return runnerId;
}
