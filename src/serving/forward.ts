/**
 * The data plane between nodes: a request for a model driven by another node is streamed to that node's
 * API unchanged and its answer streamed back without buffering. A header marks forwarded requests so a
 * request is never forwarded twice (no loops when two nodes disagree for a moment).
 */
import type { NodeContext } from "../node/context.ts";

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
    return await fetch(`http://${address}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body: payload,
      signal: req.signal,
    });
  } catch (e) {
    return {
      error: `node ${nodeId} (${address}) that drives the model did not answer: ${(e as Error).message}`,
    };
  }
}
