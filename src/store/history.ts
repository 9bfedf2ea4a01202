/**
 * Placement history and node inventory in SQLite: the `instances` rows follow the event log (created,
 * deleted, outcome and reason), and `nodes` rows follow telemetry (first seen, last seen, hardware).
 */
import { eq, sql } from "drizzle-orm";
import type { IndexedEvent } from "../cluster/events.ts";
import { eventType } from "../cluster/events.ts";
import { instanceBody, instanceKind } from "../cluster/instances.ts";
import type { ClusterState } from "../cluster/state.ts";
import type { NodeReading } from "../telemetry/reading.ts";
import type { Db } from "./db.ts";
import { instances, nodes } from "./schema.ts";

/** Writes the history row an applied event implies; idempotent, so a replayed event changes nothing. */
export async function recordHistory(db: Db, ie: IndexedEvent, before: ClusterState): Promise<void> {
  const now = new Date().toISOString();
  switch (eventType(ie.event)) {
    case "InstanceCreated": {
      const { instance, reason } =
        (ie.event as { InstanceCreated: { instance: Parameters<typeof instanceBody>[0]; reason?: string } })
          .InstanceCreated;
      const body = instanceBody(instance);
      const shard = Object.values(body.shardAssignments.runnerToShard)[0];
      const sharding = shard ? Object.keys(shard)[0].replace(/ShardMetadata$/, "") : "Pipeline";
      await db.insert(instances).values({
        id: body.instanceId,
        modelId: body.shardAssignments.modelId,
        shape: `${instanceKind(instance)}/${sharding}`,
        nodes: JSON.stringify(Object.keys(body.shardAssignments.nodeToRunner)),
        createdAt: now,
        outcome: "placed",
        reason: reason ?? null,
        detail: JSON.stringify(instance),
      }).onConflictDoNothing();
      return;
    }
    case "InstanceDeleted": {
      const { instanceId, reason } =
        (ie.event as { InstanceDeleted: { instanceId: string; reason: string | null } }).InstanceDeleted;
      // Healing names the instance that replaces this one; anything else with a reason is a failure.
      const outcome = !reason ? "deleted" : /; replaced by /.test(reason) ? "replaced" : "failed";
      await db.update(instances).set({ deletedAt: now, outcome, reason: reason ?? "deleted on request" })
        .where(sql`${instances.id} = ${instanceId} AND ${instances.deletedAt} IS NULL`);
      return;
    }
    case "NodeTimedOut": {
      const { nodeId } = (ie.event as { NodeTimedOut: { nodeId: string } }).NodeTimedOut;
      for (const [id, inst] of Object.entries(before.instances)) {
        if (!(nodeId in instanceBody(inst).shardAssignments.nodeToRunner)) continue;
        await db.update(instances).set({
          deletedAt: now,
          outcome: "failed",
          reason: `node ${nodeId} timed out`,
        })
          .where(sql`${instances.id} = ${id} AND ${instances.deletedAt} IS NULL`);
      }
      return;
    }
    case "PlacementFailed": {
      // The lost instance's row tells where healing stands: the next try, or why it gave up.
      const { lostInstanceId, reason } =
        (ie.event as { PlacementFailed: { lostInstanceId: string; reason: string } }).PlacementFailed;
      await db.update(instances).set({ reason, deletedAt: sql`coalesce(${instances.deletedAt}, ${now})` })
        .where(eq(instances.id, lostInstanceId));
      return;
    }
    case "RunnerStatusUpdated": {
      const { runnerId, runnerStatus } =
        (ie.event as { RunnerStatusUpdated: { runnerId: string; runnerStatus: Record<string, unknown> } })
          .RunnerStatusUpdated;
      if (!("RunnerReady" in runnerStatus)) return;
      const owner = Object.values(before.instances).find((i) =>
        runnerId in instanceBody(i).shardAssignments.runnerToShard
      );
      if (owner) {
        await db.update(instances).set({ outcome: "running" })
          .where(
            sql`${instances.id} = ${instanceBody(owner).instanceId} AND ${instances.outcome} = 'placed'`,
          );
      }
      return;
    }
    default:
      return;
  }
}

/** Upserts a node's inventory row from a telemetry reading. */
export async function recordNode(db: Db, r: NodeReading, seenAt: Date): Promise<void> {
  const hardware = JSON.stringify({
    os: r.identity.osVersion,
    arch: r.identity.chipId,
    cpuCount: r.system?.cpuCount ?? null,
    ramTotalBytes: r.memory?.ramTotal.inBytes ?? null,
    accelerators: (r.system?.accelerators ?? []).map((a) => ({
      vendor: a.vendor,
      name: a.name,
      vramTotalBytes: a.vramTotalBytes,
    })),
    diskTotalBytes: r.disk?.total.inBytes ?? null,
  });
  const at = seenAt.toISOString();
  await db.insert(nodes).values({
    id: r.nodeId,
    friendlyName: r.identity.friendlyName,
    version: r.identity.skulkVersion,
    firstSeen: at,
    lastSeen: at,
    hardware,
    address: r.apiAddress,
  }).onConflictDoUpdate({
    target: nodes.id,
    set: {
      friendlyName: r.identity.friendlyName,
      version: r.identity.skulkVersion,
      lastSeen: at,
      hardware,
      address: r.apiAddress,
    },
  });
}

export async function nodeRow(db: Db, id: string) {
  return (await db.select().from(nodes).where(eq(nodes.id, id)))[0];
}
