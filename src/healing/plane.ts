/**
 * The healing plane: on the master, turns each breakage (a node that timed out, a pool's engine that
 * died, a single engine that failed) into relaunch, teardown and re-placement events, with backoff.
 */
import type { IndexedEvent } from "../cluster/events.ts";
import { makeEvent } from "../cluster/events.ts";
import { instanceBody } from "../cluster/instances.ts";
import { untag } from "../cluster/tagged.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { Plane } from "../node/plane.ts";
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
  decideRetry,
  joinedWorkers,
  type Lineage,
  lineageOfCreated,
  type PlacementFailure,
  type PlacementRecord,
  recordOf,
  withoutInstance,
} from "./decide.ts";
import { relaunchSteps, type Retirement } from "./relaunch.ts";

/** How often the master looks at lost instances awaiting a place (their own backoff spaces the tries). */
const RETRY_TICK_MS = 1000;

const log = logger("healing");

export class Healer implements Plane<NodeContext> {
  readonly name = "healing";
  readonly #lineage = new Map<string, Lineage>();
  /** Refusal-recovery lineages of instances this master placed after a refusal (kept in memory only). */
  readonly #recovery = new Map<string, RecoveryLineage>();
  #ctx!: NodeContext;
  #queue: Promise<void> = Promise.resolve();
  #stopped = false;
  #timer: ReturnType<typeof setInterval> | undefined;
  #retrying = false;
  #caughtUp = false;
  /** The worker nodes seen at the last retry tick (null until this node is master): joins trigger a retry. */
  #known: Set<string> | null = null;
  /** When each instance's engine was first seen failed, and first seen serving (relaunch.ts's clock). */
  readonly #failedAt = new Map<string, number>();
  readonly #readyAt = new Map<string, number>();
  #relaunching = false;

  /** What this master remembers of the instances it placed by healing (tests, diagnostics). */
  lineage(instanceId: string): Lineage | undefined {
    return this.#lineage.get(instanceId);
  }

  start(ctx: NodeContext): Promise<void> {
    this.#ctx = ctx;
    ctx.log.onApplied((ie, before, after) => this.#observe(ie, before, after));
    void ctx.whenCaughtUp().then(() => (this.#caughtUp = true));
    this.#timer = setInterval(() => this.#tick(), RETRY_TICK_MS);
    return Promise.resolve();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#queue;
  }

  /** Master, and past the start-up lead every node takes before it hears the real master. */
  #isMaster(): boolean {
    return !this.#stopped && this.#caughtUp && this.#ctx.masterNodeId() === this.#ctx.nodeId;
  }

  #view(state: ClusterState) {
    return buildClusterView(state, this.#ctx.telemetry.entries(), Date.now(), {
      nodeTimeoutMs: this.#ctx.config.nodeTimeout * 1000,
    });
  }

