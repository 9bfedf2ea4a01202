/**
 * Engines die with their node: how an engine is launched so that the daemon's death (kill -9 included)
 * takes it along within seconds, per OS, and how a recorded command line is recognised as ours later.
 *
 * Linux: `setpriv --pdeathsig KILL -- <engine>` (util-linux). The kernel sends SIGKILL to the engine when
 * the thread that forked it exits; Deno spawns on the main JS thread (measured: 25 children spawned after
 * timers, fetches, file reads and microtasks all outlived 18 s of idleness, past tokio's 10 s worker
 * keep-alive), so that is the daemon's death. setpriv execs the engine: same pid, no extra process.
 * Elsewhere (macOS has no parent-death signal), or where setpriv is missing: this program re-executed as
 * `skulk engine supervise -- <engine>`, a watchdog that holds a pipe from the daemon and kills the engine
 * when it reads EOF (the daemon is gone), and forwards SIGTERM so a normal stop is unchanged.
 */
import { z } from "zod";
import { selfProgram } from "../node/self.ts";

/** `off` launches engines bare: only the reaping at the next start stops what a killed daemon left. */
export const LifelineModeSchema = z.enum(["auto", "pdeathsig", "supervise", "off"]);
export type LifelineMode = z.infer<typeof LifelineModeSchema>;

export type Lifeline =
  | { kind: "none" }
  | { kind: "pdeathsig"; setpriv: string }
  /** `self` runs this program: the compiled executable, or deno with main.ts. */
  | { kind: "supervise"; self: string[] };

/** The hidden subcommand of the watchdog (src/cli/engine.ts). */
export const SUPERVISE_SUBCOMMAND = ["engine", "supervise"] as const;

/** Chooses the lifeline: parent-death signal where the OS and setpriv allow it, the watchdog otherwise. */
export function chooseLifeline(
  mode: LifelineMode,
  os: string,
  setpriv: string | null,
  self: string[],
): Lifeline {
  if (mode === "off") return { kind: "none" };
  if (mode !== "supervise" && os === "linux" && setpriv) return { kind: "pdeathsig", setpriv };
  return { kind: "supervise", self };
}

/** The argv that launches `engine` under the lifeline. */
export function launchArgv(lifeline: Lifeline, engine: string[], graceMs: number): string[] {
  if (lifeline.kind === "none") return engine;
  return lifeline.kind === "pdeathsig"
    ? [lifeline.setpriv, "--pdeathsig", "KILL", "--", ...engine]
    : [...lifeline.self, ...SUPERVISE_SUBCOMMAND, "--grace-ms", String(graceMs), "--", ...engine];
}

/** The engine's own argv inside a launched argv (after the wrapper's `--`), or the argv itself. */
export function engineArgv(launched: string[]): string[] {
  const wrapped = launched.some((a, i) =>
    (a === "--pdeathsig" && /setpriv$/.test(launched[0])) ||
    (a === SUPERVISE_SUBCOMMAND[1] && launched[i - 1] === SUPERVISE_SUBCOMMAND[0])
  );
  const dash = launched.indexOf("--");
  return wrapped && dash >= 0 ? launched.slice(dash + 1) : launched;
}

/**
 * Whether a running process is one we launched: its command line is the launched argv (the watchdog, or
 * setpriv before it execs) or the engine's own (setpriv has exec'd it). A reused pid runs something else.
 */
export function isOurs(launched: string[], running: string[] | null): boolean {
  if (!running || running.length === 0) return false;
  // Deno resolves a bare program name through PATH and passes the full path as argv[0].
  const sameProgram = (a: string, b: string) => a === b || (!a.includes("/") && b.endsWith(`/${a}`));
  const same = (a: string[]) =>
    a.length === running.length && sameProgram(a[0], running[0]) &&
    a.every((x, i) => i === 0 || x === running[i]);
  return same(launched) || same(engineArgv(launched));
}

/** setpriv on PATH (or the usual places), or null. */
export function findSetpriv(path = Deno.env.get("PATH") ?? ""): string | null {
  for (const dir of [...path.split(":").filter(Boolean), "/usr/bin", "/bin", "/usr/sbin", "/sbin"]) {
    try {
      if (Deno.statSync(`${dir}/setpriv`).isFile) return `${dir}/setpriv`;
    } catch { /* not here */ }
  }
  return null;
}

let mode: LifelineMode = "auto";
let chosen: Lifeline | null = null;

/** Set once by the worker from `node.engine_lifeline`; engines started later use it. */
export function configureLifeline(m: LifelineMode): void {
  mode = m;
  chosen = null;
}

/** This node's lifeline, chosen on first use. */
export function currentLifeline(): Lifeline {
  chosen ??= chooseLifeline(mode, Deno.build.os, findSetpriv(), selfProgram());
  return chosen;
}

/**
 * For short-lived children started per request (espeak-ng): the parent-death signal where it is free; no
 * watchdog (a program per utterance), as such a child ends anyway once the daemon's pipes close (stdin
 * EOF, then SIGPIPE on its first write).
 */
export function shortLivedArgv(engine: string[]): string[] {
  const l = currentLifeline();
  return l.kind === "pdeathsig" ? launchArgv(l, engine, 0) : engine;
}
