/**
 * The healing plane: on the master, turns each breakage of a pooled instance (an engine that died, a node
 * that timed out) into its teardown and re-placement events, one breakage at a time, in log order.
 */
import { eq } from "drizzle-orm";
import type { IndexedEvent } from "../cluster/events.ts";
import { makeEvent } from "../cluster/events.ts";
import { instanceBody } from "../cluster/instances.ts";
import { untag } from "../cluster/tagged.ts";
import { instances } from "../store/schema.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { Plane } from "../daemon/node.ts";
import { logger } from "../log/mod.ts";
import { parseCard } from "../models/card.ts";
import type { NodeContext } from "../node/context.ts";
import { placementRequest } from "../placement/planner.ts";
import {
  type Lineage as RecoveryLineage,
  lineageFor,
  recoverFromRefusal,
  type Refusal,
  refusalOf,
} from "../placement/recovery.ts";
import { buildClusterView } from "../placement/view.ts";
import {
  allReady,
  type Breakage,
  breakagesOf,
  decideHealing,
  type Lineage,
  lineageOfCreated,
  withoutInstance,
} from "./decide.ts";

const log = logger("healing");

export class Healer implements Plane {
  readonly name = "healing";
  readonly #lineage = new Map<string, Lineage>();
  /** Refusal-recovery lineages of instances this master placed after a refusal (kept in memory only). */
  readonly #recovery = new Map<string, RecoveryLineage>();
  #ctx!: NodeContext;
  #queue: Promise<void> = Promise.resolve();
  #stopped = false;

  /** What this master remembers of the instances it placed by healing (tests, diagnostics). */
  lineage(instanceId: string): Lineage | undefined {
    return this.#lineage.get(instanceId);
  }

  start(ctx: NodeContext): Promise<void> {
    this.#ctx = ctx;
    ctx.log.onApplied((ie, before, after) => this.#observe(ie, before, after));
    return Promise.resolve();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#queue;
  }

  #observe(ie: IndexedEvent, before: ClusterState, after: ClusterState): void {
    // Every node learns healed placements from the log, so a new master keeps counting attempts.
    const healed = lineageOfCreated(ie.event);
    if (healed) this.#lineage.set(healed.instanceId, healed.lineage);
    for (const [id, l] of this.#lineage) {
      if (!after.instances[id] && !before.instances[id]) this.#lineage.delete(id);
      else if (l.readySince === null && allReady(after, id)) l.readySince = Date.now();
    }
    // Followers see the same events; only the master acts, so each breakage is healed once.
    if (this.#stopped || this.#ctx.masterNodeId() !== this.#ctx.nodeId) return;
    const refusal = refusalOf(ie.event, after);
    if (refusal) {
      const lineage = this.#recovery.get(refusal.instanceId);
      this.#queue = this.#queue.then(() => this.#recover(refusal, lineage)).catch((e) => {
        log.error("recovering from the refusal of {instanceId} failed: {error}", {
          instanceId: refusal.instanceId,
          error: (e as Error).message,
        });
      });
    }
    const breakages = breakagesOf(ie.event, before, after, new Set(this.#lineage.keys()));
    // Never submit from inside the log's listener: the append that called us is still running.
    for (const b of breakages) {
      // Taken now: by the time the queue reaches it, later events may have dropped the entry.
      const lineage = this.#lineage.get(b.instanceId);
      this.#queue = this.#queue.then(() => this.#heal(b, lineage)).catch((e) => {
        log.error("healing {instanceId} failed: {error}", {
          instanceId: b.instanceId,
          error: (e as Error).message,
        });
      });
    }
  }

  /** A node refused its shard: place the model again without it (one node, else one node wider), bounded. */
  async #recover(r: Refusal & { instanceId: string }, known: RecoveryLineage | undefined): Promise<void> {
    const ctx = this.#ctx;
    if (this.#stopped || !ctx.log.state.instances[r.instanceId]) return;
    const body = instanceBody(r.instance);
    const card = parseCard(untag(Object.values(body.shardAssignments.runnerToShard)[0]).modelCard);
    const width = Object.keys(body.shardAssignments.nodeToRunner).length;
    const lineage = known ?? lineageFor(
      placementRequest(body.shardAssignments.modelId, {
        min_nodes: width,
        instance_meta: "LlamaRpcInstance" in r.instance ? "LlamaRpc" : "MlxRing",
      }),
    );
    const state = withoutInstance(ctx.log.state, r.instanceId);
    const view = buildClusterView(state, ctx.telemetry.entries(), Date.now(), {
      nodeTimeoutMs: ctx.config.nodeTimeout * 1000,
    });
    const d = recoverFromRefusal(r, lineage, view, card, { newId: () => crypto.randomUUID() });
    this.#recovery.delete(r.instanceId);
    log.warn("node {nodeId} refused its shard of {model}: {action}", {
      nodeId: r.nodeId,
      model: card.model_id,
      action: d.action,
    });
    await ctx.submit(makeEvent("InstanceDeleted", { instanceId: r.instanceId, reason: d.deleteReason }));
    if (d.action === "tear-down") return;
    this.#recovery.set(instanceBody(d.instance).instanceId, d.lineage);
    const placed = d.history.find((h) => h.outcome === "placed");
    await ctx.submit(
      makeEvent("InstanceCreated", { instance: d.instance, ...(placed ? { reason: placed.reason } : {}) }),
    );
  }

  async #heal(b: Breakage, lineage: Lineage | undefined): Promise<void> {
    const ctx = this.#ctx;
    if (this.#stopped) return;
    const state = ctx.log.state;
    if (!b.alreadyDeleted && !state.instances[b.instanceId]) return; // someone deleted it meanwhile
    const shard = Object.values(instanceBody(b.instance).shardAssignments.runnerToShard)[0];
    const card = parseCard(untag(shard).modelCard);
    const view = buildClusterView(withoutInstance(state, b.instanceId), ctx.telemetry.entries(), Date.now(), {
      nodeTimeoutMs: ctx.config.nodeTimeout * 1000,
    });
    const d = decideHealing(b, lineage, view, card, Date.now(), { newId: () => crypto.randomUUID() });
    this.#lineage.delete(b.instanceId);
    log.warn("instance {instanceId} broke ({reason}): {action}", {
      instanceId: b.instanceId,
      reason: b.reason,
      action: d.action,
    });
    if (d.deleteReason !== null) {
      await ctx.submit(makeEvent("InstanceDeleted", { instanceId: b.instanceId, reason: d.deleteReason }));
    }
    if (d.action === "give-up") {
      log.error("instance {instanceId} is not re-placed: {why}", { instanceId: b.instanceId, why: d.why });
      // A timed-out node's instance left with no event to carry the verdict: the master's history says it.
      if (d.deleteReason === null) {
        await ctx.store.db.update(instances).set({ reason: `${b.reason}; healing ${d.why}` })
          .where(eq(instances.id, b.instanceId));
      }
      return;
    }
    this.#lineage.set(instanceBody(d.instance).instanceId, d.lineage);
    await ctx.submit(makeEvent("InstanceCreated", { instance: d.instance, reason: d.createReason }));
  }
}
