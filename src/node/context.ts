/**
 * What a running node holds, as the API and the planes see it. The daemon builds it; handlers and
 * tests receive it, so a route never reaches for globals.
 */
import type { Desk } from "../app/commands.ts";
import type { Event } from "../cluster/events.ts";
import type { EventLog } from "../cluster/log.ts";
import type { ClusterHandle } from "../cluster/handle.ts";
import type { TelemetryView } from "../cluster/telemetry.ts";
import type { Config } from "../config/schema.ts";
import type { FlightRecorder } from "../diagnostics/recorder.ts";
import type { DownloadManager } from "../downloads/manager.ts";
import type { Catalog } from "../models/catalog.ts";
import type { Store } from "../store/db.ts";
import type { VadHost } from "../engines/sherpa/vad.ts";
import type { LocalRunner } from "../worker/runner.ts";
import type { ExtensionHost } from "../extensions/host.ts";

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
  /**
   * The master's node id as this node knows it: null while it knows none, and while it only claims the role
   * without a majority of the voting nodes behind it (it then indexes nothing, so it must not act as master).
   */
  masterNodeId(): string | null;
  /**
   * Hands an event to the master to be indexed (locally when this node is the master, over HTTP
   * otherwise). Every plane emits events through here, never through `log.append` directly.
   */
  submit(event: Event): Promise<void>;
  /**
   * Settles once this node's state can be acted on: it caught up with the master's log, or it leads
   * (alone, or after the election settled). Until then a restarted node's own log may be stale, so the
   * worker starts nothing from it. Without a cluster plane it is settled from the start.
   */
  whenCaughtUp(): Promise<void>;
  /** This node's runners (absent on a node started with --no-worker). */
  worker?: {
    runner(runnerId: string): LocalRunner | undefined;
    runners(): LocalRunner[];
    /** The node's Silero VAD child, for realtime sessions that ask for it. */
    vad(): VadHost;
  };
  /** Set by the daemon: decides commands one at a time while this node is the master (src/app/desk.ts). */
  commands?: Desk;
  /** Set by the cluster plane while it runs: what the peer routes call. */
  cluster?: ClusterHandle;
  /** Set by the downloads plane: fetches model files onto this node (the worker calls `ensure` for driver shards). */
  downloads?: DownloadManager;
  /** Set by the daemon: the flight recorder the planes note control and runner events in (diagnostics). */
  flight?: FlightRecorder;
  /** Set by the daemon: begins a clean restart of this node's process. */
  restart?: () => boolean;
  /** Set by the extensions plane: the extensions this node runs on chat requests (src/extensions/). */
  extensions?: ExtensionHost;
  /** Set by the daemon: answers a request through this node's own API in-process (extensions' `ctx.embed`). */
  handle?: (req: Request) => Promise<Response>;
}
