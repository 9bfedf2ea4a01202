/**
 * Commands: every mutating request as one typed value, sent by the node that was asked to the master, which
 * decides it (src/app/desk.ts). `send` routes a command and answers once this node has applied the result.
 */
import { z } from "zod";
import { InstanceSchema, PlacementRecordSchema } from "../cluster/instances.ts";
import { PeerError } from "../cluster/peers.ts";
import { PlaceInstanceParamsSchema } from "../placement/planner.ts";
import { ModelIdSchema } from "../security/ids.ts";
import { fromWire, NoMaster, NotReady, WireErrorSchema } from "./errors.ts";

/** Upstream's `PlaceInstanceParams`: what a client sends to `POST /place_instance`. */
export const PlaceRequestSchema = PlaceInstanceParamsSchema.pick({
  model_id: true,
  sharding: true,
  instance_meta: true,
  min_nodes: true,
  excluded_nodes: true,
});

export const CommandSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("place"), request: PlaceRequestSchema }).strict(),
  z.object({
    kind: z.literal("create_instance"),
    instance: InstanceSchema,
    placement: PlacementRecordSchema.optional(),
  }).strict(),
  z.object({ kind: z.literal("delete_instance"), instance_id: z.string().min(1).max(200) }).strict(),
  /** The card is read on the node that was asked (its GGUF is a file there); the master checks its id. */
  z.object({ kind: z.literal("add_card"), model_card: z.looseObject({ modelId: z.string() }) }).strict(),
  z.object({ kind: z.literal("delete_card"), model_id: ModelIdSchema }).strict(),
]);
export type Command = z.infer<typeof CommandSchema>;

/**
 * The peer request: a command and the moment (the sender's clock; peers' clocks agree within the replay
 * window) after which the asking node has given up on it, so a master that reads it late (it was stopped,
 * or its queue was long) refuses it rather than index something nobody was told about.
 */
export const CommandRequestSchema = z.object({
  command: CommandSchema,
  expires_at: z.number().int().positive(),
}).strict();
export type CommandRequest = z.infer<typeof CommandRequestSchema>;

/** How long the master may take to start indexing a forwarded command: its queue, a hub look-up. */
export const COMMAND_BUDGET_MS = 20_000;

/** What the master answers for a command it indexed: the event's index and id, and the instance it names. */
export const CommandResultSchema = z.object({
  idx: z.number().int().nonnegative(),
  event_id: z.string(),
  instance_id: z.string().optional(),
  model_id: z.string().optional(),
}).strict();
export type CommandResult = z.infer<typeof CommandResultSchema>;

/** The peer answer: always a 200 signed by the master; a refusal travels as data and is rethrown here. */
export const OutcomeSchema = z.discriminatedUnion("ok", [
  z.object({ ok: z.literal(true), result: CommandResultSchema }),
  z.object({ ok: z.literal(false), error: WireErrorSchema }),
]);
export type Outcome = z.infer<typeof OutcomeSchema>;

/** How long this node waits to apply an event the master already committed before it says so (503). */
export const APPLY_WAIT_MS = 10_000;

/** What routing a command needs from the node that was asked. */
export interface CommandRoute {
  selfId: string;
  /** The master this node follows, itself when it leads; null while none is known. */
  masterId(): string | null;
  /** This node's own desk, used when it is the master. */
  decide(command: Command): Promise<CommandResult>;
  /**
   * A signed `POST /cluster/peer/command` to the master; its parsed JSON answer. It waits past
   * `expires_at` by the commit's time, so an answer the master sends is never cut off.
   */
  forward(masterId: string, request: CommandRequest): Promise<unknown>;
  /** Resolves true once this node applied `idx`, false after `timeoutMs`. */
  waitApplied(idx: number, timeoutMs: number): Promise<boolean>;
}

/**
 * The master's desk as the node holds it (ctx.commands; `app/desk.ts` implements it): the node context names
 * this, not the desk, so that holding a desk imports none of the use cases.
 */
export interface Desk {
  /** Decides a command on this node, which must be the master; rejects with a domain error. */
  run(command: Command, expiresAt?: number): Promise<CommandResult>;
  /** The peer route's answer: the result, or the refusal as data. */
  outcome(request: CommandRequest): Promise<Outcome>;
  /** Runs `f` after everything queued before it, alone. */
  serial<T>(f: () => Promise<T>): Promise<T>;
  /** Commands waiting or running now (the metrics' queue depth). */
  readonly depth: number;
}

/**
 * Sends a command to the master (itself, or over the signed peer route) and returns once this node has
 * applied the event it produced. A master that stops answering mid-command is a retryable NoMaster.
 */
export async function send(route: CommandRoute, command: Command): Promise<CommandResult> {
  const master = route.masterId();
  if (!master) throw new NoMaster("no master: the cluster is electing one; retry in a moment");
  let result: CommandResult;
  if (master === route.selfId) result = await route.decide(command);
  else {
    let raw: unknown;
    try {
      raw = await route.forward(master, { command, expires_at: Date.now() + COMMAND_BUDGET_MS });
    } catch (e) {
      if (e instanceof NoMaster) throw e;
      // Unreachable, timed out or refused mid-command: whether it was indexed is unknown, so nothing is
      // acknowledged, and the client retries (commands are idempotent by instance or model id where it matters).
      throw new NoMaster(
        `the master ${master} did not answer the command (${
          e instanceof PeerError ? e.message : (e as Error).message
        }); retry in a moment`,
        "master_changed",
      );
    }
    const outcome = OutcomeSchema.parse(raw);
    if (!outcome.ok) throw fromWire(outcome.error);
    result = outcome.result;
  }
  if (!(await route.waitApplied(result.idx, APPLY_WAIT_MS))) {
    throw new NotReady(
      `the master committed this as event ${result.idx}, but this node has not applied it within ` +
        `${APPLY_WAIT_MS / 1000} s; read it back in a moment`,
    );
  }
  return result;
}
