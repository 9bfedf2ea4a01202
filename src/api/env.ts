/** The hono environment every route shares: the node context and the request id. */
import type { Hono } from "hono";
import type { NodeContext } from "../node/context.ts";

/** `peer`: the node whose signed forward this request is, once the key check verified its signature. */
export type ApiEnv = { Variables: { requestId: string; node: NodeContext; peer?: string } };
export type ApiApp = Hono<ApiEnv>;
