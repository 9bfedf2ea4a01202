/**
 * The narrow ports the use cases need (reads of the cluster, the catalogue, recorded facts, indexing on the
 * master, routing a command) and their one adapter from a running node's NodeContext.
 */
import type { Event } from "../cluster/events.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { TelemetryEntry } from "../cluster/telemetry.ts";
import type { Db } from "../store/db.ts";
import type { ModelCard } from "../models/card.ts";
import { HubClient, hubOptions } from "../models/hub.ts";
import { loadResolvedFacts, recordResolvedFacts, type ResolvedFacts } from "../models/facts.ts";
import type { NodeContext } from "../node/context.ts";
import { buildClusterView, type ClusterView } from "../placement/view.ts";
import type { CommandRoute } from "./commands.ts";
import { NoMaster } from "./errors.ts";

/** The replicated state and fresh telemetry, as this node holds them now. */
export interface ClusterReads {
  state(): ClusterState;
  telemetry(): [string, TelemetryEntry][];
  telemetryOf(nodeId: string): TelemetryEntry | undefined;
  nodeTimeoutMs: number;
}

/** The catalogue and the facts recorded for cards that leave their size open. */
export interface Cards {
  card(modelId: string): ModelCard | undefined;
  loadFacts(modelId: string): Promise<ResolvedFacts | undefined>;
  recordFacts(modelId: string, facts: ResolvedFacts, source: string): Promise<void>;
  /** Where a card's unknown size is looked up (`hub.endpoint`). */
  hubEndpoint: string;
  /** This node's hub credentials (`HF_TOKEN`) as request headers, for its own hub reads only. */
  hubHeaders?: () => Record<string, string>;
}

/** What the master's desk needs to decide a command: reads, cards, and indexing (majority-acknowledged). */
export interface DecidePorts extends ClusterReads, Cards {
  isMaster(): boolean;
  index(event: Event): Promise<{ idx: number }>;
}

/** The planner's view of a node's cluster right now. */
export function viewOf(reads: ClusterReads, now = Date.now()): ClusterView {
  return buildClusterView(reads.state(), reads.telemetry(), now, { nodeTimeoutMs: reads.nodeTimeoutMs });
}

function cardsOf(catalog: NodeContext["catalog"], db: Db, config: NodeContext["config"]): Cards {
  return {
    hubEndpoint: config.hubEndpoint,
    hubHeaders: () => Object.fromEntries(new HubClient(hubOptions(config)).headers()),
    card: (id) => catalog.get(id),
    loadFacts: (id) => loadResolvedFacts(db, id),
    recordFacts: (id, facts, source) => recordResolvedFacts(db, id, facts, source),
  };
}

function readsOf(ctx: NodeContext): ClusterReads {
  return {
    state: () => ctx.log.state,
    telemetry: () => ctx.telemetry.entries(),
    telemetryOf: (id) => ctx.telemetry.get(id),
    nodeTimeoutMs: ctx.config.nodeTimeout * 1000,
  };
}

/** The desk's ports on a running node: it indexes through the cluster plane (majority) when one runs. */
export function decidePorts(ctx: NodeContext): DecidePorts {
  return {
    ...readsOf(ctx),
    ...cardsOf(ctx.catalog, ctx.store.db, ctx.config),
    isMaster: () => ctx.masterNodeId() === ctx.nodeId,
    index: async (event) => {
      if (ctx.cluster) return await ctx.cluster.submit(event);
      return { idx: (await ctx.log.append(event)).idx };
    },
  };
}

/** How long a forwarded command may take: until it expires on the master, then its commit, then the trip. */
function forwardTimeoutMs(ctx: NodeContext, expiresAt: number): number {
  return Math.max(0, expiresAt - Date.now()) + ctx.config.commitTimeout * 1000 + 2000;
}

/** The use cases' ports on a running node: reads, cards and the command route to the master. */
export interface NodePorts extends ClusterReads, Cards {
  route: CommandRoute;
}

export function nodePorts(ctx: NodeContext): NodePorts {
  return {
    ...readsOf(ctx),
    ...cardsOf(ctx.catalog, ctx.store.db, ctx.config),
    route: {
      selfId: ctx.nodeId,
      masterId: () => ctx.masterNodeId(),
      decide: (command) => {
        if (!ctx.commands) throw new NoMaster("this node takes no commands (it runs no desk)");
        return ctx.commands.run(command);
      },
      forward: (master, request) => {
        if (!ctx.cluster) throw new NoMaster("this node runs no cluster plane to reach the master");
        return ctx.cluster.call(master, "command", request, forwardTimeoutMs(ctx, request.expires_at));
      },
      waitApplied: (idx, ms) => ctx.log.waitForIndex(idx, ms),
    },
  };
}
