/**
 * The replicated event log of one node: the master indexes events and every node persists them to
 * SQLite `events` and folds them into ClusterState. Listeners (history, worker) see each applied event.
 * Every SNAPSHOT_EVERY events the state is saved (kv `cluster.snapshot`), so a joiner needs state + tail only.
 */
import { and, asc, eq, gt, lte } from "drizzle-orm";
import { type Db, StoreWriteError } from "../store/db.ts";
import { events, kv } from "../store/schema.ts";
import { type Event, EventSchema, eventType, type IndexedEvent } from "./events.ts";
import { apply, type ClusterState, emptyState } from "./state.ts";

export type EventListener = (
  ie: IndexedEvent,
  before: ClusterState,
  after: ClusterState,
) => void | Promise<void>;

export const SNAPSHOT_EVERY = 64;
const SNAPSHOT_KEY = "cluster.snapshot";

/** ClusterState at index `idx`, with the id of the event at `idx` so a follower can check it shares that history. */
export interface Snapshot {
  idx: number;
  eventId: string | null;
  session: string;
  state: ClusterState;
}

export const eventIdOf = (e: Event): string => (Object.values(e)[0] as { eventId: string }).eventId;

/** The election clock of a session label `<master>/<clock>`: what orders sessions (Raft's term). */
export const clockOfSession = (session: string | null): number =>
  session === null ? -1 : Number(session.slice(session.lastIndexOf("/") + 1)) || 0;

export class EventLog {
  #state: ClusterState = emptyState();
  #lastEventId: string | null = null;
  /** The session that indexed the last event held: with the index, how up to date this log is. */
  #lastSession: string | null = null;
  #listeners: EventListener[] = [];
  #resetListeners: ((state: ClusterState) => void)[] = [];
  /** Callers waiting for this node to apply an index (read-your-writes), woken after the listeners ran. */
  #indexWaiters = new Set<{ idx: number; done: (applied: boolean) => void }>();
  // Appends are serialised so indices are dense even when callers race.
  #tail: Promise<unknown> = Promise.resolve();

  #writeError: { message: string; at: number } | null = null;

  /** `path` names the database in errors (a full disk says where). */
  constructor(
    private readonly db: Db,
    private session: string,
    private readonly path = "the state database",
  ) {}

  /** The last failed write of an event or snapshot, until a later one succeeds (health reports it). */
  get writeError(): { message: string; at: number } | null {
    return this.#writeError;
  }

