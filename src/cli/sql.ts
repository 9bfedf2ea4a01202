/** `skulk sql`: read-only SQL over a node's state database, whether or not the node is running. */
import type { Command } from "commander";
import { dbPath } from "../store/db.ts";
import {
  DEFAULT_TIMEOUT_S,
  formatTable,
  queryReadOnly,
  QueryTimeout,
  ReadOnlyRefusal,
} from "../store/readonly.ts";
import { CliError, resolveDataDir } from "./common.ts";

export function registerSql(program: Command): void {
  program.command("sql")
    .description(
      "run one read-only SQL statement on the state database (tables: nodes, events, instances, download_failures, ...)",
    )
    .argument("<query>", "a SELECT, WITH, EXPLAIN, VALUES or read-only PRAGMA statement")
    .option("--data-dir <dir>", "data dir whose database to read (env SKULK_DATA_DIR, default ~/.skulk)")
    .option("--config <file>", "skulk.yaml to read the data dir from")
    .option("--json", "print rows as a JSON array")
    .option("--timeout <seconds>", "stop the statement after this many seconds", String(DEFAULT_TIMEOUT_S))
    .action(async (query: string, flags) => {
      const file = dbPath(resolveDataDir(flags));
      const seconds = Number(flags.timeout);
      if (!(seconds > 0) || !Number.isFinite(seconds)) {
        throw new CliError(`sql: --timeout must be a positive number of seconds, got '${flags.timeout}'`, 2);
      }
      try {
        const result = await queryReadOnly(file, query, [], { timeoutMs: seconds * 1000 });
        console.log(flags.json ? JSON.stringify(result.rows, null, 2) : formatTable(result));
      } catch (e) {
        if (e instanceof ReadOnlyRefusal) throw new CliError(`sql: ${e.message}`, 2);
        // 124, as coreutils' timeout(1) reports a command it stopped.
        if (e instanceof QueryTimeout) throw new CliError(`sql: ${e.message}`, 124);
        throw e;
      }
    });
}
