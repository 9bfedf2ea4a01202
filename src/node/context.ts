/**
 * What a running node holds, as the API and the planes see it. The daemon builds it; handlers and
 * tests receive it, so a route never reaches for globals.
 */
import type { EventLog } from "../cluster/log.ts";
import type { TelemetryView } from "../cluster/telemetry.ts";
import type { Config } from "../config/schema.ts";
import type { Catalog } from "../models/catalog.ts";
import type { Store } from "../store/db.ts";

export interface NodeContext {
  nodeId: string;
  config: Config;
  /** Where skulk.yaml is read from and written to (GET/PUT /config). */
  configPath: string;
  store: Store;
  log: EventLog;
  telemetry: TelemetryView;
  catalog: Catalog;
  startedAt: number;
  /** The master's node id as this node knows it. */
  masterNodeId(): string;
  /** Set by the daemon: begins a clean restart of this node's process. */
  restart?: () => boolean;
}
