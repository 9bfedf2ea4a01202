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
  tasks?: Record<string, Record<string, { instanceId?: string }>>;
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
      console.log("\nINSTANCES (by model)");
      const entries = Object.entries(state.instances);
      if (entries.length === 0) console.log("  none placed");
      // Requests running per instance, from the tasks every node reports: how the router spread the load.
      const running = new Map<string, number>();
      for (const t of Object.values(state.tasks ?? {})) {
        const id = Object.values(t)[0]?.instanceId;
        if (id) running.set(id, (running.get(id) ?? 0) + 1);
      }
      const modelOf = ([, t]: (typeof entries)[number]) => Object.values(t)[0].shardAssignments.modelId;
      const models = [...new Set(entries.map(modelOf))].sort();
      for (const model of models) {
        const mine = entries.filter((e) => modelOf(e) === model);
        console.log(`  ${model}: ${mine.length} instance${mine.length === 1 ? "" : "s"}`);
        for (const [id, tagged] of mine) {
          const body = Object.values(tagged)[0];
          console.log(
            `    ${id}  ${model}  ${instanceName(tagged as unknown as Instance)}  ${
              running.get(id) ?? 0
            } running`,
          );
          for (const [node, runner] of Object.entries(body.shardAssignments.nodeToRunner)) {
            const st = state.runners[runner];
            const tag = st ? Object.keys(st)[0] : "pending";
            const err = st && Object.values(st)[0].errorMessage;
            console.log(
              `        runner ${runner} on ${state.nodeIdentities[node]?.friendlyName ?? node}: ${tag}${
                err ? ` (${err})` : ""
              }`,
            );
          }
        }
      }
    });
}
