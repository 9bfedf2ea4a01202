/**
 * The worker plane: reconciles what runs on this node with the cluster state after every applied event.
 * It starts the engine each shard placed here needs (src/engines/dispatch.ts: llama-server, whisper-server,
 * espeak-ng, sherpa-onnx; a pool's driver once its donors serve, a pool's donor ggml-rpc-server), reports runner status
 * as events, and notices a dead engine at once (the runner fails with the engine's log tail).
 */
import type { Instance, ShardMetadata } from "../cluster/instances.ts";
import { instanceBody } from "../cluster/instances.ts";
import { makeEvent } from "../cluster/events.ts";
import { withoutInstance } from "../cluster/state.ts";
import { untag } from "../cluster/tagged.ts";
import type { Plane } from "../node/plane.ts";
import { findEngines } from "../engines/discovery.ts";
import { prepareEngine } from "../engines/dispatch.ts";
import { bindRefusal, reportedAddresses } from "../engines/bind-address.ts";
import { rpcServerProcess } from "../engines/rpc-server.ts";
import { sherpaProcess } from "../engines/sherpa/engine.ts";
import { VadHost } from "../engines/sherpa/vad.ts";
import { engineSettings } from "../engines/settings.ts";
import { EngineFailed, type EngineProcess } from "../engines/process.ts";
import { PortAllocator } from "../engines/ports.ts";
import { configureLifeline } from "../engines/lifeline.ts";
import { reapOrphans, sqliteRegistry } from "../engines/registry.ts";
import { logger } from "../log/mod.ts";
import { modelPathRefusal, shardRefusal } from "../placement/shard-check.ts";
import { type ModelCard, parseCard } from "../models/card.ts";
import type { NodeContext } from "../node/context.ts";
import { type LocalPhase, planWorker, type WorkerAction } from "./plan.ts";
import type { LocalRunner } from "./runner.ts";
// The type's old home, for importers written before it moved to runner.ts.
export type { LocalRunner } from "./runner.ts";
import { modelsDir, obtainDraftFile, obtainModelDir, obtainModelFile } from "./model-files.ts";
import { poolRole, waitForDonors } from "./pooled.ts";

const log = logger("worker");

/** Default serving context when a placement carries no limit (upstream caps GGUF serving at 8192). */
const DEFAULT_CONTEXT = 8192;

export class Worker implements Plane<NodeContext> {
  readonly name = "worker";
  readonly #runners = new Map<string, LocalRunner>();
  readonly #ports = new PortAllocator();
  #ctx!: NodeContext;
  #stopped = false;
  /** False until the cluster plane says this node's state is current: a stale log starts nothing. */
  #caughtUp = false;
  #vad: VadHost | null = null;

  runner(runnerId: string): LocalRunner | undefined {
    return this.#runners.get(runnerId);
  }

