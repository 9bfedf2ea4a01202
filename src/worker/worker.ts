/**
 * The worker plane: reconciles what runs on this node with the cluster state after every applied event.
 * It starts the engine each shard placed here needs (src/engines/dispatch.ts: llama-server, whisper-server,
 * espeak-ng), reports runner status as events, and notices a dead engine at once (the runner fails with
 * the engine's log tail; requests then fail fast).
 */
import type { ShardMetadata } from "../cluster/instances.ts";
import { instanceBody } from "../cluster/instances.ts";
import { makeEvent } from "../cluster/events.ts";
import { untag } from "../cluster/tagged.ts";
import type { Plane } from "../daemon/node.ts";
import { type EngineKind, prepareEngine } from "../engines/dispatch.ts";
import { EngineFailed, type EngineProcess } from "../engines/process.ts";
import { PortAllocator } from "../engines/ports.ts";
import { reapOrphans, sqliteRegistry } from "../engines/registry.ts";
import { logger } from "../log/mod.ts";
import { type ModelCard, parseCard } from "../models/card.ts";
import type { NodeContext } from "../node/context.ts";
import { type LocalPhase, planWorker, type WorkerAction } from "./plan.ts";
import { obtainModelFile } from "./model-files.ts";

const log = logger("worker");

/** Default serving context when a placement carries no limit (upstream caps GGUF serving at 8192). */
const DEFAULT_CONTEXT = 8192;

export interface LocalRunner {
  runnerId: string;
  instanceId: string;
  modelId: string;
  phase: LocalPhase;
  /** http://127.0.0.1:<port> of the engine, once it serves. */
  baseUrl: string | null;
  contextTokens: number;
  engine: EngineProcess | null;
  /** Why the runner failed, with the engine's log tail. */
  failure: string | null;
  /** Aborted when the runner is stopped: cancels its download or start. */
  abort: AbortController;
  /** Which engine serves it, once chosen. */
  engineKind?: EngineKind;
  /** The binary an engine run once per request uses (espeak-ng); such a runner has no baseUrl. */
  command?: string | null;
  /** The placed card (its audio section drives the speech routes). */
  card?: ModelCard;
}

export class Worker implements Plane {
  readonly name = "worker";
  readonly #runners = new Map<string, LocalRunner>();
  readonly #ports = new PortAllocator();
  #ctx!: NodeContext;
  #stopped = false;

  runner(runnerId: string): LocalRunner | undefined {
    return this.#runners.get(runnerId);
  }

