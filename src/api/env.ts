/** The hono environment every route shares: the node context and the request id. */
import type { Hono } from "hono";
import type { NodeContext } from "../node/context.ts";

export type ApiEnv = { Variables: { requestId: string; node: NodeContext } };
export type ApiApp = Hono<ApiEnv>;
