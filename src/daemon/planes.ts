/** Which planes a daemon runs, from its config. Each capability (worker, cluster, ...) adds its plane here. */
import type { Config } from "../config/schema.ts";
import { TelemetryHistoryPlane } from "../telemetry/history-plane.ts";
import { Worker } from "../worker/worker.ts";
import type { Plane } from "./node.ts";

export function daemonPlanes(config: Config): Plane[] {
  const planes: Plane[] = [new TelemetryHistoryPlane()];
  if (config.worker) planes.push(new Worker());
  return planes;
}
