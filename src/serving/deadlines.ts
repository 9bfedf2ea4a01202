/**
 * Deadlines on exchanges with another node: a pulse that notices a node showing no sign of life (no byte of
 * its answer, no answer to a probe) for too long, a fetch under it, and an event stream that ends with one
 * error event when its source breaks off. Used by every forward (serving/forward.ts, the realtime proxy).
 */
import type { Config } from "../config/schema.ts";
import { sseErrorEvent } from "./chat-stream.ts";

/** How long the other node may go without a sign of life (config `cluster.forward_*_timeout_seconds`). */
export interface ForwardDeadlines {
  /** Until its first sign of life: its answer, or its answer to a probe. */
  connectMs: number;
  /** After that, between signs of life (bytes of the answer, answers to probes). */
  silenceMs: number;
}

export function forwardDeadlines(
  ctx: { config: Pick<Config, "forwardConnectTimeout" | "forwardSilenceTimeout"> },
): ForwardDeadlines {
  return {
    connectMs: ctx.config.forwardConnectTimeout * 1000,
    silenceMs: ctx.config.forwardSilenceTimeout * 1000,
  };
}

/** The other node stopped answering; the message names it (id and address) and says for how long. */
export class NodeSilent extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NodeSilent";
  }
}

/** A probe is sent after this much silence, then once per such period while the silence lasts. */
const PROBE_EVERY_MS = 1000;
/** The node's cheapest route; any HTTP answer (even 401 under an API key) proves it is alive. */
const PROBE_PATH = "/node_id";

/** One probe per node at a time, shared by every forward waiting on it. */
const probes = new Map<string, Promise<boolean>>();

function probe(address: string, timeoutMs: number): Promise<boolean> {
  let p = probes.get(address);
  if (!p) {
    p = fetch(`http://${address}${PROBE_PATH}`, { signal: AbortSignal.timeout(timeoutMs) })
      .then(async (r) => (await r.body?.cancel(), true), () => false)
      .finally(() => probes.delete(address));
    probes.set(address, p);
  }
  return p;
}

/**
 * Watches one exchange with another node: every sign of life is `touch()`ed; during silence it probes the
 * node, and it calls `onSilent` once when the node has shown no sign of life for too long.
 */
export class NodePulse {
  #last = Date.now();
  #alive = false;
  #timer: ReturnType<typeof setInterval>;
  #done = false;
  /** Silence counts only while something waits on the node (not while a slow client holds back reads). */
  #waiting = true;