  /** Runs a write; a failure is remembered and rethrown naming the path and its cause. */
  async #write<T>(f: () => Promise<T>): Promise<T> {
    try {
      const out = await f();
      this.#writeError = null;
      return out;
    } catch (e) {
      const err = e instanceof StoreWriteError ? e : new StoreWriteError(e, this.path);
      this.#writeError = { message: err.message, at: Date.now() };
      throw err;
    }
  }

  get state(): ClusterState {
    return this.#state;
  }

  get lastEventId(): string | null {
    return this.#lastEventId;
  }

  /** The election clock of the session that indexed this log's last event (-1 for an empty log). */
  get lastTerm(): number {
    return clockOfSession(this.#lastSession);
  }

  get currentSession(): string {
    return this.session;
  }

  setSession(session: string): void {
    this.session = session;
  }

  onApplied(listener: EventListener): void {
    this.#listeners.push(listener);
  }

  /** Called when a follower replaces its state wholesale from the master's snapshot. */
  onReset(listener: (state: ClusterState) => void): void {
    this.#resetListeners.push(listener);
  }

  /** Rebuilds state from what this node persisted (a restart keeps the cluster's history). */
  async load(): Promise<number> {
    const snap = await this.snapshot();
    const floor = snap?.idx ?? -1;
    const rows = await this.db.select().from(events).where(gt(events.idx, floor)).orderBy(asc(events.idx));
    let s = snap?.state ?? emptyState();
    let last = snap?.eventId ?? null;
    let lastSession = snap && snap.idx >= 0 ? snap.session : null;
    for (const r of rows) {
      const event = EventSchema.parse(JSON.parse(r.payload));
      s = apply(s, { idx: r.idx, session: r.session, event });
      last = eventIdOf(event);
      lastSession = r.session;
    }
    this.#state = s;
    this.#lastEventId = last;
    this.#lastSession = lastSession;
    return rows.length;
  }

  /** Master: gives the event the next index, persists it and applies it. */
  append(event: Event): Promise<IndexedEvent> {
    return this.#serial(() =>
      this.#commit({ idx: this.#state.lastEventAppliedIdx + 1, session: this.session, event })
    );
  }

  /** Follower: applies an event the master indexed; it must be the next index. */
  appendIndexed(ie: IndexedEvent): Promise<IndexedEvent> {
    return this.#serial(() => this.#commit(ie));
  }

  /** Follower whose history diverged or lags past the master's snapshot: start over from the snapshot. */
  reset(snap: Snapshot): Promise<void> {
    return this.#serial(async () => {
      await this.#write(async () => {
        await this.db.delete(events);
        await this.#saveSnapshot(snap);
      });
      this.#state = snap.state;
      this.#lastEventId = snap.eventId;
      this.#lastSession = snap.idx >= 0 ? snap.session : null;
      for (const l of this.#resetListeners) l(snap.state);
      this.#wakeIndexWaiters();
    });
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(f);
    this.#tail = run.catch(() => undefined);
    return run;
  }

  async #commit(ie: IndexedEvent): Promise<IndexedEvent> {
    const before = this.#state;
    const after = apply(before, ie);
    await this.#write(() =>
      this.db.insert(events).values({
        idx: ie.idx,
        session: ie.session,
        type: eventType(ie.event),
        payload: JSON.stringify(ie.event),
        createdAt: new Date().toISOString(),
      })
    );
    this.#state = after;
    this.#lastEventId = eventIdOf(ie.event);
    this.#lastSession = ie.session;
    if ((ie.idx + 1) % SNAPSHOT_EVERY === 0) {
      await this.#write(() =>
        this.#saveSnapshot({
          idx: ie.idx,
          eventId: this.#lastEventId,
          session: ie.session,
          state: after,
        })
      );
    }
    for (const l of this.#listeners) await l(ie, before, after);
    this.#wakeIndexWaiters();
    return ie;
  }

  /**
   * Resolves true once this node has applied `idx` (its listeners ran: catalogue, history, worker), false
   * after `timeoutMs`. The node that was asked answers only then, so what it answered is what it lists.
   */
  waitForIndex(idx: number, timeoutMs: number): Promise<boolean> {
    if (this.#state.lastEventAppliedIdx >= idx) return Promise.resolve(true);
    return new Promise((resolve) => {
      const w = {
        idx,
        done: (applied: boolean) => {
          clearTimeout(timer);
          this.#indexWaiters.delete(w);
          resolve(applied);
        },
      };
      const timer = setTimeout(() => w.done(false), timeoutMs);
      this.#indexWaiters.add(w);
    });
  }

  #wakeIndexWaiters(): void {
    for (const w of this.#indexWaiters) if (this.#state.lastEventAppliedIdx >= w.idx) w.done(true);
  }

  async #saveSnapshot(s: Snapshot): Promise<void> {
    const value = JSON.stringify(s);
    const updatedAt = new Date().toISOString();
    await this.db.insert(kv).values({ key: SNAPSHOT_KEY, value, updatedAt }).onConflictDoUpdate({
      target: kv.key,
      set: { value, updatedAt },
    });
  }

  async snapshot(): Promise<Snapshot | null> {
    const row = await this.db.select().from(kv).where(eq(kv.key, SNAPSHOT_KEY)).get();
    return row ? JSON.parse(row.value) as Snapshot : null;
  }

  /** The id of the event this node holds at `idx`, or null when it holds none there. */
  async eventIdAt(idx: number): Promise<string | null> {
    if (idx === this.#state.lastEventAppliedIdx) return this.#lastEventId;
    const row = await this.db.select().from(events).where(eq(events.idx, idx)).get();
    if (row) return eventIdOf(EventSchema.parse(JSON.parse(row.payload)));
    const snap = await this.snapshot();
    return snap?.idx === idx ? snap.eventId : null;
  }

  /** Events after `after`, oldest first, at most `limit`. */
  async since(after: number, limit: number): Promise<IndexedEvent[]> {
    const upTo = after + limit;
    const rows = await this.db.select().from(events).where(and(gt(events.idx, after), lte(events.idx, upTo)))
      .orderBy(asc(events.idx));
    return rows.map((r) => ({
      idx: r.idx,
      session: r.session,
      event: EventSchema.parse(JSON.parse(r.payload)),
    }));
  }
}
