/**
 * The running-request registry: every generation this node drives (engine here) or owns (received from a
 * client and forwarded), by command id, so `/v1/cancel` finds it on either node and `/state` lists it.
 */
import { z } from "zod";

/** Carries the owner's command id to the engine's node, so both know a request by the same id. */
export const COMMAND_ID_HEADER = "x-skulk-command-id";

/** A running request as it travels in telemetry readings (defined once: gossip and `/state` both use it). */
export const RunningRequestSchema = z.object({
  commandId: z.uuid(),
  model: z.string(),
  instanceId: z.string(),
  /** The node whose engine generates. */
  driverNode: z.string(),
  /** The node the client sent the request to (the driver itself when no forward happened). */
  ownerNode: z.string(),
  /** The API path it came in on (`/v1/chat/completions`, …). */
  path: z.string(),
  startedAt: z.number(),
}).strict();
export type RunningRequest = z.infer<typeof RunningRequestSchema>;

/**
 * Most running requests one node reports in a reading (oldest first): a reading is gossiped, up to 24 to
 * a message, and a message must stay well under the 4 MiB peer body limit.
 */
export const MAX_REPORTED = 128;

interface Entry {
  request: RunningRequest;
  /** Set on the engine's node: aborting it closes the engine connection, which stops the generation. */
  abort?: AbortController;
}

export class RunningRequests {
  readonly #entries = new Map<string, Entry>();

  has(commandId: string): boolean {
    return this.#entries.has(commandId);
  }

  add(request: RunningRequest, abort?: AbortController): void {
    this.#entries.set(request.commandId, { request, abort });
  }

  remove(commandId: string): void {
    this.#entries.delete(commandId);
  }

  get(commandId: string): Entry | undefined {
    return this.#entries.get(commandId);
  }

  /** Every request this node drives or owns now (the router's own counts). */
  all(): RunningRequest[] {
    return [...this.#entries.values()].map((e) => e.request);
  }

  /** Requests whose engine runs on this node: what this node reports for the cluster's `/state`. */
  driven(selfNodeId: string): RunningRequest[] {
    return [...this.#entries.values()].map((e) => e.request).filter((r) => r.driverNode === selfNodeId)
      .sort((a, b) => a.startedAt - b.startedAt).slice(0, MAX_REPORTED);
  }
}

const byNode = new WeakMap<object, RunningRequests>();

/** The node's registry, made on first use (keyed by the node's context object). */
export function runningOf(node: object): RunningRequests {
  let r = byNode.get(node);
  if (!r) byNode.set(node, r = new RunningRequests());
  return r;
}

/** How a cancel is carried out: locally (the engine runs here), forwarded to the driver, or unknown. */
export type CancelRoute =
  | { kind: "local" }
  | { kind: "forward"; driverNode: string }
  | { kind: "unknown" };

/**
 * Pure: where to cancel a command. The local registry decides first (this node drives or owns it); failing
 * that, the running requests other nodes report (gossiped), so any node can cancel.
 */
export function cancelRoute(
  commandId: string,
  selfNodeId: string,
  local: RunningRequest | undefined,
  reported: RunningRequest[],
): CancelRoute {
  const r = local ?? reported.find((x) => x.commandId === commandId);
  if (!r) return { kind: "unknown" };
  return r.driverNode === selfNodeId ? { kind: "local" } : { kind: "forward", driverNode: r.driverNode };
}

/**
 * Pure: the cluster's running requests as upstream's `/state` `tasks` map (`{taskId: {TextGeneration:
 * {...}}}`), from what each node reports. A command id is its task id: one task per request here.
 */
export function tasksOf(
  reported: RunningRequest[],
  traceEnabled: boolean,
): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const r of [...reported].sort((a, b) => a.startedAt - b.startedAt)) {
    const tag = r.path === "/v1/embeddings" ? "TextEmbedding" : "TextGeneration";
    out[r.commandId] = {
      [tag]: {
        taskId: r.commandId,
        taskStatus: "Running",
        instanceId: r.instanceId,
        commandId: r.commandId,
        ownerNode: r.ownerNode,
        taskParams: { model: r.model },
        traceEnabled,
      },
    };
  }
  return out;
}
