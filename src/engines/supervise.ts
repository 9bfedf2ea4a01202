/**
 * The engine watchdog (`skulk engine supervise -- <engine>`): runs one engine, kills it when its own stdin
 * (a pipe the daemon holds open and never writes) reaches EOF because the daemon died, and passes SIGTERM
 * and SIGINT on so the daemon's normal stop works as if it had started the engine itself.
 */

/** The exit status a shell reports for a child killed by a signal. */
const SIGNAL_NUMBERS: Record<string, number> = { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

export async function runSupervisor(engine: string[], graceMs: number): Promise<number> {
  const [bin, ...args] = engine;
  let child: Deno.ChildProcess | null = null;
  /** A stop asked for before the engine was spawned is applied right after. */
  let asked: Deno.Signal | null = null;
  let escalation: ReturnType<typeof setTimeout> | undefined;
  const kill = (signal: Deno.Signal) => {
    try {
      child?.kill(signal);
    } catch { /* already gone */ }
  };
  const stopGently = (signal: Deno.Signal) => {
    asked ??= signal;
    kill(signal);
    // The daemon escalates to SIGKILL on this watchdog only after a longer grace, so the engine goes first.
    escalation ??= setTimeout(() => kill("SIGKILL"), graceMs);
  };
  const onTerm = () => stopGently("SIGTERM");
  const onInt = () => stopGently("SIGINT");
  // Listening before the spawn: a SIGTERM's default action would kill this watchdog and orphan the engine.
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onInt);
  let daemonGone = false;
  // EOF (or an error) on stdin: the daemon that held the pipe is gone; the engine goes at once.
  void (async () => {
    try {
      for await (const _ of Deno.stdin.readable) { /* the daemon never writes */ }
    } catch { /* a broken pipe means the same */ }
    daemonGone = true;
    kill("SIGKILL");
  })();
  child = new Deno.Command(bin, { args, stdin: "null", stdout: "inherit", stderr: "inherit" }).spawn();
  if (daemonGone) kill("SIGKILL");
  else if (asked) kill(asked);
  const status = await child.status;
  clearTimeout(escalation);
  Deno.removeSignalListener("SIGTERM", onTerm);
  Deno.removeSignalListener("SIGINT", onInt);
  return status.signal ? 128 + (SIGNAL_NUMBERS[status.signal] ?? 1) : status.code;
}
