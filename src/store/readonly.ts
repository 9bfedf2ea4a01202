/**
 * Read-only SQL over a state database for `skulk sql`: one statement, reads only, on a connection that
 * SQLite itself keeps query-only, so a refused statement can never change the file.
 */
import { createClient, type InValue } from "@libsql/client/node";

export class ReadOnlyRefusal extends Error {
  override name = "ReadOnlyRefusal";
}

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

export async function queryReadOnly(dbFile: string, sql: string, args: InValue[] = []): Promise<QueryResult> {
  const stmt = checkReadOnly(sql);
  try {
    await Deno.stat(dbFile);
  } catch {
    throw new ReadOnlyRefusal(`no state database at ${dbFile} (has a node run with this --data-dir?)`);
  }
  const client = createClient({ url: `file:${dbFile}` });
  try {
    await client.execute("PRAGMA query_only = ON");
    await client.execute("PRAGMA busy_timeout = 5000");
    const rs = await client.execute({ sql: stmt, args });
    const rows = rs.rows.map((r) => Object.fromEntries(rs.columns.map((c, i) => [c, normalize(r[i])])));
    return { columns: rs.columns, rows };
  } catch (e) {
    const msg = (e as Error).message;
    if (/READONLY/i.test(msg)) {
      throw new ReadOnlyRefusal("that statement would write; skulk sql is read-only");
    }
    throw new ReadOnlyRefusal(msg.replace(/^SQLITE_\w+: /, ""));
  } finally {
    client.close();
  }
}

function normalize(v: unknown): unknown {
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof ArrayBuffer) return `<${v.byteLength} bytes>`;
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
