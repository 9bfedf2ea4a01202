/**
 * Control-plane replication over the peer transport: the master answers a follower's sync (tail when the
 * histories agree, snapshot plus tail otherwise) and pushes each new event; followers apply in order.
 */
import { z } from "zod";
import { type IndexedEvent, IndexedEventSchema } from "./events.ts";
import { eventIdOf, type EventLog, type Snapshot } from "./log.ts";
import { type ClusterState, emptyState } from "./state.ts";

/** Events per sync answer; a follower further behind asks again. */
export const SYNC_BATCH = 256;

export const SyncRequestSchema = z.object({ after: z.number().int().min(-1), eventId: z.string().nullable() })
  .strict();
export type SyncRequest = z.infer<typeof SyncRequestSchema>;

const SnapshotSchema = z.object({
  idx: z.number().int(),
  eventId: z.string().nullable(),
  session: z.string(),
  state: z.custom<ClusterState>((v) => typeof v === "object" && v !== null),
}).strict();
export const SyncResponseSchema = z.object({
  snapshot: SnapshotSchema.nullable(),
  events: z.array(IndexedEventSchema),
  lastIdx: z.number().int(),
}).strict();
export type SyncResponse = z.infer<typeof SyncResponseSchema>;

export const PushSchema = z.object({
  master: z.string(),
  prevEventId: z.string().nullable(),
  event: IndexedEventSchema,
}).strict();
export type Push = z.infer<typeof PushSchema>;

/** A follower's answer to a push: `held` is the index up to which it holds the master's history, if it does. */
export const PushAnswerSchema = z.object({ applied: z.boolean(), held: z.number().int().nullable() })
  .strict();

/** Master side: what a follower holding history up to (`after`, `eventId`) needs next. */
export async function answerSync(log: EventLog, req: SyncRequest): Promise<SyncResponse> {
  const lastIdx = log.state.lastEventAppliedIdx;
  const snap = await log.snapshot();
  const floor = snap?.idx ?? -1;
  // A follower shares our history when we hold the same event at its last index (or it holds nothing and
  // we have no snapshot, so our log starts at 0). Anything else starts over from our snapshot.
  const shares = req.after <= lastIdx && req.after >= floor &&
    (req.after === -1 ? req.eventId === null : (await log.eventIdAt(req.after)) === req.eventId);
  if (shares) return { snapshot: null, events: await log.since(req.after, SYNC_BATCH), lastIdx };
  const base: Snapshot = snap ?? { idx: -1, eventId: null, session: log.currentSession, state: emptyState() };
  return { snapshot: base, events: await log.since(base.idx, SYNC_BATCH), lastIdx };
}

/** Follower side: applies an answer; returns whether more remains to fetch. */
export async function applySync(log: EventLog, res: SyncResponse): Promise<boolean> {
  if (res.snapshot) await log.reset(res.snapshot);
  for (const ie of res.events) {
    if (ie.idx <= log.state.lastEventAppliedIdx) continue;
    if (ie.idx !== log.state.lastEventAppliedIdx + 1) return true;
    await log.appendIndexed(ie);
  }
  return log.state.lastEventAppliedIdx < res.lastIdx && res.events.length > 0;
}

/** Follower side: applies a pushed event when it extends our history; false means "pull instead". */
export async function applyPush(log: EventLog, p: Push): Promise<boolean> {
  const last = log.state.lastEventAppliedIdx;
  if (p.event.idx <= last) return true;
  if (p.event.idx !== last + 1 || p.prevEventId !== log.lastEventId) return false;
  await log.appendIndexed(p.event);
  return true;
}

export function pushOf(master: string, prevEventId: string | null, ie: IndexedEvent): Push {
  return { master, prevEventId, event: ie };
}

export { eventIdOf };
