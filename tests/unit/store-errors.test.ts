/**
 * A failed database write described in one sentence: the path and the cause at the bottom of the error
 * chain (drizzle's "Failed query" alone hides a full disk). The real SQLITE_FULL is in health.test.ts.
 */
import { describe, expect, it } from "vitest";
import { describeStoreError } from "../../src/store/db.ts";

/** An error shaped like drizzle's: "Failed query: <sql>" with the driver's error as its cause. */
function wrapped(cause: Error & { code?: string }): Error {
  return new Error('Failed query: insert into "events" (...) values (?, ?)\nparams: 1,x', { cause });
}
const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

describe("describeStoreError", () => {
  const table: { name: string; error: unknown; expect: string }[] = [
    {
      name: "SQLITE_FULL under drizzle's wrapper",
      error: wrapped(coded("SQLITE_FULL: database or disk is full", "SQLITE_FULL")),
      expect: "cannot write /d/skulk.db: the disk is full (SQLITE_FULL: database or disk is full)",
    },
    {
      name: "ENOSPC from the file system",
      error: wrapped(coded("No space left on device (os error 28)", "ENOSPC")),
      expect: "cannot write /d/skulk.db: the disk is full (ENOSPC: No space left on device (os error 28))",
    },
    {
      name: "another SQLite error keeps its code",
      error: wrapped(coded("attempt to write a readonly database", "SQLITE_READONLY")),
      expect: "cannot write /d/skulk.db: SQLITE_READONLY: attempt to write a readonly database",
    },
    { name: "a plain error", error: new Error("boom"), expect: "cannot write /d/skulk.db: boom" },
    { name: "not an error at all", error: "odd", expect: "cannot write /d/skulk.db: odd" },
  ];
  for (const c of table) {
    it(c.name, () => expect(describeStoreError(c.error, "/d/skulk.db")).toBe(c.expect));
  }
});
