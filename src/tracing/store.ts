/**
 * The `trace_spans` table: a bounded buffer that writes spans in batches off the request path, the reads
 * the trace routes make, and pruning by age (`tracing.retention_days`) and by count (MAX_STORED_SPANS).
 */
import { and, desc, eq, inArray, lt, sql } from "drizzle-orm";
import { logger } from "../log/mod.ts";
import type { Db } from "../store/db.ts";
import { traceSpans } from "../store/schema.ts";
import { CATEGORIES, type Span, SpanSchema } from "./spans.ts";

const log = logger("tracing");

/** Spans waiting to be written; past it the oldest are dropped (and counted), never the request delayed. */
export const BUFFER_LIMIT = 10_000;
/** A batch is written at most this long after its first span arrived. */
export const FLUSH_AFTER_MS = 250;
/** Rows kept at most: past it the oldest go, whatever the retention (a busy node stays bounded on disk). */
export const MAX_STORED_SPANS = 500_000;
/** Rows per INSERT statement. */
const INSERT_CHUNK = 1_000;
/** Largest `limit` of one list. */
export const MAX_LIST = 500;

export class SpanWriter {
  #buffer: Span[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #busy: Promise<void> = Promise.resolve();
  /** Spans dropped because the buffer was full or a write failed. */
  dropped = 0;
  written = 0;

  constructor(private readonly db: Db, private readonly flushAfterMs = FLUSH_AFTER_MS) {}

  /** Queues spans; returns at once. */
  add(spans: Span[]): void {
    this.#buffer.push(...spans);
    const over = this.#buffer.length - BUFFER_LIMIT;
    if (over > 0) {
      this.#buffer.splice(0, over);
      this.dropped += over;
    }
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, this.flushAfterMs);
  }

  /** Writes what is buffered; resolves once written or dropped. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#busy = this.#busy.then(async () => {
      const batch = this.#buffer.splice(0);
      if (batch.length === 0) return;
      const createdAt = new Date().toISOString();
      let done = 0;
      try {
        // In chunks: SQLite takes at most 32766 bound values per statement (11 a row).
        for (; done < batch.length; done += INSERT_CHUNK) {
          await this.insert(batch.slice(done, done + INSERT_CHUNK), createdAt);
          this.written += Math.min(INSERT_CHUNK, batch.length - done);
        }
      } catch (e) {
        this.dropped += batch.length - done;
        log.warn("could not write {count} trace spans: {error}", {
          count: batch.length - done,
          error: (e as Error).message,
        });
      }
    });
    return this.#busy;
  }

  private async insert(batch: Span[], createdAt: string): Promise<void> {
    await this.db.insert(traceSpans).values(batch.map((s) => ({
      taskId: s.taskId,
      nodeId: s.nodeId,
      category: s.category,
      name: s.name,
      startUs: s.startUs,
      durationUs: s.durationUs,
      modelId: s.modelId,
      instanceId: s.instanceId,
      attrs: JSON.stringify(s.attrs),
      createdAt,
    })));
  }
}

type Row = typeof traceSpans.$inferSelect;

function spanOf(r: Row): Span {
  let attrs: Record<string, unknown> = {};
  try {
    const parsed = JSON.parse(r.attrs);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) attrs = parsed;
  } catch { /* a row edited by hand: keep the span, without its attributes */ }
  const category = (CATEGORIES as readonly string[]).includes(r.category) ? r.category : "request";
  return SpanSchema.parse({ ...r, category, attrs });
}

/** One trace's spans held here, in start order (empty when none). */
export async function spansOf(db: Db, taskId: string): Promise<Span[]> {
  const rows = await db.select().from(traceSpans).where(eq(traceSpans.taskId, taskId))
    .orderBy(traceSpans.startUs);
  return rows.map(spanOf);
}

/** The newest traces held here, newest first, with their spans and stored size. */
export async function recentTraces(
  db: Db,
  limit: number,
): Promise<{ taskId: string; createdAt: string; fileSize: number; spans: Span[] }[]> {
  const heads = await db.select({
    taskId: traceSpans.taskId,
    createdAt: sql<string>`min(${traceSpans.createdAt})`,
    // The text columns' bytes plus 40 for the fixed ones (ids, times), close to what the rows take on disk.
    fileSize: sql<
      number
    >`sum(length(${traceSpans.name}) + length(${traceSpans.attrs}) + length(${traceSpans.nodeId}) +
      length(${traceSpans.taskId}) + coalesce(length(${traceSpans.modelId}), 0) + coalesce(length(${traceSpans.instanceId}), 0) + 40)`,
  }).from(traceSpans).groupBy(traceSpans.taskId).orderBy(desc(sql`max(${traceSpans.id})`)).limit(limit);
  if (heads.length === 0) return [];
  const rows = await db.select().from(traceSpans)
    .where(inArray(traceSpans.taskId, heads.map((h) => h.taskId))).orderBy(traceSpans.startUs);
  const by = new Map<string, Span[]>();
  for (const r of rows) by.set(r.taskId, [...by.get(r.taskId) ?? [], spanOf(r)]);
  return heads.map((h) => ({ ...h, fileSize: Number(h.fileSize), spans: by.get(h.taskId) ?? [] }));
}

/** Deletes the spans of the given traces; returns which were found. */
export async function deleteTraces(
  db: Db,
  taskIds: string[],
): Promise<{ deleted: string[]; notFound: string[] }> {
  if (taskIds.length === 0) return { deleted: [], notFound: [] };
  const found = new Set(
    (await db.selectDistinct({ taskId: traceSpans.taskId }).from(traceSpans).where(
      inArray(traceSpans.taskId, taskIds),
    )).map((r) => r.taskId),
  );
  if (found.size > 0) await db.delete(traceSpans).where(inArray(traceSpans.taskId, [...found]));
  return { deleted: taskIds.filter((t) => found.has(t)), notFound: taskIds.filter((t) => !found.has(t)) };
}

/**
 * Deletes traces written before `cutoff` (null: no age limit) and the oldest rows beyond `maxRows`;
 * returns how many rows went.
 */
export async function pruneTraces(db: Db, cutoff: Date | null, maxRows = MAX_STORED_SPANS): Promise<number> {
  let gone = 0;
  if (cutoff) {
    gone += (await db.delete(traceSpans).where(lt(traceSpans.createdAt, cutoff.toISOString()))).rowsAffected;
  }
  const [top] = await db.select({ id: sql<number | null>`max(${traceSpans.id})` }).from(traceSpans);
  if (top?.id != null) {
    gone +=
      (await db.delete(traceSpans).where(and(lt(traceSpans.id, Number(top.id) - maxRows + 1)))).rowsAffected;
  }
  return gone;
}
