/**
 * Per-node caps on long-lived answers: streamed generations/speech and realtime sessions each take a slot
 * for as long as they run; a full cap is a 429 with Retry-After, so one client cannot hold every socket.
 */
import type { NodeContext } from "../node/context.ts";
import { ApiError } from "./errors.ts";

/** Milliseconds a request waited for a free slot of its instance's engine (serving/admission.ts). */
export const QUEUE_HEADER = "x-skulk-queue-ms";

/** Seconds a refused client is told to wait: streams and sessions last seconds to minutes. */
const RETRY_AFTER_S = 5;

export class Slots {
  #used = 0;
  constructor(readonly what: string, readonly setting: string, readonly max: number) {}

  /** Slots held now (the metrics' queue depth). */
  get used(): number {
    return this.#used;
  }

  /** Takes a slot or throws the 429; the returned release is idempotent. */
  take(): () => void {
    if (this.#used >= this.max) {
      throw new ApiError(
        429,
        `this node already serves ${this.max} concurrent ${this.what} (its ${this.setting} limit); retry later`,
        { type: "rate_limit_error", code: "too_many_concurrent", retryAfter: RETRY_AFTER_S },
      );
    }
    this.#used++;
    let held = true;
    return () => {
      if (held) (held = false, this.#used--);
    };
  }
}

export interface NodeSlots {
  streams: Slots;
  realtime: Slots;
}

const byNode = new WeakMap<NodeContext, NodeSlots>();

/** The node's slots, made on first use from its settings. */
export function slotsOf(ctx: NodeContext): NodeSlots {
  let s = byNode.get(ctx);
  if (!s) {
    s = {
      streams: new Slots("streams", "api.max_concurrent_streams", ctx.config.maxConcurrentStreams),
      realtime: new Slots("realtime sessions", "api.max_realtime_sessions", ctx.config.maxRealtimeSessions),
    };
    byNode.set(ctx, s);
  }
  return s;
}

/**
 * The same bytes, with `release` called once when the stream ends, fails or its reader cancels (the client
 * went away): a streamed answer holds its slot exactly as long as it runs.
 */
export function holding(
  stream: ReadableStream<Uint8Array>,
  release: () => void,
): ReadableStream<Uint8Array> {
  const reader = stream.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          release();
          controller.close();
        } else controller.enqueue(value);
      } catch (e) {
        release();
        controller.error(e);
      }
    },
    cancel(reason) {
      release();
      return reader.cancel(reason);
    },
  });
}
