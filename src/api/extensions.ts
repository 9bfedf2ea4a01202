/**
 * Where the chat routes meet the node's extensions: the request each chat-shaped API translated, run through
 * onChatRequest before it is routed (once, on the node the client called), the answer tapped for onChatResponse,
 * and `GET /v1/extensions`.
 */
import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
import type { ChatApi, ChatInfo, ChatRequest } from "../extensions/api.ts";
import { ChatRequestShape } from "../extensions/api.ts";
import { extensionsStatus } from "../extensions/plane.ts";
import { tapResponse } from "../extensions/summary.ts";
import { FORWARDED_HEADER } from "../serving/forward.ts";
import type { ApiEnv } from "./env.ts";
import { describe } from "./openapi.ts";

/**
 * The field of a forwarded body that carries the request as this node's extensions left it: the node that drives
 * the model generates from it as it is, rather than translating the client's body again.
 */
export const EXTENDED_FIELD = "skulk_extended_request";

interface Observed {
  req: ChatRequest;
  chat: ChatInfo;
}
const observed = new WeakMap<Context, Observed>();

/** A request a peer of this cluster forwarded: its extensions already ran on the node the client called. */
function fromPeer(c: Context<ApiEnv>): boolean {
  const by = c.req.header(FORWARDED_HEADER);
  return by !== undefined && c.var.node.telemetry.get(by) !== undefined;
}

/**
 * The chat request to generate from, and the body to forward when another node drives the model. On the node
 * the client called, the extensions' onChatRequest ran on `req` (the API's request as a Chat Completions one);
 * when they changed it, the forward carries it in EXTENDED_FIELD beside the client's body. A forwarded request
 * is never extended again: it brings what the first node made of it.
 */
export async function extendChat(
  c: Context<ApiEnv>,
  api: ChatApi,
  raw: string,
  req: Record<string, unknown>,
): Promise<{ req: Record<string, unknown>; raw: string }> {
  if (fromPeer(c)) {
    if (!raw.includes(EXTENDED_FIELD)) return { req, raw };
    const carried = ChatRequestShape.safeParse((JSON.parse(raw) as Record<string, unknown>)[EXTENDED_FIELD]);
    return carried.success ? { req: carried.data, raw } : { req, raw };
  }
  const host = c.var.node.extensions;
  if (!host || host.running.length === 0) return { req, raw };
  const chat: ChatInfo = { api, requestId: c.var.requestId };
  let out = { req: req as ChatRequest, changed: false };
  if (host.transformsRequests && ChatRequestShape.safeParse(req).success) {
    out = await host.onChatRequest(req as ChatRequest, chat);
  }
  if (host.observesResponses) observed.set(c, { req: out.req, chat });
  if (!out.changed) return { req, raw };
  return { req: out.req, raw: JSON.stringify({ ...JSON.parse(raw), [EXTENDED_FIELD]: out.req }) };
}

/**
 * The max_tokens admission checks: the client's own (null when it gave none: the node's default is a ceiling,
 * not a demand), unless an extension set another.
 */
export function admittedTokens(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  clientAsked: number | null | undefined,
): number | null {
  if (after.max_tokens !== before.max_tokens && typeof after.max_tokens === "number") return after.max_tokens;
  return clientAsked ?? null;
}

/**
 * Taps the answer of every chat request extendChat recorded, whatever route answered it and however (an error
 * status included), and hands the assembled answer to onChatResponse once the client has it.
 */
export const observeChatResponses: MiddlewareHandler<ApiEnv> = async (c, next) => {
  await next();
  const o = observed.get(c);
  const host = c.var.node.extensions;
  if (!o || !host) return;
  observed.delete(c);
  c.res = tapResponse(c.res, o.chat.api, (res) => host.onChatResponse(o.req, res, o.chat));
};

describe({
  method: "get",
  path: "/v1/extensions",
  summary: "The extensions this node runs, those it refused and why, and their hook counts",
  tag: "node",
});

export const extensionRoutes = new Hono<ApiEnv>()
  .get("/v1/extensions", (c) => c.json(extensionsStatus(c.var.node)));
