/**
 * Opens the node's SQLite state database (`<data-dir>/skulk.db`) in WAL mode, applies the embedded
 * migrations, and hands out the drizzle handle. The daemon is its only writer (see node/lock.ts).
 */
import { type Client, createClient } from "@libsql/client/node";
import { drizzle, type LibSQLDatabase } from "drizzle-orm/libsql";
import { MIGRATIONS } from "../generated/migrations.gen.ts";
import * as schema from "./schema.ts";

export type Db = LibSQLDatabase<typeof schema>;

export interface Store {
  client: Client;
  db: Db;
  path: string;
  close(): void;
}

/**
 * One sentence for a failed database write: the path and the cause at the bottom of the error chain
 * (drizzle wraps libsql's error in "Failed query: <sql>", which alone hides a full disk).
 */
export function describeStoreError(e: unknown, path: string): string {
  let code: string | undefined;
  let deepest = String(e);
  for (let x: unknown = e, i = 0; x && typeof x === "object" && i < 8; i++) {
    const err = x as { message?: unknown; code?: unknown; cause?: unknown };
    if (typeof err.code === "string" && /^(SQLITE_|E[A-Z]+$)/.test(err.code)) code ??= err.code;
    if (typeof err.message === "string" && err.message) deepest = err.message.split("\n")[0];
    x = err.cause;
  }
  const full = code === "SQLITE_FULL" || code === "ENOSPC" ||
    /SQLITE_FULL|ENOSPC|database or disk is full|no space left/i.test(deepest);
  const cause = `${code && !deepest.includes(code) ? `${code}: ` : ""}${deepest}`;
  return full ? `cannot write ${path}: the disk is full (${cause})` : `cannot write ${path}: ${cause}`;
}

/** A write to the state database failed; the message names the path and the cause. */
export class StoreWriteError extends Error {
  constructor(e: unknown, path: string) {
    super(describeStoreError(e, path), { cause: e });
    this.name = "StoreWriteError";
  }
}

export function dbPath(dataDir: string): string {
  return `${dataDir}/skulk.db`;
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Applies every embedded migration not yet recorded, each in its own transaction. */
export async function migrate(client: Client): Promise<string[]> {
  await client.execute(
    "CREATE TABLE IF NOT EXISTS schema_migrations (tag TEXT PRIMARY KEY, hash TEXT NOT NULL, applied_at TEXT NOT NULL)",
  );
  const done = new Map(
    (await client.execute("SELECT tag, hash FROM schema_migrations")).rows.map((
      r,
    ) => [String(r.tag), String(r.hash)]),
  );
  const applied: string[] = [];
  for (const m of MIGRATIONS) {
    const hash = await sha256(m.sql);
    const seen = done.get(m.tag);
    if (seen !== undefined) {
      if (seen !== hash) {
        throw new Error(`migration ${m.tag} changed after it was applied; migrations are append-only`);
      }
      continue;
    }
    const statements = m.sql.split("--> statement-breakpoint").map((s) => s.trim()).filter(Boolean);
    const tx = await client.transaction("write");
    try {
      for (const s of statements) await tx.execute(s);
      await tx.execute({
        sql: "INSERT INTO schema_migrations (tag, hash, applied_at) VALUES (?, ?, ?)",
        args: [m.tag, hash, new Date().toISOString()],
      });
      await tx.commit();
    } catch (e) {
      await tx.rollback();
      throw new Error(`migration ${m.tag} failed: ${(e as Error).message}`);
    }
    applied.push(m.tag);
  }
  return applied;
}

export async function openStore(dataDir: string): Promise<Store> {
  Deno.mkdirSync(dataDir, { recursive: true });
  const path = dbPath(dataDir);
  const client = createClient({ url: `file:${path}` });
  await client.execute("PRAGMA journal_mode = WAL");
  await client.execute("PRAGMA busy_timeout = 5000");
  await client.execute("PRAGMA synchronous = NORMAL");
  await client.execute("PRAGMA foreign_keys = ON");
  await migrate(client);
  return { client, db: drizzle(client, { schema }), path, close: () => client.close() };
}