  /** Master: retries the lost instances whose time has come, and every one after a node joins. */
  #tick(): void {
    if (!this.#isMaster()) {
      this.#known = null;
      return;
    }
    if (this.#retrying) return;
    this.#relaunchTick();
    const view = this.#view(this.#ctx.log.state);
    const { workers, joined } = joinedWorkers(this.#known, view);
    this.#known = workers;
    const pending = Object.entries(this.#ctx.log.state.unplaced ?? {});
    if (pending.length === 0) return;
    this.#retrying = true;
    this.#queue = this.#queue.then(() => this.#inTurn(() => this.#retry(pending, joined))).catch((e) => {
      log.error("retrying lost instances failed: {error}", { error: (e as Error).message });
    }).finally(() => (this.#retrying = false));
  }

  async #retry(pending: [string, NonNullable<ClusterState["unplaced"]>[string]][], joined: string[]) {
    const ctx = this.#ctx;
    for (const [lostId, u] of pending) {
      if (!this.#isMaster() || !ctx.log.state.unplaced?.[lostId]) continue;
      const card = parseCard(
        untag(Object.values(instanceBody(u.instance).shardAssignments.runnerToShard)[0]).modelCard,
      );
      const d = decideRetry(lostId, u, this.#view(ctx.log.state), card, Date.now(), joined, this.#baseMs(), {
        newId: () => crypto.randomUUID(),
      });
      if (d === null) continue;
      if (d.action === "unplaced") {
        await this.#unplaced(d.failure);
        continue;
      }
      log.warn("lost instance {lostId} of {model} placed again: {reason}", {
        lostId,
        model: card.model_id,
        reason: d.createReason,
      });
      this.#note("replaced", d.createReason, lostId, card.model_id);
      this.#lineage.set(instanceBody(d.instance).instanceId, {
        attempts: d.placement.healAttempt,
        readySince: null,
      });
      await ctx.submit(
        makeEvent("InstanceCreated", {
          instance: d.instance,
          reason: d.createReason,
          placement: d.placement,
        }),
      );
    }
  }

  /** Master: relaunches failed single-node engines whose time has come, retires what their relaunch replaced. */
  #relaunchTick(): void {
    if (this.#relaunching) return;
    const now = Date.now();
    // A master that never saw a failure (it joined from a snapshot) starts its backoff clock now.
    const state = this.#ctx.log.state;
    for (const [id, inst] of Object.entries(state.instances)) {
      if (this.#failedAt.has(id)) continue;
      const runners = Object.keys(instanceBody(inst).shardAssignments.runnerToShard);
      if (runners.some((r) => state.runners[r] && "RunnerFailed" in state.runners[r])) {
        this.#failedAt.set(id, now);
      }
    }
    const clock = { failedAt: this.#failedAt, readyAt: this.#readyAt };
    const ids = { newId: () => crypto.randomUUID() };
    // A cheap look first: most ticks find nothing, and need not wait for a turn at the desk.
    if (relaunchSteps(state, now, clock, this.#baseMs(), ids.newId).length === 0) return;
    this.#relaunching = true;
    this.#queue = this.#queue.then(() => this.#inTurn(() => this.#relaunch(clock, ids.newId))).catch((e) => {
      log.error("relaunching failed engines failed: {error}", { error: (e as Error).message });
    }).finally(() => (this.#relaunching = false));
  }

  async #relaunch(clock: Parameters<typeof relaunchSteps>[2], newId: () => string): Promise<void> {
    const ctx = this.#ctx;
    if (!this.#isMaster()) return;
    // Decided again in turn: a command before it may have deleted or placed something.
    for (const step of relaunchSteps(ctx.log.state, Date.now(), clock, this.#baseMs(), newId)) {
      if (!this.#isMaster()) return;
      if (step.kind === "retire") {
        await this.#retire([step.retire]);
        continue;
      }
      await this.#retire(step.retire);
      if (step.kind === "move") {
        const { breakage, record } = step;
        await this.#heal(breakage, this.#lineage.get(breakage.instanceId), record);
        continue;
      }
      log.warn("engine of instance {failedId} failed: {reason}", {
        failedId: step.failedId,
        reason: step.createReason,
      });
      this.#note(
        "relaunch",
        step.createReason,
        step.failedId,
        instanceBody(step.instance).shardAssignments.modelId,
      );
      await ctx.submit(
        makeEvent("InstanceCreated", {
          instance: step.instance,
          reason: step.createReason,
          placement: step.placement,
        }),
      );
    }
  }

  async #retire(retire: Retirement[]): Promise<void> {
    for (const r of retire) {
      if (!this.#ctx.log.state.instances[r.instanceId]) continue;
      await this.#ctx.submit(makeEvent("InstanceDeleted", { instanceId: r.instanceId, reason: r.reason }));
    }
  }

  /** Keeps relaunch.ts's clock: first failure and first readiness of each instance's engine. */
  #clock(ie: IndexedEvent, after: ClusterState): void {
    for (const m of [this.#failedAt, this.#readyAt]) {
      for (const id of m.keys()) if (!after.instances[id]) m.delete(id);
    }
    if (!("RunnerStatusUpdated" in ie.event)) return;
    const { runnerId, runnerStatus } = ie.event.RunnerStatusUpdated;
    const into = "RunnerFailed" in runnerStatus
      ? this.#failedAt
      : "RunnerReady" in runnerStatus || "RunnerRunning" in runnerStatus
      ? this.#readyAt
      : null;
    if (!into) return;
    const id = Object.keys(after.instances).find((i) =>
      runnerId in instanceBody(after.instances[i]).shardAssignments.runnerToShard
    );
    if (id && !into.has(id)) into.set(id, Date.now());
  }

  /**
   * Healing decides where to place in turn with the master's commands (src/app/desk.ts), so a placement
   * by a client and one by healing never plan against the same free memory.
   */
  #inTurn(f: () => Promise<void>): Promise<void> {
    return this.#ctx.commands ? this.#ctx.commands.serial(f) : f();
  }

  /** A healing action in the flight recorder. */
  #note(event: string, detail: string, instanceId: string, modelId: string | null): void {
    this.#ctx.flight?.note({ source: "healing", event, detail, instanceId, modelId });
  }

  #baseMs(): number {
    return this.#ctx.config.healRetryBase * 1000;
  }

  async #unplaced(f: PlacementFailure): Promise<void> {
    const fields = { id: f.lostInstanceId, reason: f.reason };
    if (f.retryAt) log.warn("no place for lost instance {id}: {reason}", fields);
    else log.error("no place for lost instance {id}: {reason}", fields);
    this.#note("unplaced", f.reason, f.lostInstanceId, null);
    await this.#ctx.submit(makeEvent("PlacementFailed", { ...f }));
  }

  #observe(ie: IndexedEvent, before: ClusterState, after: ClusterState): void {
    this.#clock(ie, after);
    // Every node learns healed placements from the log, so a new master keeps counting attempts.
    const healed = lineageOfCreated(ie.event);
    if (healed) this.#lineage.set(healed.instanceId, healed.lineage);
    for (const [id, l] of this.#lineage) {
      if (!after.instances[id] && !before.instances[id]) this.#lineage.delete(id);
      else if (l.readySince === null && allReady(after, id)) l.readySince = Date.now();
    }
    // Followers see the same events; only the master acts, so each breakage is healed once.
    if (!this.#isMaster()) return;
    const refusal = refusalOf(ie.event, after);
    if (refusal) {
      const lineage = this.#recovery.get(refusal.instanceId);
      this.#queue = this.#queue.then(() => this.#inTurn(() => this.#recover(refusal, lineage))).catch((e) => {
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
      const record = recordOf(before, b.instanceId);
      this.#queue = this.#queue.then(() => this.#inTurn(() => this.#heal(b, lineage, record))).catch((e) => {
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
    this.#note(
      d.action,
      `node ${r.nodeId} refused its shard: ${d.deleteReason}`,
      r.instanceId,
      card.model_id,
    );
    await ctx.submit(makeEvent("InstanceDeleted", { instanceId: r.instanceId, reason: d.deleteReason }));
    if (d.action === "tear-down") return;
    this.#recovery.set(instanceBody(d.instance).instanceId, d.lineage);
    const placed = d.history.find((h) => h.outcome === "placed");
    await ctx.submit(
      makeEvent("InstanceCreated", { instance: d.instance, ...(placed ? { reason: placed.reason } : {}) }),
    );
  }

  async #heal(b: Breakage, lineage: Lineage | undefined, record: PlacementRecord): Promise<void> {
    const ctx = this.#ctx;
    if (this.#stopped) return;
    const state = ctx.log.state;
    if (!b.alreadyDeleted && !state.instances[b.instanceId]) return; // someone deleted it meanwhile
    const shard = Object.values(instanceBody(b.instance).shardAssignments.runnerToShard)[0];
    const card = parseCard(untag(shard).modelCard);
    const view = this.#view(withoutInstance(state, b.instanceId));
    const d = decideHealing(b, lineage, record, view, card, Date.now(), this.#baseMs(), {
      newId: () => crypto.randomUUID(),
    });
    this.#lineage.delete(b.instanceId);
    log.warn("instance {instanceId} broke ({reason}): {action}", {
      instanceId: b.instanceId,
      reason: b.reason,
      action: d.action,
    });
    this.#note(d.action, `instance broke (${b.reason})`, b.instanceId, card.model_id);
    if (d.deleteReason !== null) {
      await ctx.submit(makeEvent("InstanceDeleted", { instanceId: b.instanceId, reason: d.deleteReason }));
    }
    if (d.action === "unplaced") return await this.#unplaced(d.failure);
    this.#lineage.set(instanceBody(d.instance).instanceId, d.lineage);
    await ctx.submit(
      makeEvent("InstanceCreated", { instance: d.instance, reason: d.createReason, placement: d.placement }),
    );
  }
}
