/**
 * The router's shell on one node: gathers each ready instance's load (this node's running and queued
 * requests, plus those other nodes report), keeps the node's prefix-affinity memory and admission gates,
 * and asks the pure balancer (balance.ts) which instance takes a request.
 */
import type { ClusterState } from "../cluster/state.ts";
import type { TelemetryView } from "../cluster/telemetry.ts";
import type { Config } from "../config/schema.ts";
import { Admission } from "./admission.ts";
import { type Choice, chooseInstance, PrefixAffinity, prefixHashes, promptText } from "./balance.ts";
import { runningOf } from "./running.ts";
import { readyTargets, type TargetResult } from "./target.ts";

/**
 * Names the instance the forwarding node chose, so the driver uses it instead of choosing again. Read only
 * from a peer's forward (api/: a signed one when the node has an API key).
 */
export const INSTANCE_HEADER = "x-skulk-instance";

/** What routing needs of the node. */
export interface RouterContext {
  nodeId: string;
  log: { readonly state: ClusterState };
  telemetry: Pick<TelemetryView, "entries">;
  config: Pick<Config, "llamaParallel" | "queueDepth" | "prefixAffinity">;
}

interface NodeRouting {
  affinity: PrefixAffinity;
  admission: Admission;
  turn: number;
}

const byNode = new WeakMap<object, NodeRouting>();

function routingOf(ctx: RouterContext): NodeRouting {
  let r = byNode.get(ctx);
  if (!r) {
    r = {
      affinity: new PrefixAffinity(),
      admission: new Admission(ctx.config.llamaParallel, ctx.config.queueDepth),
      turn: 0,
    };
    byNode.set(ctx, r);
  }
  return r;
}

/** The node's admission gates (one per instance it drives). */
export function admissionOf(ctx: RouterContext): Admission {
  return routingOf(ctx).admission;
}

/**
 * Requests per instance as this node knows them: its own (running or queued here, or forwarded by it and
 * still open) and the ones other nodes report running for other owners, each command counted once.
 */
export function instanceLoads(ctx: RouterContext): Map<string, number> {
  const seen = new Set<string>();
  const loads = new Map<string, number>();
  const count = (commandId: string, instanceId: string) => {
    if (seen.has(commandId)) return;
    seen.add(commandId);
    loads.set(instanceId, (loads.get(instanceId) ?? 0) + 1);
  };
  for (const r of runningOf(ctx).all()) count(r.commandId, r.instanceId);
  for (const [node, e] of ctx.telemetry.entries()) {
    if (node === ctx.nodeId) continue;
    // A request this node owns is running exactly while its own registry holds it: a peer's reading lags
    // (it reports each telemetry round), and a stale entry would push a conversation off its instance.
    for (const r of e.reading.running ?? []) if (r.ownerNode !== ctx.nodeId) count(r.commandId, r.instanceId);
  }
  return loads;
}

export type RouteChoice = TargetResult & { why?: Choice["why"] | "pinned" };

/**
 * The instance that serves a request for `model` whose body is `raw`. `pinned`: the instance a peer chose
 * and forwarded here, used as it is (never re-chosen, so two nodes' views cannot bounce a request).
 */
export function routeRequest(ctx: RouterContext, model: string, raw: string, pinned?: string): RouteChoice {
  const r = readyTargets(ctx.log.state, model);
  if (!r.ok) return r;
  if (pinned !== undefined) {
    const t = r.targets.find((x) => x.instanceId === pinned && x.driverNode === ctx.nodeId);
    if (!t) {
      return {
        ok: false,
        status: 503,
        message:
          `instance ${pinned} of ${model}, chosen by the node that forwarded this request, is not ready on this node`,
      };
    }
    return { ok: true, target: t, why: "pinned" };
  }
  const routing = routingOf(ctx);
  const hashes = ctx.config.prefixAffinity ? prefixHashes(promptText(raw)) : [];
  const loads = instanceLoads(ctx);
  const choice = chooseInstance({
    candidates: r.targets.map((target) => ({ target, load: loads.get(target.instanceId) ?? 0 })),
    slots: ctx.config.llamaParallel,
    slack: Math.max(1, Math.floor(ctx.config.llamaParallel / 2)),
    affine: hashes.length ? routing.affinity.lookup(hashes) : undefined,
    turn: routing.turn++,
  })!;
  if (hashes.length) routing.affinity.record(hashes, choice.target.instanceId);
  return { ok: true, target: choice.target, why: choice.why };
}
