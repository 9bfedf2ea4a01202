/**
 * `GET /node/runners`: what this node's engines are doing, for diagnosis: each runner's role in its
 * instance (single, a pool's driver or donor), phase, engine pid and command line, the head and tail of its log,
 * and its speculative decoding with the acceptance its engine counted.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { ApiEnv } from "../env.ts";
import { describe } from "../openapi.ts";
import { parseSpeculationMetrics, type SpeculationCounts } from "../../engines/speculation.ts";
import type { LocalRunner } from "../../worker/runner.ts";

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
  speculation: z.object({
    type: z.string(),
    source: z.enum(["card", "setting"]),
    nMax: z.number().nullable(),
    draftModel: z.string().nullable(),
    /** From the engine's counters since it started; null while it cannot be read. */
    draftTokens: z.number().nullable(),
    acceptedTokens: z.number().nullable(),
    /** accepted / drafted, null before the first draft. */
    acceptance: z.number().nullable(),
  }).nullable(),
});

async function speculationStatus(r: LocalRunner): Promise<z.infer<typeof RunnerInfo>["speculation"]> {
  const s = r.speculation;
  if (!s) return null;
  const counts = await speculationCounts(r);
  return {
    type: s.type,
    source: s.source,
    nMax: s.nMax,
    draftModel: s.draft ? `${s.draft.repo}/${s.draft.file}` : null,
    draftTokens: counts?.draftTokens ?? null,
    acceptedTokens: counts?.acceptedTokens ?? null,
    acceptance: counts && counts.draftTokens > 0 ? counts.acceptedTokens / counts.draftTokens : null,
  };
}

/** The engine's speculative counters, asked of its loopback /metrics with a short bound; null when unreadable. */
async function speculationCounts(r: LocalRunner): Promise<SpeculationCounts | null> {
  if (!r.baseUrl || r.phase !== "ready") return null;
  try {
    const res = await fetch(`${r.baseUrl}/metrics`, { signal: AbortSignal.timeout(1000) });
    return res.ok ? parseSpeculationMetrics(await res.text()) : (await res.body?.cancel(), null);
  } catch {
    return null;
  }
}

describe({
  method: "get",
  path: "/node/runners",
  summary: "This node's runners: role, phase, engine command line and the last lines of its log",
  tag: "node",
  query: { tail: "log lines per engine (default 50, at most 200)" },
  response: z.object({ nodeId: z.string(), runners: z.array(RunnerInfo) }),
});

export const runnerRoutes = new Hono<ApiEnv>().get("/node/runners", async (c) => {
  const n = Math.min(200, Math.max(0, Number(c.req.query("tail") ?? 50) || 0));
  const runners = await Promise.all((c.var.node.worker?.runners() ?? []).map(async (r) => ({
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
    speculation: await speculationStatus(r),
  })));
  return c.json({ nodeId: c.var.node.nodeId, runners });
});
