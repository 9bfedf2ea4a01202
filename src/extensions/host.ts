/**
 * The extensions a node runs: their chat hooks called in load order under guard (a copy of the request each,
 * a budget for onChatRequest, onChatResponse after the answer), per-extension counts and last error, teardown.
 */
import { logger } from "../log/mod.ts";
import {
  type ChatInfo,
  type ChatRequest,
  ChatRequestShape,
  type ChatResponse,
  type Extension,
  EXTENSION_API_VERSION,
  type ExtensionContext,
  type ExtensionsStatus,
  type Hook,
  type LoadedStatus,
  type RefusedStatus,
} from "./api.ts";
import { errorText, guarded, type Outcome } from "./guard.ts";

const log = logger("extensions");

/** An extension that passed its checks and its setup. */
export interface Running {
  ext: Extension;
  source: string;
  ctx: ExtensionContext;
}

export interface HostOptions {
  enabled: boolean;
  /** What onChatRequest may take, per extension, before the request goes on without it. */
  requestBudgetMs: number;
  /** What setup, onChatResponse and teardown may take before they are abandoned. */
  hookBudgetMs: number;
}

interface Stats {
  calls: { onChatRequest: number; onChatResponse: number };
  errors: number;
  timeouts: number;
  lastError: LoadedStatus["lastError"];
}

export class ExtensionHost {
  readonly #stats = new Map<Running, Stats>();
  readonly #pending = new Set<Promise<unknown>>();

  constructor(
    readonly running: Running[],
    readonly refused: RefusedStatus[],
    readonly opts: HostOptions,
  ) {
    for (const r of running) {
      this.#stats.set(r, {
        calls: { onChatRequest: 0, onChatResponse: 0 },
        errors: 0,
        timeouts: 0,
        lastError: null,
      });
    }
  }

  /** True when some extension transforms requests: only then does a request wait on the extensions. */
  get transformsRequests(): boolean {
    return this.running.some((r) => r.ext.onChatRequest);
  }

  get observesResponses(): boolean {
    return this.running.some((r) => r.ext.onChatResponse);
  }

  /**
   * Logs and counts a hook's failure; true when the hook succeeded. What failed is named with the extension, so
   * an operator can tell which one to fix or remove.
   */
  #judge<T>(r: Running, hook: Hook, out: Outcome<T>, budgetMs: number): out is Outcome<T> & { kind: "ok" } {
    if (out.kind === "ok") return true;
    const s = this.#stats.get(r)!;
    const message = out.kind === "timeout"
      ? `took longer than its ${budgetMs} ms budget and was abandoned`
      : errorText(out.error);
    if (out.kind === "timeout") s.timeouts++;
    else s.errors++;
    s.lastError = { hook, message, at: new Date().toISOString() };
    log.error("extension {name}: {hook} failed: {error}", { name: r.ext.name, hook, error: message });
    return false;
  }

  /** Counts a hook's unusable result as an error. */
  #refuseResult(r: Running, hook: Hook, why: string): void {
    const s = this.#stats.get(r)!;
    s.errors++;
    s.lastError = { hook, message: why, at: new Date().toISOString() };
    log.error("extension {name}: {hook} failed: {error}", { name: r.ext.name, hook, error: why });
  }

  /**
   * The request after every onChatRequest, in load order. Each hook gets its own copy, so one that throws, times
   * out or returns something unusable leaves the request as the previous hook left it.
   */
  async onChatRequest(req: ChatRequest, chat: ChatInfo): Promise<{ req: ChatRequest; changed: boolean }> {
    let current = req;
    let changed = false;
    for (const r of this.running) {
      const hook = r.ext.onChatRequest;
      if (!hook) continue;
      this.#stats.get(r)!.calls.onChatRequest++;
      const copy = structuredClone(current);
      const ctx = { ...r.ctx, chat };
      const out = await guarded(() => hook.call(r.ext, copy, ctx), this.opts.requestBudgetMs);
      if (!this.#judge(r, "onChatRequest", out, this.opts.requestBudgetMs)) continue;
      // undefined keeps the copy, changed in place or not: a hook that edits and forgets to return still works.
      const next = out.value ?? copy;
      const shape = ChatRequestShape.safeParse(next);
      if (!shape.success) {
        this.#refuseResult(
          r,
          "onChatRequest",
          `returned an unusable request (${
            shape.error.issues.map((i) => `${i.path.join(".") || "request"}: ${i.message}`).join("; ")
          }); ignored`,
        );
        continue;
      }
      current = next as ChatRequest;
      changed = true;
    }
    // A hook that returned the request untouched changed nothing: the forward carries the client's body then.
    if (changed) changed = JSON.stringify(current) !== JSON.stringify(req);
    return { req: changed ? current : req, changed };
  }

  /** Runs every onChatResponse in the background; the caller never waits for them. */
  onChatResponse(req: ChatRequest, res: ChatResponse, chat: ChatInfo): void {
    for (const r of this.running) {
      const hook = r.ext.onChatResponse;
      if (!hook) continue;
      this.#stats.get(r)!.calls.onChatResponse++;
      const copy = structuredClone(req);
      const ctx = { ...r.ctx, chat };
      // On a later task: not even a hook's synchronous part runs on the caller's stack.
      const run = new Promise((later) => setTimeout(later, 0))
        .then(() => guarded(() => hook.call(r.ext, copy, { ...res }, ctx), this.opts.hookBudgetMs))
        .then((out) => void this.#judge(r, "onChatResponse", out, this.opts.hookBudgetMs));
      this.#pending.add(run);
      void run.finally(() => this.#pending.delete(run));
    }
  }

  /** Resolves once every onChatResponse started so far has finished or been abandoned (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  status(): ExtensionsStatus {
    return {
      apiVersion: EXTENSION_API_VERSION,
      enabled: this.opts.enabled,
      requestBudgetMs: this.opts.requestBudgetMs,
      loaded: this.running.map((r) => {
        const s = this.#stats.get(r)!;
        const hooks = (["setup", "onChatRequest", "onChatResponse", "teardown"] as const).filter((h) =>
          r.ext[h]
        );
        return { name: r.ext.name, source: r.source, hooks, ...structuredClone(s) };
      }),
      refused: this.refused.map((x) => ({ ...x })),
    };
  }

  /** Lets running onChatResponse hooks finish (within their budget), then tears every extension down. */
  async teardown(): Promise<void> {
    await this.settled();
    for (const r of [...this.running].reverse()) {
      const hook = r.ext.teardown;
      if (!hook) continue;
      const out = await guarded(() => hook.call(r.ext), this.opts.hookBudgetMs);
      this.#judge(r, "teardown", out, this.opts.hookBudgetMs);
    }
  }
}
