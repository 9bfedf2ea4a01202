/**
 * A pooled (LlamaRpc) instance from one node's side: whether this node drives it or lends memory to it,
 * and the driver's wait until every donor serves. Pure decisions, plus the small wait over the event log.
 */
import { type Instance, instanceBody, type ShardMetadata } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import { tagOf } from "../cluster/tagged.ts";

export type PoolRole =
  | { kind: "single" }
  /** Runs llama-server with `--rpc` over these endpoints once the donor runners are ready. */
  | { kind: "driver"; endpoints: string[]; donorRunners: string[] }
  /** Runs ggml-rpc-server bound to host:port for the driver; never reads the model file. */
  | { kind: "donor"; host: string; port: number; driverNode: string };

export function poolRole(instance: Instance, nodeId: string, shard: ShardMetadata): PoolRole {
  if ("RpcDonorShardMetadata" in shard) {
    const d = shard.RpcDonorShardMetadata;
    return { kind: "donor", host: d.rpcHost, port: d.rpcPort, driverNode: d.driverNode };
  }
  if (!("LlamaRpcInstance" in instance) || instance.LlamaRpcInstance.driverNode !== nodeId) {
    return { kind: "single" };
  }
  const body = instance.LlamaRpcInstance;
  const donors = Object.keys(body.donorEndpoints).sort();
  return {
    kind: "driver",
    // llama.cpp numbers RPC devices in --rpc order: keep it stable (by node id) across restarts.
    endpoints: donors.map((n) => body.donorEndpoints[n]),
    donorRunners: donors.map((n) => body.shardAssignments.nodeToRunner[n]).filter((r): r is string =>
      Boolean(r)
    ),
  };
}

export type DonorsPhase =
  | { kind: "ready" }
  | { kind: "waiting"; pending: string[] }
  | { kind: "failed"; reason: string };

/** Where the donors of an instance stand in the cluster state. */
export function donorsPhase(state: ClusterState, instanceId: string, donorRunners: string[]): DonorsPhase {
  const instance = state.instances[instanceId];
  if (!instance) {
    return {
      kind: "failed",
      reason: `instance ${instanceId} was deleted while its driver waited for donors`,
    };
  }
  const body = instanceBody(instance);
  const pending: string[] = [];
  for (const r of donorRunners) {
    const s = state.runners[r];
    if (s && "RunnerFailed" in s) {
      const node = Object.entries(body.shardAssignments.nodeToRunner).find(([, id]) => id === r)?.[0] ?? "?";
      return {
        kind: "failed",
        reason: `donor ${node} failed: ${s.RunnerFailed.errorMessage ?? "no reason given"}`,
      };
    }
    if (!s || tagOf(s) !== "RunnerReady") pending.push(r);
  }
  return pending.length ? { kind: "waiting", pending } : { kind: "ready" };
}

/** Resolves once every donor is ready (null), or with the reason the driver must not start. */
export async function waitForDonors(
  state: () => ClusterState,
  instanceId: string,
  donorRunners: string[],
  cancelled: () => boolean,
  deadlineMs = 120_000,
): Promise<string | null> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (cancelled()) return "the driver was stopped while it waited for donors";
    const p = donorsPhase(state(), instanceId, donorRunners);
    if (p.kind === "ready") return null;
    if (p.kind === "failed") return p.reason;
    if (Date.now() > end) {
      return `donor runner(s) ${p.pending.join(", ")} were not ready within ${
        Math.round(deadlineMs / 1000)
      } s`;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
