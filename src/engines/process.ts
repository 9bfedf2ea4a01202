/**
 * One supervised engine process (llama-server, ggml-rpc-server, ...): spawn, readiness probe with a
 * deadline, a tail of its log, death noticed at once (and a liveness probe for a wedged process), and
 * stop by SIGTERM then SIGKILL; launched under a lifeline (lifeline.ts) so it dies with the daemon, and its
 * pid recorded so a restarted daemon can reap what a crash left anyway.
 */
import { currentLifeline, launchArgv, type Lifeline } from "./lifeline.ts";

export interface EngineSpec {
  kind: string;
  bin: string;
  args: string[];
  env?: Record<string, string>;
  /** Resolves true once the engine serves; polled until the deadline. */
  probe: () => Promise<boolean>;
  readyDeadlineMs: number;
  /** Liveness probe cadence for a process that still runs but stopped answering. */
  livenessIntervalMs?: number;
  /** Probe for liveness when the readiness probe would disturb a serving engine; defaults to `probe`. */
  liveness?: () => Promise<boolean>;
  /** Consecutive failed liveness probes that count as death. */
  livenessFailures?: number;
}

/** True when GET `url` answers 200 within the timeout (an engine's readiness and liveness probe). */
export async function answersOk(url: string, timeoutMs = 1500): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return res.status === 200;
  } catch {
    return false;
  }
}

export class EngineFailed extends Error {
  constructor(message: string, readonly logTail: string[]) {
    super(
      logTail.length
        ? `${message}\n--- last lines of the engine's log ---\n${logTail.slice(-20).join("\n")}`
        : message,
    );
    this.name = "EngineFailed";
  }
}

export interface ProcessRegistry {
  /** `launched` is the argv actually spawned (the engine's, behind its lifeline wrapper). */
  record(pid: number, spec: EngineSpec, launched: string[]): Promise<void>;
  forget(pid: number): Promise<void>;
}

const TAIL_LINES = 200;
/** The start of the log says how the engine loaded (devices, buffers); kept apart from the rolling tail. */
const HEAD_LINES = 300;
/** The engine's time between SIGTERM and SIGKILL on stop. */
const STOP_GRACE_MS = 5000;
/** The watchdog passes SIGKILL on after its own grace; the daemon kills the watchdog only after this much more. */
const WATCHDOG_EXTRA_MS = 2000;

export class EngineProcess {
  readonly #tail: string[] = [];
  readonly #head: string[] = [];
  #child: Deno.ChildProcess | null = null;
  #status: Promise<Deno.CommandStatus> | null = null;
  #stopping = false;
  #liveness: ReturnType<typeof setInterval> | undefined;
  #deathListeners: ((reason: string, tail: string[]) => void)[] = [];
  #dead = false;

  #lifeline: Lifeline | null = null;

