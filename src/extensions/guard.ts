/**
 * Runs one extension hook under guard: a throw, a rejection or a run past its budget becomes an outcome to log
 * and count, never an exception into the serving path. A hook abandoned at its budget keeps running unobserved.
 */

export type Outcome<T> =
  | { kind: "ok"; value: T; ms: number }
  | { kind: "error"; error: unknown; ms: number }
  | { kind: "timeout"; ms: number };

/**
 * Calls `hook` and waits at most `budgetMs` for it. The timer is cleared when the hook settles first, so a fast
 * hook leaves nothing behind; a late settlement (or rejection) after the budget is swallowed.
 */
export function guarded<T>(hook: () => T | Promise<T>, budgetMs: number): Promise<Outcome<T>> {
  const t0 = performance.now();
  const ms = () => performance.now() - t0;
  let run: Promise<T>;
  try {
    // A synchronous throw is caught here; a synchronous value resolves at once.
    run = Promise.resolve(hook());
  } catch (error) {
    return Promise.resolve({ kind: "error", error, ms: ms() });
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ kind: "timeout", ms: ms() }), budgetMs);
    run.then(
      (value) => (clearTimeout(timer), resolve({ kind: "ok", value, ms: ms() })),
      (error) => (clearTimeout(timer), resolve({ kind: "error", error, ms: ms() })),
    );
  });
}

/** An error as one line for a log or a status: its message (or the thrown value) and nothing else. */
export function errorText(e: unknown): string {
  if (e instanceof Error) return `${e.name === "Error" ? "" : `${e.name}: `}${e.message}`;
  try {
    return typeof e === "string" ? e : JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}
