/**
 * The checks a fully specified instance (`POST /instance`) must pass before it becomes an event: ids,
 * the catalogue's model, shard shapes, ports in the engine band and donors' bind addresses. Pure.
 */
import { type Instance, instanceBody, type ShardMetadata } from "../cluster/instances.ts";
import { untag } from "../cluster/tagged.ts";
import { bindRefusal, parseIpLiteral } from "../engines/bind-address.ts";
import { PORT_BAND } from "../engines/ports.ts";
import { camel, cardToWire, type ModelCard, parseCard } from "../models/card.ts";
import { MAX_RPC_DONORS } from "./planner.ts";

/** What is wrong, and the field (a dotted path into the request body) that is. */
export interface InstanceProblem {
  param: string;
  message: string;
}

export interface InstanceFacts {
  /** The catalogue's card for the instance's model id (undefined: not in the catalogue). */
  card: ModelCard | undefined;
  /** The interface addresses a node's telemetry reports; undefined when the node is not in the cluster. */
  addressesOf: (nodeId: string) => string[] | undefined;
  /** Whether an instance with this id already exists. */
  instanceExists: (instanceId: string) => boolean;
}

/** Ids become map keys, log fields and SQLite rows: one short token, no path characters. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

function idProblem(id: string, param: string, what: string): InstanceProblem | null {
  return ID.test(id) ? null : {
    param,
    message: `${what} '${
      id.slice(0, 64)
    }' is not a well-formed id (1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit)`,
  };
}

const inBand = (port: number) => port >= PORT_BAND.first && port <= PORT_BAND.last;
const bandText = `${PORT_BAND.first}-${PORT_BAND.last}`;

/** How the driver names a donor: `ip:port`, an IPv6 address in brackets. */
export function rpcEndpoint(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

type Kind = "PipelineShardMetadata" | "TensorShardMetadata" | "RpcDonorShardMetadata";
const kindOf = (s: ShardMetadata) => Object.keys(s)[0] as Kind;

/** The first problem with the instance, or null when it may be created as it is. */
export function instanceProblem(instance: Instance, facts: InstanceFacts): InstanceProblem | null {
  const [variant] = Object.keys(instance);
  const body = instanceBody(instance);
  const at = `instance.${variant}`;
  const sa = body.shardAssignments;
  const problem = idProblem(body.instanceId, `${at}.instanceId`, "instance id");
  if (problem) return problem;
  if (facts.instanceExists(body.instanceId)) {
    return { param: `${at}.instanceId`, message: `instance ${body.instanceId} already exists` };
  }
  const card = facts.card;
  if (!card) {
    return {
      param: `${at}.shardAssignments.modelId`,
      message: `unknown model '${
        sa.modelId.slice(0, 128)
      }': an instance serves a catalogue model (GET /models; add a local GGUF with POST /models/add)`,
    };
  }
  if (variant === "MlxJacclInstance") {
    return {
      param: variant,
      message:
        "MlxJaccl needs MLX over RDMA, which this cluster lacks; send an MlxRingInstance or LlamaRpcInstance",
    };
  }

  const runners = Object.keys(sa.runnerToShard);
  if (runners.length === 0) {
    return { param: `${at}.shardAssignments.runnerToShard`, message: "the instance has no runners" };
  }
  const nodeOf = new Map<string, string>();
  for (const [nodeId, runnerId] of Object.entries(sa.nodeToRunner)) {
    const p = idProblem(nodeId, `${at}.shardAssignments.nodeToRunner`, "node id") ??
      idProblem(runnerId, `${at}.shardAssignments.nodeToRunner.${nodeId}`, "runner id");
    if (p) return p;
    if (!sa.runnerToShard[runnerId]) {
      return {
        param: `${at}.shardAssignments.nodeToRunner.${nodeId}`,
        message: `node ${nodeId} is given runner ${runnerId}, which has no shard`,
      };
    }
    if (nodeOf.has(runnerId)) {
      return {
        param: `${at}.shardAssignments.nodeToRunner.${nodeId}`,
        message: `runner ${runnerId} is given to two nodes (${nodeOf.get(runnerId)} and ${nodeId})`,
      };
    }
    nodeOf.set(runnerId, nodeId);
    if (!facts.addressesOf(nodeId)) {
      return {
        param: `${at}.shardAssignments.nodeToRunner`,
        message: `node ${nodeId} is not part of this cluster`,
      };
    }
  }
  const world = runners.length;
  const ranks = new Set<number>();
  for (const runnerId of runners) {
    const shard = sa.runnerToShard[runnerId];
    const s = untag(shard);
    const here = `${at}.shardAssignments.runnerToShard.${runnerId}`;
    if (!nodeOf.has(runnerId)) {
      return { param: here, message: `runner ${runnerId} has a shard but no node (nodeToRunner)` };
    }
    if (s.modelCard.modelId !== sa.modelId) {
      return {
        param: `${here}.${kindOf(shard)}.modelCard.modelId`,
        message: `every shard's model must be the instance's model ${sa.modelId}`,
      };
    }
    const f = `${here}.${kindOf(shard)}`;
    if (s.worldSize !== world) {
      return {
        param: `${f}.worldSize`,
        message: `worldSize ${s.worldSize}, but the instance has ${world} runners`,
      };
    }
    if (s.deviceRank >= world || ranks.has(s.deviceRank)) {
      return {
        param: `${f}.deviceRank`,
        message: `deviceRank ${s.deviceRank} is out of range or taken (ranks are 0..${world - 1}, one each)`,
      };
    }
    ranks.add(s.deviceRank);
    if (s.nLayers !== card.n_layers) {
      return {
        param: `${f}.nLayers`,
        message: `nLayers ${s.nLayers}, but ${card.model_id} has ${card.n_layers}`,
      };
    }
    if (s.startLayer > s.endLayer || s.endLayer > card.n_layers) {
      return {
        param: `${f}.endLayer`,
        message: `layers ${s.startLayer}-${s.endLayer} are not a range within the model's ${card.n_layers}`,
      };
    }
  }
  return "LlamaRpcInstance" in instance
    ? poolProblem(instance.LlamaRpcInstance, nodeOf, card, facts, `${at}`)
    : ringProblem(body as Extract<Instance, { MlxRingInstance: unknown }>["MlxRingInstance"], card, at);
}

/** A ring or single node: pipeline shards that cover the model once in rank order, or tensor shards. */
function ringProblem(
  body: Extract<Instance, { MlxRingInstance: unknown }>["MlxRingInstance"],
  card: ModelCard,
  at: string,
): InstanceProblem | null {
  const shards = Object.entries(body.shardAssignments.runnerToShard);
  const kinds = new Set(shards.map(([, s]) => kindOf(s)));
  if (kinds.has("RpcDonorShardMetadata") || kinds.size > 1) {
    return {
      param: `${at}.shardAssignments.runnerToShard`,
      message: "an MlxRingInstance's shards are all PipelineShardMetadata or all TensorShardMetadata",
    };
  }
  const ordered = shards.map(([id, s]) => ({ id, ...untag(s) })).sort((a, b) => a.deviceRank - b.deviceRank);
  let next = 0;
  for (const s of ordered) {
    const param = `${at}.shardAssignments.runnerToShard.${s.id}`;
    if (kinds.has("TensorShardMetadata")) {
      if (s.startLayer !== 0 || s.endLayer !== card.n_layers) {
        return { param, message: `a tensor shard holds every layer (0-${card.n_layers})` };
      }
      continue;
    }
    if (s.startLayer !== next || s.endLayer <= s.startLayer) {
      return {
        param,
        message:
          `rank ${s.deviceRank} holds layers ${s.startLayer}-${s.endLayer}; pipeline shards must be non-empty, ` +
          `contiguous and not overlap (this one must start at layer ${next})`,
      };
    }
    next = s.endLayer;
  }
  if (kinds.has("PipelineShardMetadata") && next !== card.n_layers) {
    return {
      param: `${at}.shardAssignments.runnerToShard`,
      message: `the shards cover layers 0-${next} of ${card.model_id}'s ${card.n_layers}`,
    };
  }
  for (const [node, hosts] of Object.entries(body.hostsByNode)) {
    if (!body.shardAssignments.nodeToRunner[node]) {
      return { param: `${at}.hostsByNode`, message: `hostsByNode names node ${node}, which has no runner` };
    }
    const bad = hosts.find((h) => !inBand(h.port));
    if (bad) {
      return {
        param: `${at}.hostsByNode.${node}`,
        message: `port ${bad.port} is outside the engine band ${bandText}`,
      };
    }
  }
  if (body.ephemeralPort !== 0 && !inBand(body.ephemeralPort)) {
    return {
      param: `${at}.ephemeralPort`,
      message: `ephemeralPort ${body.ephemeralPort} is outside the engine band ${bandText} (0 for none)`,
    };
  }
  return null;
}

/** A pool: the driver holds the whole model, each donor lends memory at one literal address of its own. */
function poolProblem(
  body: Extract<Instance, { LlamaRpcInstance: unknown }>["LlamaRpcInstance"],
  nodeOf: Map<string, string>,
  card: ModelCard,
  facts: InstanceFacts,
  at: string,
): InstanceProblem | null {
  const sa = body.shardAssignments;
  const driverRunner = sa.nodeToRunner[body.driverNode];
  if (!driverRunner) {
    return {
      param: `${at}.driverNode`,
      message: `driverNode ${body.driverNode} has no runner in the instance`,
    };
  }
  const donors = Object.keys(sa.nodeToRunner).filter((n) => n !== body.driverNode);
  if (donors.length > MAX_RPC_DONORS) {
    return {
      param: `${at}.donorEndpoints`,
      message: `${donors.length} donors; llama.cpp takes at most ${MAX_RPC_DONORS}`,
    };
  }
  const endpoints = new Set<string>();
  for (const [runnerId, shard] of Object.entries(sa.runnerToShard)) {
    const node = nodeOf.get(runnerId)!;
    const here = `${at}.shardAssignments.runnerToShard.${runnerId}.${kindOf(shard)}`;
    if (node === body.driverNode) {
      const s = untag(shard);
      if (kindOf(shard) !== "PipelineShardMetadata" || s.startLayer !== 0 || s.endLayer !== card.n_layers) {
        return {
          param: here,
          message: `the driver's shard is a PipelineShardMetadata holding every layer (0-${card.n_layers})`,
        };
      }
      continue;
    }
    if (!("RpcDonorShardMetadata" in shard)) {
      return {
        param: here,
        message: `node ${node} is not the driver, so its shard is an RpcDonorShardMetadata`,
      };
    }
    const d = shard.RpcDonorShardMetadata;
    if (d.startLayer !== d.endLayer) {
      return {
        param: `${here}.endLayer`,
        message: "a donor holds no layers of its own (startLayer = endLayer)",
      };
    }
    if (d.driverNode !== body.driverNode) {
      return { param: `${here}.driverNode`, message: `the donor's driverNode must be ${body.driverNode}` };
    }
    const unsafe = bindRefusal(d.rpcHost, facts.addressesOf(node) ?? [], `node ${node}`);
    if (unsafe) return { param: `${here}.rpcHost`, message: `rpcHost: ${unsafe}` };
    if (!inBand(d.rpcPort)) {
      return {
        param: `${here}.rpcPort`,
        message: `rpcPort ${d.rpcPort} is outside the engine band ${bandText}`,
      };
    }
    const host = (parseIpLiteral(d.rpcHost) as { address: string }).address;
    const endpoint = rpcEndpoint(host, d.rpcPort);
    if (body.donorEndpoints[node] !== endpoint) {
      return {
        param: `${at}.donorEndpoints`,
        message: `donorEndpoints must give node ${node} as ${endpoint}, its shard's rpcHost:rpcPort`,
      };
    }
    if (endpoints.has(endpoint)) {
      return { param: `${here}.rpcPort`, message: `two donors share the endpoint ${endpoint}` };
    }
    endpoints.add(endpoint);
  }
  const extra = Object.keys(body.donorEndpoints).find((n) => !donors.includes(n));
  if (extra) {
    return {
      param: `${at}.donorEndpoints`,
      message: `donorEndpoints names node ${extra}, which is not a donor`,
    };
  }
  return null;
}

/** JSON with object keys sorted, so two equal cards compare equal however their keys were ordered. */
function canonical(v: unknown): string {
  return JSON.stringify(
    v,
    (_, x) =>
      x && typeof x === "object" && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)))
        : x,
  );
}

/**
 * Null when the card a request carries agrees with the catalogue's on every field it sets (either
 * spelling); otherwise the first field that differs (`*` when it is no valid card at all). The body's
 * copy is never used: a differing one is refused so a client learns its card was not what runs.
 */
export function cardDifference(raw: Record<string, unknown>, catalogue: ModelCard): string | null {
  let mine: Record<string, unknown>;
  try {
    mine = cardToWire(parseCard(raw));
  } catch {
    return "*";
  }
  const theirs = cardToWire(catalogue) as Record<string, unknown>;
  for (const key of Object.keys(raw).map(camel)) {
    if (canonical(mine[key]) !== canonical(theirs[key])) return key;
  }
  return null;
}