  constructor(
    readonly spec: EngineSpec,
    private readonly registry?: ProcessRegistry,
    private readonly lifeline?: Lifeline,
  ) {}

  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  tail(): string[] {
    return [...this.#tail];
  }

  /** The first lines the engine logged. */
  head(): string[] {
    return [...this.#head];
  }

  /** Called once when the process dies or stops answering, unless stop() was asked for. */
  onDeath(listener: (reason: string, tail: string[]) => void): void {
    this.#deathListeners.push(listener);
  }

  #push(text: string, partial: { s: string }) {
    const lines = (partial.s + text).split("\n");
    partial.s = lines.pop() ?? "";
    for (const l of lines) {
      if (this.#head.length < HEAD_LINES) this.#head.push(l);
      this.#tail.push(l);
      if (this.#tail.length > TAIL_LINES) this.#tail.shift();
    }
  }

  async #pump(stream: ReadableStream<Uint8Array>) {
    const dec = new TextDecoder();
    const partial = { s: "" };
    try {
      for await (const chunk of stream) this.#push(dec.decode(chunk, { stream: true }), partial);
    } catch { /* the stream ends with the process */ }
    if (partial.s) this.#push("\n", partial);
  }

  #die(reason: string) {
    if (this.#dead) return;
    this.#dead = true;
    clearInterval(this.#liveness);
    if (this.#stopping) return;
    for (const l of this.#deathListeners) l(reason, this.tail());
  }

  /** Spawns and waits until the probe answers; throws EngineFailed with the log tail otherwise. */
  async start(): Promise<void> {
    const { spec } = this;
    // Behind a wrapper a missing binary would only show as the wrapper's exit; say it plainly here.
    if (spec.bin.includes("/")) {
      try {
        Deno.statSync(spec.bin);
      } catch (e) {
        throw new EngineFailed(
          `${spec.kind} could not be started (${spec.bin}): ${(e as Error).message}`,
          [],
        );
      }
    }
    const lifeline = this.#lifeline = this.lifeline ?? currentLifeline();
    const launched = launchArgv(lifeline, [spec.bin, ...spec.args], STOP_GRACE_MS);
    try {
      this.#child = new Deno.Command(launched[0], {
        args: launched.slice(1),
        env: spec.env,
        // The watchdog's stdin is a pipe this process holds open and never writes: its EOF is our death.
        stdin: lifeline.kind === "supervise" ? "piped" : "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
    } catch (e) {
      throw new EngineFailed(`${spec.kind} could not be started (${spec.bin}): ${(e as Error).message}`, []);
    }
    const child = this.#child;
    void this.#pump(child.stdout);
    void this.#pump(child.stderr);
    await this.registry?.record(child.pid, spec, launched);
    this.#status = child.status.then(async (s) => {
      await this.registry?.forget(child.pid).catch(() => undefined);
      this.#die(
        s.signal ? `${spec.kind} was killed by ${s.signal}` : `${spec.kind} exited with code ${s.code}`,
      );
      return s;
    });
    const deadline = Date.now() + spec.readyDeadlineMs;
    let exited: Deno.CommandStatus | null = null;
    void this.#status.then((s) => (exited = s));
    while (Date.now() < deadline) {
      if (exited) break;
      if (await spec.probe().catch(() => false)) {
        this.#watch();
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const why = exited
      ? `${spec.kind} exited before it was ready (${
        (exited as Deno.CommandStatus).signal ?? `code ${(exited as Deno.CommandStatus).code}`
      })`
      : `${spec.kind} was not ready within ${Math.round(spec.readyDeadlineMs / 1000)} s`;
    this.#stopping = true; // a failed start is reported by this throw, not by death listeners
    await this.stop();
    await new Promise((r) => setTimeout(r, 50)); // let the pumps drain the last lines
    throw new EngineFailed(why, this.tail());
  }

  #watch() {
    const every = this.spec.livenessIntervalMs ?? 2000;
    const limit = this.spec.livenessFailures ?? 3;
    let failures = 0;
    let busy = false;
    this.#liveness = setInterval(async () => {
      if (busy || this.#dead) return;
      busy = true;
      try {
        const ok = await (this.spec.liveness ?? this.spec.probe)().catch(() => false);
        failures = ok ? 0 : failures + 1;
        if (failures >= limit) {
          this.#die(
            `${this.spec.kind} stopped answering (${limit} failed health checks ${every / 1000} s apart)`,
          );
          this.#stopping = true;
          void this.stop();
        }
      } finally {
        busy = false;
      }
    }, every);
  }

  /** SIGTERM, then SIGKILL after the grace period; resolves once the process is gone. */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#liveness);
    const child = this.#child;
    if (!child || !this.#status) return;
    try {
      child.kill("SIGTERM");
    } catch { /* already gone */ }
    const timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    }, this.#lifeline?.kind === "supervise" ? Math.max(graceMs, STOP_GRACE_MS) + WATCHDOG_EXTRA_MS : graceMs);
    await this.#status;
    clearTimeout(timer);
  }
}
