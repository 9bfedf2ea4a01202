/**
 * Instances: create one fully specified (`POST /instance`), read and delete one. Placement by the planner
 * (`POST /place_instance`) lives with the planner in placement.ts; both end in an `InstanceCreated` event.
 */
import { Hono } from "hono";
import { z } from "zod";
import { makeEvent } from "../../cluster/events.ts";
import {
  type Instance,
  instanceBody,
  InstanceSchema,
  type PlacementRecord,
  type ShardMetadata,
} from "../../cluster/instances.ts";
import { untag } from "../../cluster/tagged.ts";
import { reportedAddresses } from "../../engines/bind-address.ts";
import { cardToWire } from "../../models/card.ts";
import { applyResolvedFacts, loadResolvedFacts } from "../../models/facts.ts";
import type { NodeContext } from "../../node/context.ts";
import { cardDifference, instanceProblem } from "../../placement/instance-check.ts";
import type { ApiEnv } from "../env.ts";
import { badRequest, notFound, readJson } from "../errors.ts";
import { describe } from "../openapi.ts";

const CreateInstanceBody = z.object({ instance: InstanceSchema }).strict();
const CommandResponse = z.object({ message: z.string(), command_id: z.string(), instance_id: z.string() });

describe({
  method: "post",
  path: "/instance",
  summary:
    "Create an instance from a fully specified (tagged) Instance of a catalogue model (400 naming the field that is wrong)",
  tag: "instances",
  body: CreateInstanceBody,
  response: CommandResponse,
});
describe({
  method: "get",
  path: "/instance/:instance_id",
  summary: "One instance (tagged), or 404",
  tag: "instances",
});
describe({
  method: "delete",
  path: "/instance/:instance_id",
  summary: "Delete an instance; its runners stop on every node",
  tag: "instances",
  response: CommandResponse,
});

/**
 * Checks an instance against what the cluster knows before it becomes an event, and returns it with the
 * catalogue's card in every shard: the body's copy of the card is never trusted (its gguf_path would be
 * the file llama-server opens).
 */
export async function checkedInstance(ctx: NodeContext, instance: Instance): Promise<Instance> {
  const body = instanceBody(instance);
  const card = ctx.catalog.get(body.shardAssignments.modelId);
  const problem = instanceProblem(instance, {
    card,
    addressesOf: (nodeId) => {
      const t = ctx.telemetry.get(nodeId);
      return t ? reportedAddresses(t.reading.network) : undefined;
    },
    instanceExists: (id) => Boolean(ctx.log.state.instances[id]),
  });
  if (problem || !card) throw badRequest(problem?.message ?? "unknown model", problem?.param);
  const placed = applyResolvedFacts(card, await loadResolvedFacts(ctx.store.db, card.model_id));
  const wire = cardToWire(placed);
  const [variant] = Object.keys(instance);
  const runnerToShard = Object.fromEntries(
    Object.entries(body.shardAssignments.runnerToShard).map(([runnerId, shard]) => {
      const [kind, meta] = Object.entries(shard)[0];
      const field = cardDifference(meta.modelCard, placed);
      if (field) {
        throw badRequest(
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

/** `placement`: the constraints `/place_instance` planned with, kept so healing places it the same way. */
export async function createInstance(ctx: NodeContext, proposed: Instance, placement?: PlacementRecord) {
  const instance = await checkedInstance(ctx, proposed);
  const event = makeEvent("InstanceCreated", { instance, ...(placement ? { placement } : {}) });
  await ctx.submit(event);
  const body = instanceBody(instance);
  return {
    message: "Command received.",
    command_id: untag(event).eventId,
    instance_id: body.instanceId,
    model_card: untag(Object.values(body.shardAssignments.runnerToShard)[0]).modelCard,
  };
}

export const instanceRoutes = new Hono<ApiEnv>()
  .post("/instance", async (c) => {
    const { instance } = await readJson(c, CreateInstanceBody);
    return c.json(await createInstance(c.var.node, instance));
  })
  .get("/instance/:id", (c) => {
    const inst = c.var.node.log.state.instances[c.req.param("id")];
    if (!inst) throw notFound(`instance ${c.req.param("id")} not found`);
    return c.json(inst);
  })
  .delete("/instance/:id", async (c) => {
    const id = c.req.param("id");
    if (!c.var.node.log.state.instances[id]) throw notFound(`instance ${id} not found`);
    const event = makeEvent("InstanceDeleted", { instanceId: id, reason: null });
    await c.var.node.submit(event);
    return c.json({ message: "Command received.", command_id: untag(event).eventId, instance_id: id });
  });
