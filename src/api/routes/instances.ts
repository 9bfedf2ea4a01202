/**
 * Instances: create one fully specified (`POST /instance`), read and delete one; the use cases are in
 * src/app/instances.ts (commands the master decides), as is placement by the planner (placement.ts).
 */
import { Hono } from "hono";
import { z } from "zod";
import { createInstance, deleteInstance } from "../../app/instances.ts";
import { nodePorts } from "../../app/ports.ts";
import { InstanceSchema } from "../../cluster/instances.ts";
import type { ApiEnv } from "../env.ts";
import { notFound, readJson } from "../errors.ts";
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

export const instanceRoutes = new Hono<ApiEnv>()
  .post("/instance", async (c) => {
    const { instance } = await readJson(c, CreateInstanceBody);
    return c.json(await createInstance(nodePorts(c.var.node), instance));
  })
  .get("/instance/:id", (c) => {
    const inst = c.var.node.log.state.instances[c.req.param("id")];
    if (!inst) throw notFound(`instance ${c.req.param("id")} not found`);
    return c.json(inst);
  })
  .delete("/instance/:id", async (c) => {
    const id = c.req.param("id");
    // Asked here first: an id this node never saw is a 404 without a trip to the master.
    if (!c.var.node.log.state.instances[id]) throw notFound(`instance ${id} not found`);
    return c.json(await deleteInstance(nodePorts(c.var.node), id));
  });
