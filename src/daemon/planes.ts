/** Which planes a daemon runs, from its config. Each later capability (worker, cluster) adds its plane here. */
import type { Config } from "../config/schema.ts";
import type { Plane } from "./node.ts";

export function daemonPlanes(_config: Config): Plane[] {
  return [];
}
