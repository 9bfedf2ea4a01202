/**
 * The control-plane vocabulary: every decision the cluster makes is one of these events, indexed by
 * the master, written to SQLite `events`, replicated, and folded by the reducer in cluster/state.ts.
 */
import { z } from "zod";
import { DownloadProgressSchema } from "./downloads.ts";
import { InstanceSchema, PlacementRecordSchema, RunnerStatusSchema } from "./instances.ts";
import { tagged } from "./tagged.ts";

const eventId = z.string();

export const EventSchema = z.union([
  /**
   * `reason` and `placement` are ours, not upstream's, and optional so upstream's shape still decodes:
   * why a healing master placed it, and the request's constraints healing places it again with (absent
   * for a plain placement, whose constraints are the defaults).
   */
  tagged(
    "InstanceCreated",
    z.object({
      eventId,
      instance: InstanceSchema,
      reason: z.string().optional(),
      placement: PlacementRecordSchema.optional(),
    }).strict(),
  ),
  tagged(
    "InstanceDeleted",
    z.object({ eventId, instanceId: z.string(), reason: z.string().nullable().default(null) }).strict(),
  ),
  tagged(
    "RunnerStatusUpdated",
    z.object({ eventId, runnerId: z.string(), runnerStatus: RunnerStatusSchema }).strict(),
  ),
  tagged("NodeDownloadProgress", z.object({ eventId, downloadProgress: DownloadProgressSchema }).strict()),
  tagged("NodeTimedOut", z.object({ eventId, nodeId: z.string() }).strict()),
  /** Ours: a node became a voting member (the master indexes it once the node follows and has caught up). */
  tagged("NodeJoined", z.object({ eventId, nodeId: z.string() }).strict()),
  /**
   * Ours: a master won a majority and indexes this first in its session, so the nodes it beat see a log
   * that is newer than any uncommitted tail they hold and follow it (the election compares last sessions).
   */
  tagged("MasterElected", z.object({ eventId, nodeId: z.string(), clock: z.number().int() }).strict()),
  tagged("TracingStateChanged", z.object({ eventId, enabled: z.boolean() }).strict()),
  tagged(
    "CustomModelCardAdded",
    z.object({ eventId, modelCard: z.looseObject({ modelId: z.string() }) }).strict(),
  ),
  tagged("CustomModelCardDeleted", z.object({ eventId, modelId: z.string() }).strict()),
  tagged("TestEvent", z.object({ eventId }).strict()),
  /**
   * Ours: cluster-scope settings set through `PUT /config` on any node (dotted skulk.yaml keys, values as
   * written there and checked by the setting's schema before submitting). A null value clears the key, so
   * each node falls back to its own.
   */
  tagged(
    "ClusterConfigChanged",
    z.object({
      eventId,
      settings: z.record(z.string().regex(/^[a-z_]+\.[a-z_]+$/, "a dotted setting key"), z.unknown())
        .refine((r) => Object.keys(r).length <= 64, "at most 64 settings"),
    }).strict(),
  ),
  /**
   * Ours: healing found no place for a lost instance's model. `retryAt` is when the master tries again
   * (null: it gave up until the cluster changes); the lost instance rides along so any later master can.
   */
  tagged(
    "PlacementFailed",
    z.object({
      eventId,
      lostInstanceId: z.string(),
      instance: InstanceSchema,
      placement: PlacementRecordSchema,
      attempt: z.number().int().positive(),
      retryAt: z.string().nullable(),
      reason: z.string(),
    }).strict(),
  ),
]);
export type Event = z.infer<typeof EventSchema>;
export type EventType = Event extends infer E ? E extends Record<infer K, unknown> ? K : never : never;

/** An event with the index the master gave it and the session it was indexed in. */
export const IndexedEventSchema = z.object({
  idx: z.number().int().nonnegative(),
  session: z.string(),
  event: EventSchema,
}).strict();
export type IndexedEvent = z.infer<typeof IndexedEventSchema>;

export function eventType(e: Event): EventType {
  return Object.keys(e)[0] as EventType;
}

/** Builds an event of the given type with a fresh id; the payload is checked by the schema. */
export function makeEvent<T extends EventType>(type: T, payload: Record<string, unknown> = {}): Event {
  return EventSchema.parse({ [type]: { eventId: crypto.randomUUID(), ...payload } });
}
