/**
 * Instance use cases: place a model where the planner decides, create a fully specified instance, delete
 * one. The master decides (`decide*`, one command at a time); any node asks (`placeModel`, ...).
 */
import { makeEvent } from "../cluster/events.ts";
import {
  type Instance,
  instanceBody,
  type PlacementRecord,
  type ShardMetadata,
} from "../cluster/instances.ts";
import { untag } from "../cluster/tagged.ts";
import { reportedAddresses } from "../engines/bind-address.ts";
import { cardToWire, type ModelCard } from "../models/card.ts";
import { applyResolvedFacts, type HeaderFacts, type HubDeps, resolveFromHub } from "../models/facts.ts";
import { readGgufFacts } from "../models/gguf/reader.ts";
import { cardDifference, instanceProblem } from "../placement/instance-check.ts";
import { placeInstance, recordFor } from "../placement/planner.ts";
import { checkModelId } from "../security/ids.ts";
import { type Command, type CommandResult, PlaceRequestSchema, send } from "./commands.ts";
import { DomainError, Invalid, NotFound, NotReady, Pending, Refused } from "./errors.ts";
import { type Cards, type ClusterReads, type DecidePorts, type NodePorts, viewOf } from "./ports.ts";
import type { z } from "zod";

export type PlaceRequest = z.infer<typeof PlaceRequestSchema>;

/** Upstream waits this long for telemetry still gossiping before answering 503. */
export const PLACEMENT_INFO_WAIT_MS = 15_000;

/**
 * The header facts of a hub GGUF through HTTP Range, best effort: the size (HEAD) is what placement cannot do
 * without; a header the hub will not serve in ranges leaves the card's own shape in use.
 */
async function readHeader(url: string, headers: Record<string, string>): Promise<HeaderFacts> {
  try {
    const f = await readGgufFacts(url, { headers });
    return {
      blockCount: f.blockCount,
      headCount: f.headCount,
      headCountKv: f.headCountKv,
      headDim: f.headDim,
      contextLength: f.contextLength,
    };
  } catch {
    return {};
  }
}

/**
 * The card placement plans with: the catalogue's card with its recorded facts applied; a size the card
 * leaves open is resolved from the hub (`hub.endpoint`) on first contact and recorded for next time.
 */
export async function placementCard(
  cards: Cards,
  modelId: string | undefined,
  hub: Partial<HubDeps> = {},
): Promise<ModelCard> {
  if (!modelId) throw new Invalid("model_id is required", "model_id");
  const card = cards.card(checkModelId(modelId));
  if (!card) {
    throw new Invalid(
      `unknown model ${modelId}: add it with POST /models/add or pick one from GET /models`,
      "model_id",
    );
  }
  let facts = await cards.loadFacts(modelId);
  if (!card.storage_size && !facts && card.gguf_file) {
    const headers = cards.hubHeaders?.() ?? {};
    const withToken: typeof fetch = (input, init) =>
      fetch(input, { ...init, headers: { ...headers, ...Object.fromEntries(new Headers(init?.headers)) } });
    const deps: HubDeps = {
      endpoint: cards.hubEndpoint,
      fetch: withToken,
      timeoutMs: 10_000,
      readHeader: (url) => readHeader(url, headers),
      ...hub,
    };
    try {
      facts = await resolveFromHub(card, deps);
    } catch (e) {
      throw new Invalid(
        `the size of ${modelId} is not known yet and could not be resolved from ${deps.endpoint}: ${
          (e as Error).message
        }`,
        "model_id",
      );
    }
    await cards.recordFacts(modelId, facts, deps.endpoint);
  }
  return applyResolvedFacts(card, facts);
}

/**
 * Checks an instance against what the cluster knows before it becomes an event, and returns it with the
 * catalogue's card in every shard: the body's copy of the card is never trusted (its gguf_path would be
 * the file llama-server opens).
 */