  runners(): LocalRunner[] {
    return [...this.#runners.values()];
  }

  async start(ctx: NodeContext): Promise<void> {
    this.#ctx = ctx;
    const reaped = await reapOrphans(ctx.store.db);
    if (reaped > 0) log.warn("reaped {n} engine(s) left by a crashed daemon", { n: reaped });
    ctx.log.onApplied(() => this.reconcile());
    this.reconcile();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.runners().map((r) => this.#stopRunner(r, "node shutting down", false)));
  }

  /** Runs the plan against the current state. Synchronous: actions start work and return at once. */
  reconcile(): void {
    if (this.#stopped) return;
    const local = this.runners().map((r) => ({ runnerId: r.runnerId, instanceId: r.instanceId, phase: r.phase }));
    for (const a of planWorker(this.#ctx.log.state, this.#ctx.nodeId, local)) this.#execute(a);
  }

  #execute(a: WorkerAction): void {
    if (a.kind === "stop") {
      const r = this.#runners.get(a.runnerId);
      if (r) void this.#stopRunner(r, a.reason, true);
      return;
    }
    const body = instanceBody(a.instance);
    const runner: LocalRunner = {
      runnerId: a.runnerId,
      instanceId: a.instanceId,
      modelId: body.shardAssignments.modelId,
      phase: "starting",
      baseUrl: null,
      contextTokens: body.contextTokenLimit ?? DEFAULT_CONTEXT,
      engine: null,
      failure: null,
      abort: new AbortController(),
    };
    this.#runners.set(a.runnerId, runner);
    void this.#startRunner(runner, a.shard);
  }

  async #status(runnerId: string, status: Record<string, unknown>): Promise<void> {
    try {
      await this.#ctx.submit(makeEvent("RunnerStatusUpdated", { runnerId, runnerStatus: status }));
    } catch (e) {
      log.warn("could not report runner {runnerId} status: {error}", { runnerId, error: (e as Error).message });
    }
  }

  async #fail(runner: LocalRunner, message: string): Promise<void> {
    runner.phase = "failed";
    runner.failure = message;
    runner.baseUrl = null;
    log.error("runner {runnerId} ({model}) failed: {message}", { runnerId: runner.runnerId, model: runner.modelId, message });
    await this.#status(runner.runnerId, { RunnerFailed: { errorMessage: message } });
  }

  async #startRunner(runner: LocalRunner, shard: ShardMetadata): Promise<void> {
    // Read through a function: the phase changes under us while we await (a stop can arrive).
    const phase = (): LocalPhase => runner.phase;
    const meta = untag(shard);
    let card: ModelCard;
    try {
      card = parseCard(meta.modelCard);
    } catch (e) {
      return this.#fail(runner, `the placement's model card is invalid: ${(e as Error).message}`);
    }
    await this.#status(runner.runnerId, { RunnerLoading: { layersLoaded: 0, totalLayers: meta.nLayers } });
    const prepared = await prepareEngine(card, runner.contextTokens, () => obtainModelFile(this.#ctx, card, shard, runner.abort.signal));
    if ("error" in prepared) return this.#fail(runner, prepared.error);
    if (this.#stopped || phase() !== "starting") return;
    runner.engineKind = prepared.kind;
    runner.card = card;
    runner.command = prepared.command;
    if (!prepared.process) return this.#ready(runner, null);
    const port = this.#ports.allocate();
    const engine = prepared.process(port, sqliteRegistry(this.#ctx.store.db, { instanceId: runner.instanceId, runnerId: runner.runnerId, port }));
    runner.engine = engine;
    engine.onDeath((reason, tail) => {
      this.#ports.release(port);
      if (phase() === "stopping") return;
      void this.#fail(runner, `${reason}\n--- last lines of the engine's log ---\n${tail.slice(-15).join("\n")}`);
    });
    try {
      await engine.start();
    } catch (e) {
      this.#ports.release(port);
      if (phase() === "stopping") return;
      return this.#fail(runner, e instanceof EngineFailed ? e.message : `${prepared.kind} failed to start: ${(e as Error).message}`);
    }
    if (phase() !== "starting") return; // stopped while loading
    await this.#ready(runner, port);
  }

  async #ready(runner: LocalRunner, port: number | null): Promise<void> {
    runner.baseUrl = port === null ? null : `http://127.0.0.1:${port}`;
    runner.phase = "ready";
    log.info("runner {runnerId} serves {model} with {engine} on port {port}", {
      runnerId: runner.runnerId,
      model: runner.modelId,
      engine: runner.engineKind,
      port: port ?? "none (run per request)",
    });
    await this.#status(runner.runnerId, { RunnerLoaded: {} });
    await this.#status(runner.runnerId, { RunnerReady: {} });
  }

  async #stopRunner(runner: LocalRunner, reason: string, report: boolean): Promise<void> {
    runner.phase = "stopping";
    runner.baseUrl = null;
    runner.abort.abort();
    log.info("stopping runner {runnerId}: {reason}", { runnerId: runner.runnerId, reason });
    await runner.engine?.stop();
    this.#runners.delete(runner.runnerId);
    if (report && this.#ctx.log.state.runners[runner.runnerId]) {
      await this.#status(runner.runnerId, { RunnerShutdown: {} });
    }
  }
}