  runners(): LocalRunner[] {
    return [...this.#runners.values()];
  }

  async start(ctx: NodeContext): Promise<void> {
    this.#ctx = ctx;
    configureLifeline(ctx.config.engineLifeline);
    const reaped = await reapOrphans(ctx.store.db);
    if (reaped > 0) log.warn("reaped {n} engine(s) left by a crashed daemon", { n: reaped });
    ctx.log.onApplied(() => this.reconcile());
    void ctx.whenCaughtUp().then(() => {
      this.#caughtUp = true;
      this.reconcile();
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all([
      ...this.runners().map((r) => this.#stopRunner(r, "node shutting down", false)),
      this.#vad?.stop(),
    ]);
  }

  /** The node's Silero VAD child (realtime sessions whose turn detection is `silero`), started on first use. */
  vad(): VadHost {
    this.#vad ??= new VadHost((model) => {
      const port = this.#ports.allocate();
      const engine = sherpaProcess(
        { port, config: { vad: { model } } },
        sqliteRegistry(this.#ctx.store.db, { port }),
      );
      engine.onDeath((reason) => log.warn("the Silero VAD child died: {reason}", { reason }));
      return { engine, port, release: () => this.#ports.release(port) };
    }, engineSettings(this.#ctx.config));
    return this.#vad;
  }

  /** Runs the plan against the current state. Synchronous: actions start work and return at once. */
  reconcile(): void {
    if (this.#stopped || !this.#caughtUp) return;
    const local = this.runners().map((r) => ({
      runnerId: r.runnerId,
      instanceId: r.instanceId,
      phase: r.phase,
    }));
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
      role: poolRole(a.instance, this.#ctx.nodeId, a.shard).kind,
      phase: "starting",
      baseUrl: null,
      contextTokens: body.contextTokenLimit ?? DEFAULT_CONTEXT,
      engine: null,
      failure: null,
      abort: new AbortController(),
    };
    this.#runners.set(a.runnerId, runner);
    this.#note(runner, "starting", `starting the ${runner.role} runner of instance ${a.instanceId}`);
    log.info("starting runner {runnerId} of instance {instanceId}", {
      runnerId: a.runnerId,
      instanceId: a.instanceId,
    });
    void this.#startRunner(runner, a.instance, a.shard);
  }

  async #status(runnerId: string, status: Record<string, unknown>): Promise<void> {
    try {
      await this.#ctx.submit(makeEvent("RunnerStatusUpdated", { runnerId, runnerStatus: status }));
    } catch (e) {
      log.warn("could not report runner {runnerId} status: {error}", {
        runnerId,
        error: (e as Error).message,
      });
    }
  }

  /** A runner's phase change in the flight recorder. */
  #note(runner: LocalRunner, event: string, detail: string): void {
    this.#ctx.flight?.note({
      source: "runner",
      event,
      detail,
      phase: runner.phase,
      runnerId: runner.runnerId,
      instanceId: runner.instanceId,
      modelId: runner.modelId,
      attrs: { role: runner.role },
    });
  }

  async #fail(runner: LocalRunner, message: string): Promise<void> {
    runner.phase = "failed";
    runner.failure = message;
    runner.baseUrl = null;
    this.#note(runner, "failed", message.split("\n")[0]);
    log.error("runner {runnerId} ({model}) failed: {message}", {
      runnerId: runner.runnerId,
      model: runner.modelId,
      message,
    });
    await this.#status(runner.runnerId, { RunnerFailed: { errorMessage: message } });
  }

  async #startRunner(runner: LocalRunner, instance: Instance, shard: ShardMetadata): Promise<void> {
    // Read through a function: the phase changes under us while we await (a stop can arrive).
    const phase = (): LocalPhase => runner.phase;
    const meta = untag(shard);
    let card: ModelCard;
    try {
      card = parseCard(meta.modelCard);
    } catch (e) {
      return this.#fail(runner, `the placement's model card is invalid: ${(e as Error).message}`);
    }
    // The API placed the catalogue's card; a forged or stale event may carry another: engines open only
    // this node's registered local models or files under its models dir.
    const badPath = modelPathRefusal(card, this.#ctx.catalog.get(card.model_id), modelsDir(this.#ctx.config));
    if (badPath) return this.#fail(runner, badPath);
    // This node's own word on the shard, before it loads or downloads anything: refuse what cannot fit.
    // Only a whole model is checked: a pool's shares follow the planner's proportional split, which
    // layer rounding can push a little past a node's exact lend; an engine that then cannot allocate
    // fails, and healing places the pool again.
    const self = this.#ctx.telemetry.get(this.#ctx.nodeId);
    const whole = "MlxRingInstance" in instance &&
      Object.keys(instanceBody(instance).shardAssignments.nodeToRunner).length === 1;
    const refusal = self && whole &&
      shardRefusal(
        withoutInstance(this.#ctx.log.state, runner.instanceId),
        self,
        card,
        1,
        runner.contextTokens,
        Date.now(),
        this.#ctx.config.nodeTimeout * 1000,
      );
    if (refusal) return this.#fail(runner, refusal);
    const role = poolRole(instance, this.#ctx.nodeId, shard);
    // Report first: a restarted node's state still says what its previous engine did.
    await this.#status(
      runner.runnerId,
      role.kind === "donor"
        ? { RunnerConnecting: {} }
        : { RunnerLoading: { layersLoaded: 0, totalLayers: meta.nLayers } },
    );
    if (role.kind === "donor") {
      // The API checked this address against this node's telemetry; check again here, against this
      // node's own reading now, so a forged or stale event never opens the unauthenticated RPC port.
      const unsafe = bindRefusal(role.host, reportedAddresses(self?.reading.network));
      if (unsafe) return this.#fail(runner, `ggml-rpc-server was not started: ${unsafe}`);
      const engines = await findEngines(engineSettings(this.#ctx.config));
      if (!engines.rpcServer) {
        return this.#fail(
          runner,
          "ggml-rpc-server was not found on this node: set SKULK_RPC_SERVER_BIN or run `skulk engine build`",
        );
      }
      // A donor holds no file: the driver sends it the tensors of its share over RPC.
      let engine: EngineProcess;
      try {
        engine = rpcServerProcess(
          { bin: engines.rpcServer, host: role.host, port: role.port },
          sqliteRegistry(this.#ctx.store.db, {
            instanceId: runner.instanceId,
            runnerId: runner.runnerId,
            port: role.port,
          }),
        );
      } catch (e) {
        return this.#fail(runner, (e as Error).message);
      }
      return this.#launch(
        runner,
        engine,
        null,
        `lends memory on ${role.host}:${role.port} to driver ${role.driverNode}`,
      );
    }
    const prepared = await prepareEngine(
      card,
      runner.contextTokens,
      {
        file: () => obtainModelFile(this.#ctx, card, shard, runner.abort.signal),
        dir: () => obtainModelDir(this.#ctx, card, shard, runner.abort.signal),
        draft: (d) => obtainDraftFile(this.#ctx, d, runner.abort.signal),
      },
      engineSettings(this.#ctx.config),
      // The load log then names each RPC device and its share ("RPC0[host:port] model buffer size").
      role.kind === "driver" ? { rpc: role.endpoints, verbosity: 4 } : {},
    );
    if ("error" in prepared) return this.#fail(runner, prepared.error);
    if (role.kind === "driver") {
      const why = await waitForDonors(
        () => this.#ctx.log.state,
        runner.instanceId,
        role.donorRunners,
        () => this.#stopped || phase() !== "starting",
      );
      if (this.#stopped || phase() !== "starting") return;
      if (why) return this.#fail(runner, `the pool's driver did not start: ${why}`);
    }
    if (this.#stopped || phase() !== "starting") return;
    runner.engineKind = prepared.kind;
    runner.card = card;
    runner.command = prepared.command;
    runner.voice = prepared.voice;
    runner.speculation = prepared.speculation;
    if (!prepared.process) {
      return this.#ready(runner, null, `serves ${runner.modelId} with ${prepared.kind}, run per request`);
    }
    const port = this.#ports.allocate();
    const engine = prepared.process(
      port,
      sqliteRegistry(this.#ctx.store.db, { instanceId: runner.instanceId, runnerId: runner.runnerId, port }),
    );
    const what = role.kind === "driver"
      ? `drives ${runner.modelId} over ${role.endpoints.join(", ")}`
      : `serves ${runner.modelId} with ${prepared.kind}`;
    return this.#launch(runner, engine, port, `${what} on port ${port}`);
  }

  /** Starts a prepared engine and reports the runner ready, or failed with the engine's log tail. */
  async #launch(
    runner: LocalRunner,
    engine: EngineProcess,
    port: number | null,
    what: string,
  ): Promise<void> {
    const phase = (): LocalPhase => runner.phase;
    const release = () => {
      if (port !== null) this.#ports.release(port);
    };
    if (this.#stopped || phase() !== "starting") return release(); // stopped before it began
    runner.engine = engine;
    engine.onDeath((reason, tail) => {
      release();
      this.#ctx.flight?.note({
        source: "engine",
        event: "exit",
        detail: `${engine.spec.kind} (pid ${engine.pid ?? "?"}): ${reason}`,
        phase: phase(),
        runnerId: runner.runnerId,
        instanceId: runner.instanceId,
        modelId: runner.modelId,
        attrs: { kind: engine.spec.kind, expected: phase() === "stopping" },
        logTail: tail,
      });
      if (phase() === "stopping") return;
      void this.#fail(
        runner,
        `${reason}\n--- last lines of the engine's log ---\n${tail.slice(-15).join("\n")}`,
      );
    });
    try {
      await engine.start();
    } catch (e) {
      release();
      if (phase() === "stopping") return;
      if (e instanceof EngineFailed) {
        this.#ctx.flight?.note({
          source: "engine",
          event: "start_failed",
          detail: `${engine.spec.kind}: ${e.message.split("\n")[0]}`,
          phase: phase(),
          runnerId: runner.runnerId,
          instanceId: runner.instanceId,
          modelId: runner.modelId,
          attrs: { kind: engine.spec.kind },
          logTail: e.logTail,
        });
      }
      return this.#fail(
        runner,
        e instanceof EngineFailed
          ? e.message
          : `${engine.spec.kind} failed to start: ${(e as Error).message}`,
      );
    }
    if (phase() !== "starting") return void (await engine.stop(1000)); // stopped while loading
    await this.#ready(runner, port, what);
  }

  async #ready(runner: LocalRunner, port: number | null, what: string): Promise<void> {
    runner.baseUrl = port === null ? null : `http://127.0.0.1:${port}`;
    runner.phase = "ready";
    this.#note(runner, "ready", what);
    log.info("runner {runnerId} {what}", { runnerId: runner.runnerId, what });
    await this.#status(runner.runnerId, { RunnerLoaded: {} });
    await this.#status(runner.runnerId, { RunnerReady: {} });
  }

  async #stopRunner(runner: LocalRunner, reason: string, report: boolean): Promise<void> {
    runner.phase = "stopping";
    runner.baseUrl = null;
    runner.abort.abort();
    this.#note(runner, "stopping", reason);
    // Requests still streaming from this engine end with this, not a bare connection error.
    runner.failure ??=
      `the instance was stopped while serving (${reason}); a healed placement serves again shortly`;
    log.info("stopping runner {runnerId}: {reason}", { runnerId: runner.runnerId, reason });
    // A pool's engines hold nothing worth a graceful exit, and in-flight requests should fail fast.
    await runner.engine?.stop(runner.role === "single" ? 5000 : 1000);
    this.#runners.delete(runner.runnerId);
    if (report && this.#ctx.log.state.runners[runner.runnerId]) {
      await this.#status(runner.runnerId, { RunnerShutdown: {} });
    }
  }
}
