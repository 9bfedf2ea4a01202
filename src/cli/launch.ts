/**
 * `skulk models launch <model_id>`: asks a running node to place a model (`POST /place_instance`) and, unless told
 * not to, waits on `/state` until every runner of the new instance is ready, or one fails.
 */
import type { Command } from "commander";
import { CliError, getJson, nodeUrl } from "./common.ts";

interface LaunchState {
  instances: Record<string, Record<string, { shardAssignments: { nodeToRunner: Record<string, string> } }>>;
  runners: Record<string, Record<string, { errorMessage?: string | null }>>;
}

type Progress = { done: true } | { done: false; failed: string | null; states: string[] };

/** Where an instance stands: ready when every runner is, failed when one is; pure, so the poll loop stays dumb. */
export function launchProgress(s: LaunchState, instanceId: string): Progress {
  const body = s.instances[instanceId] ? Object.values(s.instances[instanceId])[0] : undefined;
  if (!body) return { done: false, failed: null, states: ["not yet in the cluster state"] };
  const states = Object.values(body.shardAssignments.nodeToRunner).map((r) => {
    const st = s.runners[r];
    return st ? Object.keys(st)[0] : "RunnerPending";
  });
  const failed = Object.values(body.shardAssignments.nodeToRunner).map((r) => s.runners[r]?.RunnerFailed)
    .find(Boolean);
  if (failed) return { done: false, failed: failed.errorMessage ?? "a runner failed", states };
  // Running: ready and already answering someone.
  if (states.length > 0 && states.every((st) => st === "RunnerReady" || st === "RunnerRunning")) {
    return { done: true };
  }
  return { done: false, failed: null, states };
}

export function registerLaunch(models: Command): void {
  models.command("launch <model_id>")
    .description("place a model on the cluster through a running node, and wait until it serves")
    .option(
      "--url <url>",
      "the node's API URL (default: the daemon on this data dir, else http://127.0.0.1:<api-port>)",
    )
    .option("--data-dir <dir>", "data dir of the local daemon to ask")
    .option("--api-port <port>", "API port of the local daemon")
    .option("--min-nodes <n>", "spread it over at least this many nodes", "1")
    .option("--timeout <seconds>", "how long to wait for it to be ready (downloads included)", "1800")
    .option("--no-wait", "return once the node has accepted the placement")
    .action(async (modelId: string, flags) => {
      const url = nodeUrl(flags);
      const minNodes = Number(flags.minNodes);
      const timeoutS = Number(flags.timeout);
      if (!Number.isInteger(minNodes) || minNodes < 1) {
        throw new CliError("--min-nodes must be a whole number ≥ 1", 2);
      }
      if (!Number.isFinite(timeoutS) || timeoutS <= 0) throw new CliError("--timeout must be seconds > 0", 2);
      const placed = await getJson<{ instance_id: string }>(`${url}/place_instance`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model_id: modelId, min_nodes: minNodes }),
      });
      console.log(`placing ${modelId} as instance ${placed.instance_id}`);
      if (!flags.wait) return;
      const deadline = Date.now() + timeoutS * 1000;
      let last = "";
      for (;;) {
        const p = launchProgress(await getJson<LaunchState>(`${url}/state`), placed.instance_id);
        if (p.done) {
          console.log(`${modelId} is ready: ask it at ${url}/v1/chat/completions (model "${modelId}")`);
          return;
        }
        if (p.failed) throw new CliError(`${modelId} failed to start: ${p.failed}`);
        const now = p.states.join(", ");
        if (now !== last) console.log(`  ${now}`);
        last = now;
        if (Date.now() > deadline) {
          throw new CliError(`${modelId} is not ready after ${timeoutS} s (${now}); it stays placed`);
        }
        await new Promise((r) => setTimeout(r, 500));
      }
    });
}
