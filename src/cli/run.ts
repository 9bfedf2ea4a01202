/** `skulk run`: the node daemon. Resolves config, starts the node, and stops it cleanly on a signal. */
import type { Command } from "commander";
import { joinConflict } from "../cluster/secret.ts";
import { ConfigError, loadConfig } from "../config/load.ts";
import { startNode } from "../daemon/node.ts";
import { setupLogging } from "../log/mod.ts";
import { logOutputsOf } from "../log/outputs.ts";
import { daemonPlanes } from "../daemon/planes.ts";
import { dispose } from "@logtape/logtape";
import { restartHook } from "../daemon/restart.ts";

export function registerRun(program: Command): void {
  program.command("run")
    .description("run this machine's node: join or form a cluster and serve the API and dashboard")
    .option(
      "--api-port <port>",
      "HTTP port of the API and dashboard (env SKULK_API_PORT, default 52415; 0 = any free port)",
    )
    .option("--api-host <host>", "address the API binds (env SKULK_API_HOST, default 0.0.0.0)")
    .option("--data-dir <dir>", "state, identity and models live here (env SKULK_DATA_DIR, default ~/.skulk)")
    .option(
      "--models-dir <dir>",
      "where model files are stored (env SKULK_MODELS_DIR, default <data-dir>/models)",
    )
    .option(
      "--friendly-name <name>",
      "name shown for this node (env SKULK_FRIENDLY_NAME, default the hostname)",
    )
    .option("--namespace <name>", "cluster namespace; nodes join only their own (env SKULK_NAMESPACE)")
    .option(
      "--peer <host:port>",
      "a static peer's API address (repeatable; env SKULK_PEERS, comma-separated)",
      (v: string, acc: string[]) => [...acc, v],
      [] as string[],
    )
    .option(
      "--join <token>",
      "join the cluster of a `skulk cluster token`: keeps its secret, uses its namespace, adds its node as a peer (env SKULK_JOIN)",
    )
    .option("--no-worker", "coordinate only: run no models on this node")
    .option("--force-master", "always win the master election (for operators; env SKULK_FORCE_MASTER)")
    .option("--no-mdns", "do not discover or announce peers by mDNS (env SKULK_MDNS=0)")
    .option(
      "--default-model <id-or-path>",
      "place this model (an id, or a local .gguf file) at start unless placed (env SKULK_DEFAULT_MODEL)",
    )
    .option("--log-level <level>", "trace, debug, info, warning or error (env SKULK_LOG_LEVEL)")
    .option("--log-format <fmt>", "auto, json or pretty (env SKULK_LOG_FORMAT)")
    .option("--config <file>", "skulk.yaml to read (env SKULK_CONFIG, default ./skulk.yaml)")
    .action(async (flags: Record<string, unknown>) => {
      // commander sets worker=true unless --no-worker; only an explicit --no-worker is a flag value.
      if (flags.worker === true) delete flags.worker;
      if (flags.mdns === true) delete flags.mdns;
      const { config, yamlPath } = loadConfig(flags);
      const conflict = config.join && joinConflict(config.join, config.namespace);
      if (conflict) throw new ConfigError([`cluster.join: ${conflict}`]);
      await setupLogging(config.logLevel, config.logFormat, logOutputsOf(config));
      const node = await startNode({ config, configPath: yamlPath, planes: daemonPlanes(config) });
      const restart = restartHook(node, config.supervised);
      node.ctx.restart = restart.request;
      console.log(`skulk node ${node.ctx.nodeId} serving at ${node.url} (dashboard: ${node.url}/)`);
      for (const sig of ["SIGINT", "SIGTERM"] as const) {
        Deno.addSignalListener(sig, () => void node.shutdown(`received ${sig}`));
      }
      await node.finished;
      const code = restart.afterStop();
      await dispose(); // flush the last log lines before the process ends
      Deno.exit(code);
    });
}
