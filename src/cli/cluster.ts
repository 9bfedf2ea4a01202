/**
 * `skulk cluster token`: prints the join token of this data dir's cluster (its secret, namespace and this
 * node's API address), read from the data dir so it works whether the daemon runs or not.
 */
import type { Command } from "commander";
import { loadConfig } from "../config/load.ts";
import { encodeJoinToken, readClusterFile } from "../cluster/secret.ts";
import { CliError } from "./common.ts";

export function registerCluster(program: Command): void {
  const cluster = program.command("cluster").description("this node's cluster membership");
  cluster.command("token")
    .description("print a join token: on another machine, `skulk run --join <token>` joins this cluster")
    .option("--data-dir <dir>", "data dir of the node (env SKULK_DATA_DIR, default ~/.skulk)")
    .option("--config <file>", "skulk.yaml to read (env SKULK_CONFIG)")
    .option(
      "--address <host:port>",
      "the API address other nodes reach this one at (default: the one it reported at its last start)",
    )
    .action((flags: { dataDir?: string; config?: string; address?: string }) => {
      const { config } = loadConfig({ dataDir: flags.dataDir, config: flags.config });
      let stored;
      try {
        stored = readClusterFile(config.dataDir);
      } catch (e) {
        throw new CliError((e as Error).message);
      }
      const secret = config.clusterSecret ?? stored?.secret ?? null;
      if (!secret) {
        throw new CliError(
          `${config.dataDir} holds no cluster secret: a node makes one at its first start with SKULK_API_KEY set (or set SKULK_CLUSTER_SECRET); without either it trusts its LAN and needs no token`,
        );
      }
      if (config.clusterSecret && config.clusterSecret.length < 32) {
        throw new CliError("SKULK_CLUSTER_SECRET is shorter than the 32 characters a join token carries");
      }
      const address = flags.address ?? stored?.apiAddress;
      if (!address || !/^[^\s:/]+:\d{1,5}$/.test(address)) {
        throw new CliError(
          address
            ? `--address must be host:port (got ${JSON.stringify(address)})`
            : "this node has not run yet, so its address is unknown; pass --address <host:port>",
        );
      }
      const namespace = config.namespace !== "default" ? config.namespace : stored?.namespace ?? "default";
      console.log(encodeJoinToken({ secret, namespace, address }));
    });
}
