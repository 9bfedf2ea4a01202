/**
 * The data plane between nodes: a request for a model driven by another node is streamed to that node's
 * API, signed as a peer request and without the client's credentials, and its answer streamed back without
 * buffering, under deadlines (serving/deadlines.ts). A header marks forwarded requests so a request is never
 * forwarded twice (no loops when two nodes disagree).
 */
import type { ClusterHandle } from "../cluster/handle.ts";
import type { TelemetryView } from "../cluster/telemetry.ts";
import type { Config } from "../config/schema.ts";
import { fetchWithDeadlines, forwardDeadlines, NodeSilent, sseWithFailureEvent } from "./deadlines.ts";
import { INSTANCE_HEADER } from "./router.ts";
import { COMMAND_ID_HEADER } from "./running.ts";
import { TASK_ID_HEADER } from "../tracing/recorder.ts";

export const FORWARDED_HEADER = "x-skulk-forwarded-by";

/**
 * Client headers a forward keeps: what the serving node needs to answer, never a credential or cookie. The
 * task id and the chosen instance are the forwarding node's (it drops a client's), trusted there only on a
 * signed request.
 */
const KEPT = [
  "content-type",
  "accept",
  "x-request-id",
  COMMAND_ID_HEADER,
  TASK_ID_HEADER,
  INSTANCE_HEADER,
] as const;

/** What forwarding needs of the node: its id, where other nodes listen, and its cluster key to sign with. */
export interface ForwardContext {
  nodeId: string;
  telemetry: Pick<TelemetryView, "get">;
  cluster?: Pick<ClusterHandle, "sign">;
  config: Pick<Config, "forwardConnectTimeout" | "forwardSilenceTimeout">;
}

/**
 * The headers of a forwarded request: the kept client headers, the forwarded-by mark and a peer signature
 * over method, path and query, and body. The serving node accepts the signature in place of its API key,
 * so the client's Authorization (a key the serving node may not share) never leaves this node.
 */
export async function peerSignedForwardHeaders(
  ctx: ForwardContext,
  method: string,
  pathAndQuery: string,
  client: Headers,
  body: Uint8Array,
): Promise<Headers> {
  const headers = new Headers();
  for (const h of KEPT) {
    const v = client.get(h);
    if (v) headers.set(h, v);
  }
  headers.set(FORWARDED_HEADER, ctx.nodeId);
  if (ctx.cluster) {
    for (const [k, v] of Object.entries(await ctx.cluster.sign(method, pathAndQuery, body))) {
      headers.set(k, v);
    }
  }
  return headers;
}

export async function forwardRequest(
  ctx: ForwardContext,
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
  const noBody = req.method === "GET" || req.method === "HEAD";
  const bytes = noBody ? new Uint8Array() : typeof body === "string" ? new TextEncoder().encode(body) : body;
  const headers = await peerSignedForwardHeaders(
    ctx,
    req.method,
    `${url.pathname}${url.search}`,
    req.headers,
    bytes,
  );
  try {
    // GET and HEAD carry no body (fetch refuses one, even empty).
    const payload = noBody ? undefined : bytes as BodyInit;
    const res = await fetchWithDeadlines(
      { nodeId, address },
      `http://${address}${url.pathname}${url.search}`,
      { method: req.method, headers, body: payload, signal: req.signal },
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
