/** `skulk status`: asks a running node for the cluster and prints nodes, instances and runners. */
import type { Command } from "commander";
import type { Instance } from "../cluster/instances.ts";
import { instanceName } from "../engines/instance-name.ts";
import { formatBytes, getJson, nodeUrl } from "./common.ts";

interface WireState {
  instances: Record<
    string,
    Record<string, { shardAssignments: { modelId: string; nodeToRunner: Record<string, string> } }>
  >;
  runners: Record<string, Record<string, { errorMessage?: string }>>;
  lastSeen: Record<string, string>;
  nodeIdentities: Record<string, { friendlyName: string; skulkVersion: string }>;
  nodeMemory: Record<string, { ramTotal: { inBytes: number }; ramAvailable: { inBytes: number } }>;
  nodeHealth: Record<string, { level: string; reasons: { message: string }[] }>;
  lastEventAppliedIdx: number;
}

export function registerStatus(program: Command): void {
  program.command("status")
    .description("show the cluster as a running node sees it")
    .option(
      "--url <url>",
      "the node's API URL (default: the daemon on this data dir, else http://127.0.0.1:<api-port>)",
    )
    .option("--data-dir <dir>", "data dir of the local daemon to ask")
    .option("--api-port <port>", "API port of the local daemon")
    .option("--json", "print the raw /state JSON")
    .action(async (flags) => {
      const url = nodeUrl(flags);
      const [self, state] = await Promise.all([
        getJson<string>(`${url}/node_id`),
        getJson<WireState>(`${url}/state`),
      ]);
      if (flags.json) {
        console.log(JSON.stringify(state, null, 2));
        return;
      }
      console.log(
        `node ${self} at ${url}; ${
          Object.keys(state.lastSeen).length
        } node(s), event index ${state.lastEventAppliedIdx}`,
      );
      console.log("\nNODES");
      for (const id of Object.keys(state.lastSeen)) {
        const ident = state.nodeIdentities[id];
        const mem = state.nodeMemory[id];
        const health = state.nodeHealth[id];
        const used = mem ? mem.ramTotal.inBytes - mem.ramAvailable.inBytes : null;
        console.log(
          `  ${id === self ? "*" : " "} ${ident?.friendlyName ?? "?"} (${id}) v${
            ident?.skulkVersion ?? "?"
          }  ` +
            `memory ${formatBytes(used)} / ${formatBytes(mem?.ramTotal.inBytes)}  health ${
              health?.level ?? "?"
            }` +
            (health?.reasons.length ? ` (${health.reasons.map((r) => r.message).join("; ")})` : ""),
        );
      }
      console.log("\nINSTANCES");
      const entries = Object.entries(state.instances);
      if (entries.length === 0) console.log("  none placed");
      for (const [id, tagged] of entries) {
        const body = Object.values(tagged)[0];
        console.log(
          `  ${id}  ${body.shardAssignments.modelId}  ${instanceName(tagged as unknown as Instance)}`,
        );
        for (const [node, runner] of Object.entries(body.shardAssignments.nodeToRunner)) {
          const st = state.runners[runner];
          const tag = st ? Object.keys(st)[0] : "pending";
          const err = st && Object.values(st)[0].errorMessage;
          console.log(
            `      runner ${runner} on ${state.nodeIdentities[node]?.friendlyName ?? node}: ${tag}${
              err ? ` (${err})` : ""
            }`,
          );
        }
      }
    });
}
