/** Which planes a daemon runs, from its config. Each capability (worker, cluster, ...) adds its plane here. */
import type { Config } from "../config/schema.ts";
import { downloadPlane } from "../downloads/plane.ts";
import { TelemetryHistoryPlane } from "../telemetry/history-plane.ts";
import { TracePlane } from "../tracing/plane.ts";
import { Worker } from "../worker/worker.ts";
import type { NodeContext } from "../node/context.ts";
import type { Plane } from "../node/plane.ts";
import { clusterPlane } from "../cluster/plane.ts";
import { DefaultModel } from "./default-model.ts";
import { Healer } from "../healing/plane.ts";
import { ExtensionsPlane } from "../extensions/plane.ts";

export function daemonPlanes(config: Config): Plane<NodeContext>[] {
  // The cluster plane starts first: it owns ctx.submit, which the others use. Downloads start before the
  // worker (it calls ensure) and stop after it.
  // Extensions load first, so chat requests meet them as soon as the cluster can route any.
  const planes: Plane<NodeContext>[] = [
    new ExtensionsPlane(),
    clusterPlane(config),
    new TelemetryHistoryPlane(),
    new TracePlane(),
    downloadPlane(config),
  ];
  if (config.worker) planes.push(new Worker());
  planes.push(new Healer());
  // Read when the plane starts: by then the node's log has laid the cluster's default model over its own.
  planes.push(new DefaultModel(() => config.defaultModel));
  return planes;
}
