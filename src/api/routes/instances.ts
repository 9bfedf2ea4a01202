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
} from "../../cluster/instances.ts";
import { untag } from "../../cluster/tagged.ts";
import type { NodeContext } from "../../node/context.ts";
import type { ApiEnv } from "../env.ts";
import { badRequest, notFound, readJson } from "../errors.ts";
import { describe } from "../openapi.ts";

const CreateInstanceBody = z.object({ instance: InstanceSchema }).strict();
const CommandResponse = z.object({ message: z.string(), command_id: z.string(), instance_id: z.string() });

describe({
  method: "post",
  path: "/instance",
  summary: "Create an instance from a fully specified (tagged) Instance",
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

/** Checks an instance against what the cluster knows before it becomes an event. */
export function validateInstance(ctx: NodeContext, instance: Instance): void {
  const body = instanceBody(instance);
  if (ctx.log.state.instances[body.instanceId]) {
    throw badRequest(`instance ${body.instanceId} already exists`, "instance");
  }
  const runners = Object.keys(body.shardAssignments.runnerToShard);
  const mapped = Object.values(body.shardAssignments.nodeToRunner);
  if (runners.length === 0) {
    throw badRequest("instance has no runners (shardAssignments.runnerToShard is empty)", "instance");
  }
  for (const r of mapped) {
    if (!runners.includes(r)) {
      throw badRequest(`nodeToRunner names runner ${r}, which has no shard`, "instance");
    }
  }
  for (const nodeId of Object.keys(body.shardAssignments.nodeToRunner)) {
    if (!ctx.telemetry.get(nodeId)) {
      throw badRequest(`node ${nodeId} is not part of this cluster`, "instance");
    }
  }
  for (const shard of Object.values(body.shardAssignments.runnerToShard)) {
    if (untag(shard).modelCard.modelId !== body.shardAssignments.modelId) {
      throw badRequest("every shard's model card must be the instance's model", "instance");
    }
  }
}

/** `placement`: the constraints `/place_instance` planned with, kept so healing places it the same way. */
export async function createInstance(ctx: NodeContext, instance: Instance, placement?: PlacementRecord) {
  validateInstance(ctx, instance);
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
