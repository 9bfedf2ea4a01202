/**
 * `GET /node/runners`: what this node's engines are doing, for diagnosis: each runner's role in its
 * instance (single, a pool's driver or donor), phase, engine pid and command line, and the head and tail of its log.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { ApiEnv } from "../env.ts";
import { describe } from "../openapi.ts";

const RunnerInfo = z.object({
  runnerId: z.string(),
  instanceId: z.string(),
  modelId: z.string(),
  role: z.enum(["single", "driver", "donor"]),
  phase: z.string(),
  failure: z.string().nullable(),
  engine: z.object({
    kind: z.string(),
    pid: z.number().nullable(),
    command: z.array(z.string()),
    logHead: z.array(z.string()),
    logTail: z.array(z.string()),
  })
    .nullable(),
});

describe({
  method: "get",
  path: "/node/runners",
  summary: "This node's runners: role, phase, engine command line and the last lines of its log",
  tag: "node",
  query: { tail: "log lines per engine (default 50, at most 200)" },
  response: z.object({ nodeId: z.string(), runners: z.array(RunnerInfo) }),
});

export const runnerRoutes = new Hono<ApiEnv>().get("/node/runners", (c) => {
  const n = Math.min(200, Math.max(0, Number(c.req.query("tail") ?? 50) || 0));
  const runners = (c.var.node.worker?.runners() ?? []).map((r) => ({
    runnerId: r.runnerId,
    instanceId: r.instanceId,
    modelId: r.modelId,
    role: r.role,
    phase: r.phase,
    failure: r.failure,
    engine: r.engine && {
      kind: r.engine.spec.kind,
      pid: r.engine.pid,
      command: [r.engine.spec.bin, ...r.engine.spec.args],
      logHead: r.engine.head(),
      logTail: n ? r.engine.tail().slice(-n) : [],
    },
  }));
  return c.json({ nodeId: c.var.node.nodeId, runners });
});