  constructor(
    readonly nodeId: string,
    readonly address: string,
    readonly deadlines: ForwardDeadlines,
    onSilent: (e: NodeSilent) => void,
  ) {
    const every = Math.min(PROBE_EVERY_MS, deadlines.connectMs / 2);
    this.#timer = setInterval(() => {
      if (!this.#waiting) return;
      const quiet = Date.now() - this.#last;
      const limit = this.#alive ? deadlines.silenceMs : deadlines.connectMs;
      if (quiet >= limit) {
        this.stop();
        const what = this.#alive ? "stopped answering" : "did not answer";
        onSilent(new NodeSilent(`node ${nodeId} (${address}) ${what} for ${seconds(quiet)} s`));
      } else if (quiet >= every) {
        void probe(address, Math.min(limit, 5000)).then((ok) => ok && this.touch());
      }
    }, every);
  }

  touch(): void {
    this.#last = Date.now();
    this.#alive = true;
  }

  /** Starts or ends a wait on the node; a wait's silence is counted from its start or the last touch. */
  waiting(on: boolean): void {
    if (on && !this.#waiting) this.#last = Date.now();
    this.#waiting = on;
  }

  stop(): void {
    if (this.#done) return;
    this.#done = true;
    clearInterval(this.#timer);
  }
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(ms < 10_000 ? 1 : 0);
}

/**
 * fetch under a pulse: rejects with NodeSilent when the node shows no sign of life in time, before or
 * after its headers; the body it returns errors the same way mid-stream.
 */
export async function fetchWithDeadlines(
  target: { nodeId: string; address: string },
  url: string,
  init: RequestInit,
  deadlines: ForwardDeadlines,
): Promise<Response> {
  const abort = new AbortController();
  const outer = init.signal;
  const onOuterAbort = () => abort.abort(outer?.reason);
  if (outer?.aborted) onOuterAbort();
  outer?.addEventListener("abort", onOuterAbort);
  // Aborting a fetch does not always fail a body read already waiting on a frozen peer (seen with Deno
  // 2.9), so every wait also races the silence itself.
  const silence = Promise.withResolvers<never>();
  silence.promise.catch(() => undefined);
  const pulse = new NodePulse(target.nodeId, target.address, deadlines, (e) => {
    silence.reject(e);
    abort.abort(e);
  });
  const end = () => {
    pulse.stop();
    outer?.removeEventListener("abort", onOuterAbort);
  };
  let res: Response;
  try {
    res = await Promise.race([fetch(url, { ...init, signal: abort.signal }), silence.promise]);
  } catch (e) {
    end();
    throw abort.signal.reason instanceof NodeSilent ? abort.signal.reason : e;
  }
  pulse.touch();
  pulse.waiting(false);
  if (!res.body) {
    end();
    return res;
  }
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        pulse.waiting(true);
        const { done, value } = await Promise.race([reader.read(), silence.promise]);
        pulse.waiting(false);
        if (done) {
          end();
          controller.close();
          return;
        }
        pulse.touch();
        controller.enqueue(value);
      } catch (e) {
        end();
        void reader.cancel(e).catch(() => undefined);
        controller.error(abort.signal.reason instanceof NodeSilent ? abort.signal.reason : e);
      }
    },
    cancel(reason) {
      end();
      abort.abort(reason);
      return reader.cancel(reason).catch(() => undefined);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** Whether `tail` (the last bytes sent) holds the stream's final `data: [DONE]` event. */
function endsDone(tail: Uint8Array): boolean {
  return new TextDecoder().decode(tail).trimEnd().endsWith("data: [DONE]");
}

/**
 * The events that end a Messages or Responses stream, which have no `[DONE]`: message_stop, and the final
 * response.completed / .incomplete / .failed (whose data, the whole response, comes after the name).
 */
const FINAL_EVENT =
  /(?:^|\n)event: (?:message_stop|response\.completed|response\.incomplete|response\.failed)\r?\n/;

/**
 * An event stream from another node, passed on unchanged; if it breaks off (the node died, went silent)
 * or ends before its `[DONE]` (or its API's final event), the client gets one error event naming the node
 * instead of a silent close.
 */
export function sseWithFailureEvent(
  body: ReadableStream<Uint8Array>,
  describe: (e: unknown) => string,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const enc = new TextEncoder();
  let tail = new Uint8Array(0);
  let finalEvent = false;
  const fail = (controller: ReadableStreamDefaultController<Uint8Array>, e: unknown) => {
    // An event cut mid-line is ended first, so the error event parses on its own.
    const text = new TextDecoder().decode(tail);
    const sep = text.length === 0 || text.endsWith("\n\n") ? "" : text.endsWith("\n") ? "\n" : "\n\n";
    try {
      controller.enqueue(enc.encode(sep + sseErrorEvent(describe(e))));
      controller.close();
    } catch { /* the client went away meanwhile */ }
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (e) {
        return fail(controller, e);
      }
      if (chunk.done) {
        if (finalEvent || endsDone(tail)) controller.close();
        else fail(controller, new Error("the stream ended before its [DONE]"));
        return;
      }
      const joined = new Uint8Array(tail.length + chunk.value.length);
      joined.set(tail);
      joined.set(chunk.value, tail.length);
      // Scanned with the previous tail, so an event name split across two reads is still seen.
      finalEvent ||= FINAL_EVENT.test(new TextDecoder().decode(joined));
      tail = joined.slice(-64);
      controller.enqueue(chunk.value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
