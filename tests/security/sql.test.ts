/**
 * `skulk sql` against a real node's database: the file and its WAL keep their bytes whatever is asked (checked by
 * sha256), at the guard and, below it, at the SQLite connection; a statement that never ends is stopped.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { queryReadOnly } from "../../src/store/readonly.ts";
import { allowed, runReadOnly } from "../../src/store/readonly-conn.ts";
import { constants } from "node:sqlite";

const NEVER_ENDS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

let root: string;
let dataDir: string;
let db: string;

const sha = (path: string) => {
  try {
    return createHash("sha256").update(Deno.readFileSync(path)).digest("hex");
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "absent";
    throw e;
  }
};
/** The database and its WAL (the -shm is shared memory every reader writes its read marks to, by design). */
const hashes = () => ({ db: sha(db), wal: sha(`${db}-wal`) });

beforeAll(async () => {
  root = tempDir("sql-security-");
  dataDir = `${root}/node`;
  db = `${dataDir}/skulk.db`;
  // A node killed mid-run leaves committed pages in the WAL: any connection that checkpoints rewrites the file.
  const d: Daemon = await startDaemon({ dataDir, timeoutMs: 60_000 });
  await d.kill();
  expect(Deno.statSync(`${db}-wal`).size).toBeGreaterThan(0);
}, 120_000);

afterAll(() => Deno.removeSync(root, { recursive: true }));

describe("skulk sql never changes the database", () => {
  it(
    "leaves the file and its WAL byte for byte after checkpoints, writes, VACUUM and ATTACH through the CLI",
    async () => {
      const before = hashes();
      const attempts: [string, number][] = [
        ["PRAGMA wal_checkpoint", 2],
        ["PRAGMA wal_checkpoint(TRUNCATE)", 2],
        ["PRAGMA optimize", 2],
        ["VACUUM", 2],
        [
          "INSERT INTO events (idx, session, type, payload, created_at) VALUES (999999, 's', 't', 'p', 'c')",
          2,
        ],
        [`ATTACH '${root}/other.db' AS o`, 2],
        ["SELECT count(*) AS n FROM nodes", 0],
      ];
      for (const [sql, code] of attempts) {
        const r = await skulk(["sql", "--data-dir", dataDir, sql]);
        expect(r.code, `${sql}: ${r.stderr}`).toBe(code);
        if (code !== 0) expect(r.stderr).toMatch(/read-only|refused/);
        expect(hashes(), sql).toEqual(before);
      }
      expect(() => Deno.statSync(`${root}/other.db`)).toThrow(Deno.errors.NotFound);
      const { rows } = await queryReadOnly(db, "PRAGMA integrity_check");
      expect(rows).toEqual([{ integrity_check: "ok" }]);
      expect(hashes()).toEqual(before);
    },
    120_000,
  );

  it("refuses writes at the SQLite connection too, below the guard", () => {
    const before = hashes();
    const attempts = [
      "PRAGMA wal_checkpoint",
      "PRAGMA wal_checkpoint(TRUNCATE)",
      "PRAGMA journal_mode = DELETE",
      "PRAGMA user_version = 7",
      "VACUUM",
      `VACUUM INTO '${root}/copy.db'`,
      "INSERT INTO events (idx, session, type, payload, created_at) VALUES (999999, 's', 't', 'p', 'c')",
      "DELETE FROM events",
      "DROP TABLE events",
      "CREATE TABLE t (a)",
      `ATTACH '${db}' AS again`,
      "BEGIN IMMEDIATE",
    ];
    for (const sql of attempts) {
      const reply = runReadOnly({ file: db, sql, args: [] });
      expect(reply.ok, sql).toBe(false);
      expect(hashes(), sql).toEqual(before);
    }
    expect(() => Deno.statSync(`${root}/copy.db`)).toThrow(Deno.errors.NotFound);
    const ok = runReadOnly({ file: db, sql: "SELECT * FROM pragma_table_info('events')", args: [] });
    expect(ok.ok).toBe(true);
    expect(hashes()).toEqual(before);
  });
});

describe("skulk sql stops a statement that never ends", () => {
  it("after --timeout seconds, with exit code 124 and a message naming the limit", async () => {
    const started = Date.now();
    const r = await skulk(["sql", "--data-dir", dataDir, "--timeout", "1", NEVER_ENDS]);
    expect(r.code, r.stderr).toBe(124);
    expect(r.stderr).toMatch(/ran longer than 1 s and was stopped/);
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);

  it("after 10 s by default", async () => {
    const started = Date.now();
    const r = await skulk(["sql", "--data-dir", dataDir, NEVER_ENDS]);
    expect(r.code, r.stderr).toBe(124);
    expect(r.stderr).toMatch(/ran longer than 10 s/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(10_000);
  }, 90_000);

  it("refuses a --timeout that is not a positive number", async () => {
    const r = await skulk(["sql", "--data-dir", dataDir, "--timeout", "0", "SELECT 1"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--timeout must be a positive number/);
  }, 60_000);
});

describe("the connection's authorizer", () => {
  const code = (name: string) => (constants as unknown as Record<string, number>)[name];
  const table: [string, string | null, string | null, boolean][] = [
    ["SQLITE_SELECT", null, null, true],
    ["SQLITE_READ", "events", "payload", true],
    ["SQLITE_FUNCTION", null, "json_extract", true],
    ["SQLITE_RECURSIVE", null, null, true],
    ["SQLITE_PRAGMA", "integrity_check", null, true],
    ["SQLITE_PRAGMA", "table_info", "events", true],
    ["SQLITE_PRAGMA", "wal_checkpoint", null, false],
    ["SQLITE_PRAGMA", "WAL_CHECKPOINT", "TRUNCATE", false],
    ["SQLITE_PRAGMA", "optimize", null, false],
    ["SQLITE_PRAGMA", "journal_mode", "delete", false],
    ["SQLITE_PRAGMA", "user_version", "7", false],
    ["SQLITE_ATTACH", "/tmp/x.db", null, false],
    ["SQLITE_DETACH", "x", null, false],
    ["SQLITE_TRANSACTION", "BEGIN", null, false],
    ["SQLITE_INSERT", "events", null, false],
    ["SQLITE_UPDATE", "events", "payload", false],
    ["SQLITE_DELETE", "events", null, false],
    ["SQLITE_CREATE_TABLE", "t", null, false],
    ["SQLITE_DROP_TABLE", "events", null, false],
  ];
  it.each(table)("%s %s %s -> %s", (action, a1, a2, want) => {
    expect(code(action)).toBeTypeOf("number");
    expect(allowed(code(action), a1, a2)).toBe(want);
  });
});
