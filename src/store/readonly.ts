/**
 * Read-only SQL over a state database for `skulk sql`: a guard that refuses anything but one read statement, then
 * the statement on a read-only connection (readonly-conn.ts) in a worker, stopped after a time limit.
 */
import type { SqlArg, WorkerReply, WorkerRequest } from "./readonly-conn.ts";

export class ReadOnlyRefusal extends Error {
  override name = "ReadOnlyRefusal";
}

/** The statement ran past its time limit and was stopped. */
export class QueryTimeout extends Error {
  override name = "QueryTimeout";
}

export const DEFAULT_TIMEOUT_S = 10;

const READ_KEYWORDS = new Set(["SELECT", "WITH", "EXPLAIN", "VALUES", "PRAGMA"]);

/** Splits SQL into statements, ignoring `;` inside strings, quoted identifiers and comments. */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let cur = "";
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i];
    if (c === "'" || c === '"' || c === "`" || c === "[") {
      const close = c === "[" ? "]" : c;
      let j = i + 1;
      while (j < sql.length && sql[j] !== close) j++;
      cur += sql.slice(i, j + 1);
      i = j;
    } else if (c === "-" && sql[i + 1] === "-") {
      while (i < sql.length && sql[i] !== "\n") i++;
      cur += " ";
    } else if (c === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end === -1 ? sql.length : end + 1;
      cur += " ";
    } else if (c === ";") {
      if (cur.trim()) out.push(cur.trim());
      cur = "";
    } else cur += c;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

/** Throws ReadOnlyRefusal naming the problem, or returns the single statement to run. */
export function checkReadOnly(sql: string): string {
  const statements = splitStatements(sql);
  if (statements.length === 0) throw new ReadOnlyRefusal("no SQL statement given");
  if (statements.length > 1) {
    throw new ReadOnlyRefusal(`give one statement at a time (got ${statements.length})`);
  }
  const stmt = statements[0];
  const keyword = (stmt.match(/^[A-Za-z]+/)?.[0] ?? "").toUpperCase();
  if (keyword === "ATTACH" || keyword === "DETACH") {
    throw new ReadOnlyRefusal(`${keyword} is refused: skulk sql reads this node's state database only`);
  }
  if (!READ_KEYWORDS.has(keyword)) {
    throw new ReadOnlyRefusal(
      `${
        keyword || "this statement"
      } would write; skulk sql is read-only (SELECT, WITH, EXPLAIN, VALUES or PRAGMA reads)`,
    );
  }
  if (keyword === "PRAGMA" && /=|\(/.test(stmt)) {
    throw new ReadOnlyRefusal("PRAGMA assignments are refused: skulk sql is read-only");
  }
  return stmt;
}

export interface QueryResult {
  columns: string[];
  rows: Record<string, unknown>[];
}

export async function queryReadOnly(
  dbFile: string,
  sql: string,
  args: SqlArg[] = [],
  opts: { timeoutMs?: number } = {},
): Promise<QueryResult> {
  const stmt = checkReadOnly(sql);
  try {
    await Deno.stat(dbFile);
  } catch {
    throw new ReadOnlyRefusal(`no state database at ${dbFile} (has a node run with this --data-dir?)`);
  }
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_S * 1000;
  const reply = await inWorker({ file: dbFile, sql: stmt, args }, timeoutMs);
  if (!reply.ok) {
    if (reply.denied || /readonly|not authorized/i.test(reply.message)) {
      throw new ReadOnlyRefusal(
        `that statement would write or reach outside the database; skulk sql is read-only`,
      );
    }
    throw new ReadOnlyRefusal(reply.message.replace(/^SQLITE_\w+: /, ""));
  }
  const rows = reply.rows.map((r) => Object.fromEntries(reply.columns.map((c) => [c, normalize(r[c])])));
  return { columns: reply.columns, rows };
}

/**
 * SQLite runs a statement in C without yielding, so nothing on the calling thread can stop it, and node:sqlite
 * has no interrupt. It runs in a worker instead; at the time limit the worker is terminated and the caller gets
 * QueryTimeout. V8 cannot end C code already running in that thread: it spins until the process exits, which
 * `skulk sql` does at once (the CLI's error path); a long-lived caller should keep its statements bounded.
 */
function inWorker(request: WorkerRequest, timeoutMs: number): Promise<WorkerReply> {
  // A literal URL beside the module; `deno compile` embeds it through `--include` (see the Makefile).
  const worker = new Worker(new URL("./readonly-worker.ts", import.meta.url).href, { type: "module" });
  const done = Promise.withResolvers<WorkerReply>();
  const timer = setTimeout(() => {
    done.reject(
      new QueryTimeout(`the statement ran longer than ${timeoutMs / 1000} s and was stopped (see --timeout)`),
    );
  }, timeoutMs);
  worker.onmessage = (e: MessageEvent<WorkerReply>) => done.resolve(e.data);
  worker.onerror = (e: ErrorEvent) => {
    e.preventDefault();
    done.resolve({ ok: false, message: e.message, denied: false });
  };
  worker.postMessage(request);
  return done.promise.finally(() => {
    clearTimeout(timer);
    worker.terminate();
  });
}

function normalize(v: unknown): unknown {
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof Uint8Array) return `<${v.byteLength} bytes>`;
  return v;
}

/** Renders rows as an aligned text table. */
export function formatTable(result: QueryResult): string {
  const cells = result.rows.map((r) =>
    result.columns.map((c) => (r[c] === null || r[c] === undefined ? "NULL" : String(r[c])))
  );
  const widths = result.columns.map((c, i) =>
    Math.max(c.length, ...cells.map((row) => Math.min(row[i].length, 80)))
  );
  const line = (vals: string[]) =>
    vals.map((v, i) => (v.length > 80 ? v.slice(0, 77) + "..." : v).padEnd(widths[i])).join(" | ").trimEnd();
  const out = [line(result.columns), widths.map((w) => "-".repeat(w)).join("-+-"), ...cells.map(line)];
  out.push(`(${result.rows.length} row${result.rows.length === 1 ? "" : "s"})`);
  return out.join("\n");
}
