/**
 * One read-only SQLite connection for `skulk sql` (in the worker readonly.ts starts): opened SQLITE_OPEN_READONLY,
 * so the file and its WAL are never written nor checkpointed, with an authorizer that admits reads only.
 */
import { constants, DatabaseSync, type SQLInputValue } from "node:sqlite";

// The authorizer refuses ATTACH (and so `VACUUM INTO` a file elsewhere, which attaches it), transactions, writes
// and the pragmas that write without a value; read-only opening alone would still let `VACUUM INTO` write a copy.

// @libsql/client, the daemon's driver, refuses `?mode=ro` in its URL and cannot interrupt a statement; node:sqlite
// (built into Deno) opens read-only and takes an authorizer. Deno's runtime has both; its type declarations lag.
type AuthorizerCode =
  | "SQLITE_OK"
  | "SQLITE_DENY"
  | "SQLITE_SELECT"
  | "SQLITE_READ"
  | "SQLITE_FUNCTION"
  | "SQLITE_RECURSIVE"
  | "SQLITE_PRAGMA";
const C = constants as unknown as Record<AuthorizerCode, number>;
type Authorizer = (action: number, arg1: string | null, arg2: string | null) => number;

export type SqlArg = string | number | bigint | null | Uint8Array;

export interface WorkerRequest {
  file: string;
  sql: string;
  args: SqlArg[];
}

export type WorkerReply =
  | { ok: true; columns: string[]; rows: Record<string, unknown>[] }
  | { ok: false; message: string; denied: boolean };

/** Pragmas that write (the file, the WAL) even without a value. */
const WRITING_PRAGMAS = new Set(["wal_checkpoint", "optimize", "incremental_vacuum"]);
/** Pragmas that take an argument and only read (also reached as `SELECT * FROM pragma_table_info('t')`). */
const READING_PRAGMAS_WITH_ARG = new Set([
  "table_info",
  "table_xinfo",
  "table_list",
  "index_list",
  "index_info",
  "index_xinfo",
  "foreign_key_list",
  "foreign_key_check",
  "integrity_check",
  "quick_check",
]);

/** Pure: whether the authorizer lets an action through (SQLite's action code, then its two arguments). */
export function allowed(action: number, arg1: string | null, arg2: string | null): boolean {
  switch (action) {
    case C.SQLITE_SELECT:
    case C.SQLITE_READ:
    case C.SQLITE_FUNCTION:
    case C.SQLITE_RECURSIVE:
      return true;
    case C.SQLITE_PRAGMA: {
      const name = (arg1 ?? "").toLowerCase();
      if (WRITING_PRAGMAS.has(name)) return false;
      return arg2 === null || READING_PRAGMAS_WITH_ARG.has(name);
    }
    default:
      return false;
  }
}

export function runReadOnly({ file, sql, args }: WorkerRequest): WorkerReply {
  let db: DatabaseSync | null = null;
  let denied = false;
  try {
    db = new DatabaseSync(file, { readOnly: true, timeout: 5000 });
    (db as unknown as { setAuthorizer(f: Authorizer): void }).setAuthorizer((action, arg1, arg2) => {
      if (allowed(action, arg1, arg2)) return C.SQLITE_OK;
      denied = true;
      return C.SQLITE_DENY;
    });
    const stmt = db.prepare(sql);
    stmt.setReadBigInts(true);
    const columns = stmt.columns().map((c) => c.name);
    const rows = stmt.all(...(args as SQLInputValue[])) as Record<string, unknown>[];
    return { ok: true, columns, rows };
  } catch (e) {
    return { ok: false, message: (e as Error).message, denied };
  } finally {
    db?.close();
  }
}
