/**
 * The replicated event log of one node: the master indexes events and every node persists them to
 * SQLite `events` and folds them into ClusterState. Listeners (history, worker) see each applied event.
 */
import { asc, gt } from "drizzle-orm";
import type { Db } from "../store/db.ts";
import { events } from "../store/schema.ts";
import { type Event, EventSchema, eventType, type IndexedEvent } from "./events.ts";
import { apply, type ClusterState, emptyState } from "./state.ts";

export type EventListener = (ie: IndexedEvent, before: ClusterState, after: ClusterState) => void | Promise<void>;

export class EventLog {
  #state: ClusterState = emptyState();
  #listeners: EventListener[] = [];
  // Appends are serialised so indices are dense even when callers race.
  #tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly db: Db, private session: string) {}

  get state(): ClusterState {
    return this.#state;
  }

  setSession(session: string): void {
    this.session = session;
  }

  onApplied(listener: EventListener): void {
    this.#listeners.push(listener);
  }

  /** Rebuilds state from what this node persisted (a restart keeps the cluster's history). */
  async load(): Promise<number> {
    const rows = await this.db.select().from(events).where(gt(events.idx, -1)).orderBy(asc(events.idx));
    let s = emptyState();
    for (const r of rows) {
      s = apply(s, { idx: r.idx, session: r.session, event: EventSchema.parse(JSON.parse(r.payload)) });
    }
    this.#state = s;
    return rows.length;
  }

  /** Master: gives the event the next index, persists it and applies it. */
  append(event: Event): Promise<IndexedEvent> {
    const run = this.#tail.then(() => this.#commit({ idx: this.#state.lastEventAppliedIdx + 1, session: this.session, event }));
    this.#tail = run.catch(() => undefined);
    return run;
  }

  async #commit(ie: IndexedEvent): Promise<IndexedEvent> {
    const before = this.#state;
    const after = apply(before, ie);
    await this.db.insert(events).values({
      idx: ie.idx,
      session: ie.session,
      type: eventType(ie.event),
      payload: JSON.stringify(ie.event),
      createdAt: new Date().toISOString(),
    });
    this.#state = after;
    for (const l of this.#listeners) await l(ie, before, after);
    return ie;
  }
}
