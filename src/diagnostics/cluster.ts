/**
 * Diagnostics across the cluster: every node asked over the signed peer route at once, each answer checked
 * against its shape; a node that does not answer is named with its error, the rest still answered.
 */
import type { z } from "zod";
import { PeerError } from "../cluster/peers.ts";
import type { NodeContext } from "../node/context.ts";
import { capture, nodeDiagnostics, runnerSynopses } from "./node.ts";
import { type FlightEntry, mergeTimelines } from "./recorder.ts";
import {
  CaptureSchema,
  type ClusterDiagnosticsSchema,
  NodeDiagnosticsSchema,
  type PeerDiagRequest,
  type Timeline,
  type Unreachable,
} from "./shapes.ts";
import { FlightEntrySchema } from "./recorder.ts";

/** How long a fan-out waits for one node (upstream: 5 s). */
export const PEER_TIMEOUT_MS = 5000;

export class UnknownNode extends Error {
  constructor(nodeId: string) {
    super(`no node ${nodeId} in this cluster`);
    this.name = "UnknownNode";
  }
}

/** The other node answered that what was asked of it does not exist there (a runner it does not run). */
export class NotOnNode extends Error {
  constructor(readonly nodeId: string, reason: string) {
    super(`node ${nodeId}: ${reason}`);
    this.name = "NotOnNode";
  }
}

export class NodeUnreachable extends Error {
  constructor(readonly nodeId: string, reason: string) {
    super(`node ${nodeId} did not answer: ${reason}`);
    this.name = "NodeUnreachable";
  }
}

/** What this node answers a peer's request (and its own routes use for itself). */
export async function localAnswer(ctx: NodeContext, req: PeerDiagRequest): Promise<unknown> {
  if (req.what === "node") return await nodeDiagnostics(ctx);
  if (req.what === "capture") return await capture(ctx, req.request);
  return ctx.flight?.entries({ sinceMs: req.sinceMs, limit: req.limit }) ?? [];
}

interface Peer {
  nodeId: string;
  url: string | null;
}

/** Every other node this one knows: those it gossips with, and voters of the state it has not heard yet. */
export function otherNodes(ctx: NodeContext): Peer[] {
  const seen = new Map<string, Peer>();
  for (const p of ctx.cluster?.view().peers ?? []) {
    seen.set(p.nodeId, { nodeId: p.nodeId, url: p.apiAddress ? `http://${p.apiAddress}` : null });
  }
  for (const v of ctx.log.state.voters ?? []) {
    if (v !== ctx.nodeId && !seen.has(v)) seen.set(v, { nodeId: v, url: null });
  }
  return [...seen.values()].sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1));
}

export function isKnownNode(ctx: NodeContext, nodeId: string): boolean {
  return nodeId === ctx.nodeId || otherNodes(ctx).some((p) => p.nodeId === nodeId);
}

async function ask<S extends z.ZodType>(
  ctx: NodeContext,
  nodeId: string,
  req: PeerDiagRequest,
  schema: S,
  timeoutMs = PEER_TIMEOUT_MS,
): Promise<z.infer<S>> {
  if (!ctx.cluster) throw new NodeUnreachable(nodeId, "this node runs no cluster plane");
  let answer: unknown;
  try {
    answer = await ctx.cluster.call(nodeId, "diagnostics", req, timeoutMs);
  } catch (e) {
    if (e instanceof PeerError && e.status === 404) {
      throw new NotOnNode(nodeId, /"message":"([^"]*)"/.exec(e.message)?.[1] ?? "not found");
    }
    throw new NodeUnreachable(nodeId, (e as Error).message);
  }
  const parsed = schema.safeParse(answer);
  if (!parsed.success) throw new NodeUnreachable(nodeId, "its answer is not in the diagnostics shape");
  return parsed.data;
}

/** One node's diagnostics: this node's own, or asked of the peer (unknown ids are refused first). */
export async function diagnosticsOf(ctx: NodeContext, nodeId: string) {
  if (nodeId === ctx.nodeId) return await nodeDiagnostics(ctx);
  if (!isKnownNode(ctx, nodeId)) throw new UnknownNode(nodeId);
  return await ask(ctx, nodeId, { what: "node" }, NodeDiagnosticsSchema);
}

export async function captureOf(
  ctx: NodeContext,
  nodeId: string,
  request: PeerDiagRequest & { what: "capture" },
) {
  if (nodeId === ctx.nodeId) return await capture(ctx, request.request);
  if (!isKnownNode(ctx, nodeId)) throw new UnknownNode(nodeId);
  // The capture samples for up to 10 s before it answers.
  return await ask(
    ctx,
    nodeId,
    request,
    CaptureSchema,
    PEER_TIMEOUT_MS + request.request.sampleDurationSeconds * 1000,
  );
}

export async function clusterDiagnostics(
  ctx: NodeContext,
): Promise<z.infer<typeof ClusterDiagnosticsSchema>> {
  const peers = otherNodes(ctx);
  const own = ctx.telemetry.get(ctx.nodeId)?.reading.apiAddress;
  const nodes = await Promise.all([
    nodeDiagnostics(ctx).then((diagnostics) => ({
      nodeId: ctx.nodeId,
      url: own ? `http://${own}` : null,
      ok: true,
      diagnostics,
    })),
    ...peers.map((p) =>
      ask(ctx, p.nodeId, { what: "node" }, NodeDiagnosticsSchema).then(
        (diagnostics) => ({ nodeId: p.nodeId, url: p.url, ok: true, diagnostics }),
        (e: Error) => ({ nodeId: p.nodeId, url: p.url, ok: false, error: e.message }),
      )
    ),
  ]);
  return {
    generatedAt: new Date().toISOString(),
    localNodeId: ctx.nodeId,
    masterNodeId: ctx.masterNodeId(),
    nodes,
  };
}

export interface TimelineQuery {
  sinceMs?: number;
  /** Entries asked of each node (its newest). */
  perNode: number;
  /** Entries in the merged answer (its newest). */
  limit: number;
}

export async function clusterTimeline(ctx: NodeContext, q: TimelineQuery): Promise<Timeline> {
  const req = { what: "timeline" as const, sinceMs: q.sinceMs, limit: q.perNode };
  const peers = otherNodes(ctx);
  const unreachable: Unreachable[] = [];
  const parts: FlightEntry[][] = [ctx.flight?.entries({ sinceMs: q.sinceMs, limit: q.perNode }) ?? []];
  await Promise.all(peers.map(async (p) => {
    try {
      parts.push(await ask(ctx, p.nodeId, req, FlightEntrySchema.array()));
    } catch (e) {
      unreachable.push({ nodeId: p.nodeId, url: p.url, error: (e as Error).message });
    }
  }));
  return {
    generatedAt: new Date().toISOString(),
    localNodeId: ctx.nodeId,
    masterNodeId: ctx.masterNodeId(),
    runners: runnerSynopses(ctx.log.state),
    timeline: mergeTimelines(parts, q.limit),
    nodes: [ctx.nodeId, ...peers.map((p) => p.nodeId)],
    unreachableNodes: unreachable.sort((a, b) => (a.nodeId < b.nodeId ? -1 : 1)),
  };
}
