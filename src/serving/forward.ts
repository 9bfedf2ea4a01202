/**
 * The data plane between nodes: a request for a model driven by another node is streamed to that node's
 * API unchanged and its answer streamed back without buffering, under deadlines (serving/deadlines.ts). A
 * header marks forwarded requests so a request is never forwarded twice (no loops when two nodes disagree).
 */
import type { NodeContext } from "../node/context.ts";
import { fetchWithDeadlines, forwardDeadlines, NodeSilent, sseWithFailureEvent } from "./deadlines.ts";

export const FORWARDED_HEADER = "x-skulk-forwarded-by";

export async function forwardRequest(
  ctx: NodeContext,
  nodeId: string,
  req: Request,
  body: string | Uint8Array,
): Promise<Response | { error: string }> {
  if (req.headers.get(FORWARDED_HEADER)) {
    return {
      error: `request was forwarded here by ${
        req.headers.get(FORWARDED_HEADER)
      }, but this node does not drive the model`,
    };
  }
  const address = ctx.telemetry.get(nodeId)?.reading.apiAddress;
  if (!address) {
    return {
      error: `node ${nodeId} drives the model but its address is unknown (is it still in the cluster?)`,
    };
  }
  const url = new URL(req.url);
  const headers = new Headers();
  for (const h of ["content-type", "authorization", "accept", "x-request-id"]) {
    const v = req.headers.get(h);
    if (v) headers.set(h, v);
  }
  headers.set(FORWARDED_HEADER, ctx.nodeId);
  try {
    // GET and HEAD carry no body (fetch refuses one, even empty).
    const payload = req.method === "GET" || req.method === "HEAD" ? undefined : body as BodyInit;
    const res = await fetchWithDeadlines(
      { nodeId, address },
      `http://${address}${url.pathname}${url.search}`,
      {
        method: req.method,
        headers,
        body: payload,
        signal: req.signal,
      },
      forwardDeadlines(ctx),
    );
    return withFailureEvent(res, nodeId, address);
  } catch (e) {
    return {
      error: e instanceof NodeSilent
        ? `${e.message}; it drives the model, so the request cannot be served now`
        : `node ${nodeId} (${address}) that drives the model did not answer: ${(e as Error).message}`,
    };
  }
}

/** An event stream from the other node ends with one error event naming it if it breaks off. */
function withFailureEvent(res: Response, nodeId: string, address: string): Response {
  if (!res.body || !res.headers.get("content-type")?.startsWith("text/event-stream")) return res;
  const stream = sseWithFailureEvent(
    res.body,
    (e) =>
      `the stream was cut: ${
        e instanceof NodeSilent
          ? e.message
          : `node ${nodeId} (${address}) that drives the model went away (${(e as Error).message})`
      }`,
  );
  return new Response(stream, { status: res.status, statusText: res.statusText, headers: res.headers });
}