export async function checkedInstance(p: ClusterReads & Cards, instance: Instance): Promise<Instance> {
  const body = instanceBody(instance);
  const card = p.card(body.shardAssignments.modelId);
  const problem = instanceProblem(instance, {
    card,
    addressesOf: (nodeId) => {
      const t = p.telemetryOf(nodeId);
      return t ? reportedAddresses(t.reading.network) : undefined;
    },
    instanceExists: (id) => Boolean(p.state().instances[id]),
  });
  if (problem || !card) throw new Invalid(problem?.message ?? "unknown model", problem?.param ?? null);
  const placed = applyResolvedFacts(card, await p.loadFacts(card.model_id));
  const wire = cardToWire(placed);
  const [variant] = Object.keys(instance);
  const runnerToShard = Object.fromEntries(
    Object.entries(body.shardAssignments.runnerToShard).map(([runnerId, shard]) => {
      const [kind, meta] = Object.entries(shard)[0];
      const field = cardDifference(meta.modelCard, placed);
      if (field) {
        throw new Invalid(
          field === "*"
            ? `runner ${runnerId}'s modelCard is not a valid model card`
            : `runner ${runnerId}'s modelCard differs from the catalogue's card for ${card.model_id} in ${field}; ` +
              `send the catalogue's card (GET /instance/placement?model_id=... shows it) or leave the field out`,
          `instance.${variant}.shardAssignments.runnerToShard.${runnerId}.${kind}.modelCard${
            field === "*" ? "" : `.${field}`
          }`,
        );
      }
      return [runnerId, { [kind]: { ...meta, modelCard: wire } } as ShardMetadata];
    }),
  );
  return {
    [variant]: { ...body, shardAssignments: { ...body.shardAssignments, runnerToShard } },
  } as Instance;
}

async function indexCreated(
  p: DecidePorts,
  proposed: Instance,
  placement?: PlacementRecord,
): Promise<CommandResult> {
  const instance = await checkedInstance(p, proposed);
  const event = makeEvent("InstanceCreated", { instance, ...(placement ? { placement } : {}) });
  const { idx } = await p.index(event);
  return { idx, event_id: untag(event).eventId, instance_id: instanceBody(instance).instanceId };
}

/**
 * Master: plans against its own state (which holds every instance earlier commands created, their memory
 * reserved until their engines load) and its freshest telemetry; a placement that does not fit is refused
 * with the planner's numbers, never indexed.
 */
export async function decidePlace(p: DecidePorts, body: PlaceRequest): Promise<CommandResult> {
  const card = await placementCard(p, body.model_id);
  const request = { ...body, required_nodes: [] };
  const r = placeInstance(viewOf(p), card, request);
  if (!("instance" in r)) throw r.pending ? new Pending(r.error) : new Refused(r.error);
  return await indexCreated(p, r.instance, recordFor(request));
}

export function decideCreate(p: DecidePorts, instance: Instance, placement?: PlacementRecord) {
  return indexCreated(p, instance, placement);
}

export async function decideDelete(p: DecidePorts, instanceId: string): Promise<CommandResult> {
  if (!p.state().instances[instanceId]) throw new NotFound(`instance ${instanceId} not found`);
  const event = makeEvent("InstanceDeleted", { instanceId, reason: null });
  const { idx } = await p.index(event);
  return { idx, event_id: untag(event).eventId, instance_id: instanceId };
}

/** What `POST /place_instance` and `POST /instance` answer (upstream's CreateInstanceResponse, plus the card). */
export interface Created {
  message: string;
  command_id: string;
  instance_id: string;
  model_card: Record<string, unknown> | undefined;
}

function created(p: NodePorts, r: CommandResult): Created {
  const instance = p.state().instances[r.instance_id!];
  const shard = instance && Object.values(instanceBody(instance).shardAssignments.runnerToShard)[0];
  return {
    message: "Command received.",
    command_id: r.event_id,
    instance_id: r.instance_id!,
    model_card: shard && untag(shard).modelCard,
  };
}

/**
 * Places a model where the master's planner decides. While the cluster has not reported enough to decide
 * (memory still gossiping) it asks again each second, up to PLACEMENT_INFO_WAIT_MS; each ask is one command.
 */
export async function placeModel(p: NodePorts, request: PlaceRequest): Promise<Created> {
  const command: Command = { kind: "place", request };
  const deadline = Date.now() + PLACEMENT_INFO_WAIT_MS;
  for (;;) {
    try {
      return created(p, await send(p.route, command));
    } catch (e) {
      // Pending comes from the master as data: match its kind, not its class.
      if (!(e instanceof DomainError && e.kind === "Pending")) throw e;
      if (Date.now() >= deadline) {
        throw new NotReady(`${e.message} (waited ${PLACEMENT_INFO_WAIT_MS / 1000}s)`);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** Creates a fully specified instance (`POST /instance`), checked by the master against its catalogue. */
export async function createInstance(p: NodePorts, instance: Instance): Promise<Created> {
  return created(p, await send(p.route, { kind: "create_instance", instance }));
}

export async function deleteInstance(p: NodePorts, instanceId: string) {
  const r = await send(p.route, { kind: "delete_instance", instance_id: instanceId });
  return { message: "Command received.", command_id: r.event_id, instance_id: instanceId };
}
