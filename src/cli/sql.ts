/** `skulk sql`: read-only SQL over a node's state database, whether or not the node is running. */
import type { Command } from "commander";
import { dbPath } from "../store/db.ts";
import { formatTable, queryReadOnly, ReadOnlyRefusal } from "../store/readonly.ts";
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
    .action(async (query: string, flags) => {
      const file = dbPath(resolveDataDir(flags));
      try {
        const result = await queryReadOnly(file, query);
        console.log(flags.json ? JSON.stringify(result.rows, null, 2) : formatTable(result));
      } catch (e) {
        if (e instanceof ReadOnlyRefusal) throw new CliError(`sql: ${e.message}`, 2);
        throw e;
      }
    });
}
