/**
 * Retries with exponential backoff for one file: pure delay schedule and retry decision, plus the loop that
 * sleeps between attempts (cancellable). 5xx, resets, stalls and bad hashes retry; auth, 404 and a full disk do not.
 */
import { DownloadError } from "./errors.ts";
import { HubError } from "../models/hub.ts";

export interface RetryPolicy {
  attempts: number;
  baseMs: number;
  capMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, baseMs: 500, capMs: 10_000 };

/** Pure: the wait before attempt `n + 1` after `n` failed attempts (n >= 1). */
export function backoffMs(policy: RetryPolicy, failedAttempts: number): number {
  return Math.min(policy.capMs, policy.baseMs * 2 ** (failedAttempts - 1));
}

/** Pure: whether an error is worth another attempt. */
export function isRetryable(e: unknown): boolean {
  if (e instanceof DownloadError) return e.kind === "retry";
  if (e instanceof HubError) return e.retryable;
  return false;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Runs `attempt` until it succeeds, fails for good, or the attempts run out; `onRetry` hears each retry. */
export async function withRetries<T>(
  policy: RetryPolicy,
  attempt: (n: number) => Promise<T>,
  opts: { signal?: AbortSignal; onRetry?: (e: unknown, n: number, waitMs: number) => void } = {},
): Promise<T> {
  for (let n = 1;; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      if (opts.signal?.aborted || !isRetryable(e) || n >= policy.attempts) throw e;
      const wait = backoffMs(policy, n);
      opts.onRetry?.(e, n, wait);
      await sleep(wait, opts.signal);
    }
  }
}
