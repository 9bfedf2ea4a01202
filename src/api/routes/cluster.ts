/** The cluster plane's routes, mounted with one line in app.ts: peer routes and operator actions. */
import { Hono } from "hono";
import type { ApiEnv } from "../env.ts";
import { adminRoutes } from "./admin.ts";
import { peerRoutes } from "./peer.ts";

export const clusterRoutes = new Hono<ApiEnv>().route("/", peerRoutes).route("/", adminRoutes);
