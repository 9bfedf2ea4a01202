/**
 * The `skulk` program: builds the commander CLI from the command modules in cli/ and turns every
 * expected failure (bad config, busy data dir, refused SQL, unreachable node) into one clear line.
 */
import { Command, CommanderError } from "commander";
import { registerCards } from "./cli/cards.ts";
import { registerCluster } from "./cli/cluster.ts";
import { CliError } from "./cli/common.ts";
import { registerDev } from "./dev/cli.ts";
import { registerEngine } from "./cli/engine.ts";
import { registerModels } from "./cli/models.ts";
import { registerNode } from "./cli/node.ts";
import { registerRun } from "./cli/run.ts";
import { registerService } from "./cli/service.ts";
import { registerSql } from "./cli/sql.ts";
import { registerStatus } from "./cli/status.ts";
import { TrustError } from "./cluster/secret.ts";
import { ConfigError } from "./config/load.ts";
import { PortInUse } from "./daemon/node.ts";
import { DataDirBusy } from "./node/lock.ts";
import { UPSTREAM_API_VERSION, VERSION } from "./version.ts";

export function buildProgram(): Command {
  const program = new Command("skulk")
    .description(
      "Skulk: join your machines into one cluster and serve AI models behind one OpenAI-compatible endpoint",
    )
    .version(VERSION, "-V, --version")
    .showHelpAfterError("(run with --help for usage)")
    // An option after a subcommand belongs to it (`models add --data-dir` is add's, not models').
    .enablePositionalOptions()
    .exitOverride();
  registerRun(program);
  registerStatus(program);
  registerSql(program);
  registerModels(program);
  registerEngine(program);
  registerDev(program);
  registerNode(program);
  registerCards(program);
  registerCluster(program);
  registerService(program);
  program.command("version")
    .description("print the Skulk version and the upstream API it is compatible with")
    .option("--json", "as JSON")
    .action((flags) => {
      const info = {
        version: VERSION,
        upstreamApi: UPSTREAM_API_VERSION,
        deno: Deno.version.deno,
        os: Deno.build.os,
        arch: Deno.build.arch,
      };
      console.log(
        flags.json
          ? JSON.stringify(info)
          : `skulk ${VERSION} (upstream API ${UPSTREAM_API_VERSION}; deno ${info.deno}, ${info.os}/${info.arch})`,
      );
    });
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: "user" });
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode;
    if (e instanceof ConfigError || e instanceof TrustError) {
      console.error(`skulk: ${e.message}`);
      return 2;
    }
    if (e instanceof DataDirBusy) {
      console.error(`skulk: ${e.message}`);
      return 3;
    }
    if (e instanceof PortInUse) {
      console.error(`skulk: ${e.message}`);
      return 75; // upstream's "transient, retry" code for supervisors
    }
    if (e instanceof CliError) {
      console.error(`skulk: ${e.message}`);
      return e.exitCode;
    }
    console.error(`skulk: unexpected error: ${(e as Error).stack ?? e}`);
    return 1;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
