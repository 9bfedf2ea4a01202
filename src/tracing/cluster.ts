/**
 * Asks every other node of the cluster for its part of the traces: a GET of its trace routes, signed as a
 * peer request (accepted in place of its API key), with a deadline and a bounded answer.
 */
import type { z } from "zod";
import type { NodeContext } from "../node/context.ts";
import { peerSignedForwardHeaders } from "../serving/forward.ts";
import { type Span, SpanSchema, type TraceView } from "./spans.ts";

/** A peer that does not answer within this long is named as failed; the others' answers still count. */
export const FAN_OUT_TIMEOUT_MS = 5_000;
/** Largest answer read from one peer. */
export const FAN_OUT_ANSWER_LIMIT = 32 * 1024 * 1024;

export interface NodeFailure {
  nodeId: string;
  error: string;
}

export type PeerAnswer<T> = { nodeId: string; value: T | null };

/** The other nodes this node knows an API address for (from telemetry). */
export function peersOf(
  ctx: Pick<NodeContext, "nodeId" | "telemetry">,
): { nodeId: string; address: string | null }[] {
  return ctx.telemetry.entries()
    .filter(([id]) => id !== ctx.nodeId)
    .map(([nodeId, e]) => ({ nodeId, address: e.reading.apiAddress }));
}

async function boundedText(res: Response): Promise<string> {
  if (Number(res.headers.get("content-length") ?? 0) > FAN_OUT_ANSWER_LIMIT) {
    await res.body?.cancel();
    throw new Error(`answer larger than ${FAN_OUT_ANSWER_LIMIT} bytes`);
  }
  const reader = res.body?.getReader();
  if (!reader) return "";
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > FAN_OUT_ANSWER_LIMIT) {
      await reader.cancel();
      throw new Error(`answer larger than ${FAN_OUT_ANSWER_LIMIT} bytes`);
    }
    parts.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return new TextDecoder().decode(out);
}

/**
 * GETs `path` on every peer at once. A 404 is an answer (`value: null`: the peer holds nothing); anything
 * else that is not a valid 200 names the peer in `failed`.
 */
export async function fanOut<S extends z.ZodType>(
  ctx: NodeContext,
  path: string,
  schema: S,
): Promise<{ answers: PeerAnswer<z.infer<S>>[]; failed: NodeFailure[] }> {
  const answers: PeerAnswer<z.infer<S>>[] = [];
  const failed: NodeFailure[] = [];
  await Promise.all(
    peersOf(ctx).map(async ({ nodeId, address }) => {
      if (!address) return void failed.push({ nodeId, error: "its API address is unknown" });
      if (!ctx.cluster) {
        return void failed.push({ nodeId, error: "this node runs no cluster plane to sign with" });
      }
      try {
        const headers = await peerSignedForwardHeaders(ctx, "GET", path, new Headers(), new Uint8Array());
        const res = await fetch(`http://${address}${path}`, {
          headers,
          signal: AbortSignal.timeout(FAN_OUT_TIMEOUT_MS),
        });
        const text = await boundedText(res);
        if (res.status === 404) {
          return void answers.push({ nodeId, value: null });
        }
        if (res.status !== 200) {
          return void failed.push({ nodeId, error: `answered ${res.status}: ${text.slice(0, 200)}` });
        }
        const parsed = schema.safeParse(JSON.parse(text));
        if (!parsed.success) return void failed.push({ nodeId, error: "its answer is not a trace answer" });
        answers.push({ nodeId, value: parsed.data });
      } catch (e) {
        const err = e as Error;
        failed.push({
          nodeId,
          error: err.name === "TimeoutError"
            ? `no answer within ${FAN_OUT_TIMEOUT_MS / 1000} s`
            : err.message,
        });
      }
    }),
  );
  failed.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { answers, failed };
}

/** A peer's trace view back to the spans it holds (only its own: a node answers with what it recorded). */
export function spansFromView(view: TraceView, from: string): Span[] {
  return view.traces.filter((t) => (t.nodeId ?? from) === from).flatMap((t) => {
    const { instanceId, ...attrs } = t.attrs;
    const parsed = SpanSchema.safeParse({
      taskId: view.taskId,
      nodeId: t.nodeId ?? from,
      category: t.category,
      name: t.name,
      startUs: t.startUs,
      durationUs: t.durationUs,
      modelId: t.modelId ?? null,
      instanceId: typeof instanceId === "string" ? instanceId : null,
      attrs,
    });
    return parsed.success ? [parsed.data] : [];
  });
}
