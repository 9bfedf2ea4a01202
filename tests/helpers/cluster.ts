/**
 * Helpers for tests that place models on real nodes: a card for a local GGUF in wire form, a
 * single-node instance, registering a card and posting an instance, and polling /state until a
 * condition holds (with a generous deadline).
 */
import { makeEvent } from "../../src/cluster/events.ts";
import { type Instance, instanceBody } from "../../src/cluster/instances.ts";
import { untag } from "../../src/cluster/tagged.ts";
import { type Daemon, startDaemon } from "./daemon.ts";
import { engineBinary } from "./models.ts";
import { signedPost, waitFor } from "./multinode.ts";

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
  card: { modelId: string; nLayers?: unknown },
  contextTokenLimit = 2048,
): Extract<Instance, { MlxRingInstance: unknown }> {
  const runnerId = crypto.randomUUID();
  // One node holds every layer of the card (POST /instance checks the range against the catalogue's card).
  const layers = typeof card.nLayers === "number" ? card.nLayers : 4;
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
              endLayer: layers,
              nLayers: layers,
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

interface Node {
  url: string;
}

/**
 * Puts a card in every node's catalogue the way a peer's `POST /models/add` does: a CustomModelCardAdded
 * event, signed with the cluster key (zero-config unless `secret`), handed to the master. Test cards for
 * engines /models/add cannot read (whisper, piper, espeak-ng) get into the catalogue this way.
 */
export async function registerCard(
  nodes: Node[],
  card: { modelId: string },
  o: { secret?: string; apiKey?: string } = {},
): Promise<void> {
  const event = makeEvent("CustomModelCardAdded", { modelCard: card });
  await waitFor(`the master to take the card ${card.modelId}`, async () => {
    for (const n of nodes) {
      const res = await signedPost(n.url, "submit", { event }, { secret: o.secret ?? null });
      await res.body?.cancel();
      if (res.ok) return true;
    }
    return false;
  });
  for (const n of nodes) {
    await waitFor(`${card.modelId} in the catalogue of ${n.url}`, async () => {
      const headers: HeadersInit = o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {};
      const r = await fetch(`${n.url}/models`, { headers });
      return (await r.text()).includes(`"${card.modelId}"`);
    });
  }
}

/**
 * `POST /instance` through `via` after registering the instance's card on `nodes` (via and the node that
 * runs it): the route serves catalogue models only.
 */
export async function postInstance(via: Node, instance: Instance, nodes: Node[] = [via]): Promise<Response> {
  const shard = Object.values(instanceBody(instance).shardAssignments.runnerToShard)[0];
  await registerCard(nodes.includes(via) ? nodes : [via, ...nodes], untag(shard).modelCard);
  return await fetch(`${via.url}/instance`, { method: "POST", body: JSON.stringify({ instance }) });
}

// deno-lint-ignore no-explicit-any
export type WireState = Record<string, any>;

/** A JSON POST to a node's API, given up after `timeoutMs` (a placement may wait on the master's queue). */
export const postJson = (url: string, path: string, body: unknown, timeoutMs = 60_000) =>
  fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });

export const stateOf = async (url: string): Promise<WireState> => await (await fetch(`${url}/state`)).json();

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

/**
 * Places a tiny model (a ready single-node instance of `ggufPath` as `modelId`, its card registered first) on a
 * node and waits, up to `timeoutMs` (the machine may be busy), for its runner to be ready; its runner id.
 */
export function placeReady(
  node: Node & { nodeId: string },
  modelId: string,
  ggufPath: string,
  ctx = 2048,
  timeoutMs = 180_000,
): Promise<string> {
  return placeOnNode(node, localCardWire(modelId, ggufPath), ctx, timeoutMs);
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
  const res = await postInstance(node, instance);
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

/**
 * Daemons that can run llama-server (mDNS off, so tests join them by --peer only); `killAll` in the file's
 * afterAll ends every one started.
 */
export function llamaNodes() {
  const running: Daemon[] = [];
  return {
    async start(args: string[] = []): Promise<Daemon> {
      const d = await startDaemon({
        args: ["--no-mdns", ...args],
        env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") },
      });
      running.push(d);
      return d;
    },
    killAll: () => Promise.all(running.map((d) => d.kill())),
  };
}
