/**
 * The master's command desk over a real event log (SQLite), catalogue and planner: commands decided one at
 * a time, a full queue, a command its asker gave up on, a node that is not master; and waitForIndex.
 */
import { afterEach, describe, expect, it } from "vitest";
import { COMMAND_QUEUE_LIMIT, CommandDesk } from "../../src/app/desk.ts";
import { DomainError, NoMaster } from "../../src/app/errors.ts";
import type { DecidePorts } from "../../src/app/ports.ts";
import { makeEvent } from "../../src/cluster/events.ts";
import { EventLog } from "../../src/cluster/log.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { parseCard } from "../../src/models/card.ts";
import { loadResolvedFacts, recordResolvedFacts } from "../../src/models/facts.ts";
import { openStore, type Store } from "../../src/store/db.ts";
import { localCardWire } from "../helpers/cluster.ts";
import { tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";
import { entries, GB } from "../helpers/synthetic-cluster.ts";

const MODEL = "skulk-test/desk-tiny";
const MiB = 1024 ** 2;
const stores: Store[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});

async function newLog(): Promise<EventLog> {
  const s = await openStore(tempDir("skulk-desk-"));
  stores.push(s);
  const log = new EventLog(s.db, "m/1");
  await log.load();
  return log;
}

/** Two nodes that each lend 450 MiB: the tiny model's shard (~0.28 GB) fits each once. */
async function master(o: { isMaster?: () => boolean; gate?: Promise<void> } = {}) {
  const log = await newLog();
  const catalog = Catalog.bundled();
  catalog.add(parseCard(localCardWire(MODEL, await tinyModel())));
  const db = stores.at(-1)!.db;
  const now = Date.now();
  const telemetry = entries([
    { id: "n1", ram: 4 * GB, ramAvailable: 450 * MiB },
    { id: "n2", ram: 4 * GB, ramAvailable: 450 * MiB },
  ]).map(([id, e]) =>
    [id, { ...e, receivedAt: now, reading: { ...e.reading, memoryLimit: 450 * MiB } }] as [
      string,
      typeof e,
    ]
  );
  const ports: DecidePorts = {
    state: () => log.state,
    telemetry: () => telemetry,
    telemetryOf: (id) => telemetry.find(([n]) => n === id)?.[1],
    nodeTimeoutMs: 30_000,
    card: (id) => catalog.get(id),
    loadFacts: (id) => loadResolvedFacts(db, id),
    recordFacts: (id, f, src) => recordResolvedFacts(db, id, f, src),
    // Never asked: every card these tests place knows its size.
    hubEndpoint: "http://127.0.0.1:9",
    isMaster: o.isMaster ?? (() => true),
    index: async (event) => {
      await o.gate;
      return { idx: (await log.append(event)).idx };
    },
  };
  return { log, desk: new CommandDesk(ports) };
}

const place = { kind: "place" as const, request: placeRequest() };
function placeRequest() {
  return {
    model_id: MODEL,
    sharding: "Pipeline" as const,
    instance_meta: "MlxRing" as const,
    min_nodes: 1,
    excluded_nodes: [],
  };
}

describe("the command desk", () => {
  it("decides placements one at a time: each node booked once, the rest refused with numbers", async () => {
    const { log, desk } = await master();
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => desk.run(place)));
    const ok = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(ok.length).toBe(2);
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(DomainError);
      expect((r.reason as DomainError).kind).toBe("Refused");
      expect((r.reason as Error).message).toMatch(/needs 0\.\d GB.*has 0\.\d GB/);
    }
    const booked = Object.values(log.state.instances).flatMap((i) =>
      Object.keys(Object.values(i)[0].shardAssignments.nodeToRunner)
    );
    expect(booked.sort()).toEqual(["n1", "n2"]);

    // Once their engines load, their memory is no longer reserved; the nodes' readings stay capped at the
    // 450 MiB they lend, so only the limit minus what their engines hold is free: still no room.
    for (const i of Object.values(log.state.instances)) {
      for (const runnerId of Object.values(Object.values(i)[0].shardAssignments.nodeToRunner)) {
        await log.append(makeEvent("RunnerStatusUpdated", { runnerId, runnerStatus: { RunnerReady: {} } }));
      }
    }
    await expect(desk.run(place)).rejects.toMatchObject({ kind: "Refused" });
  });

  it("refuses at once when its queue is full, retryably", async () => {
    const gate = Promise.withResolvers<void>();
    const { desk } = await master({ gate: gate.promise });
    const queued = Array.from({ length: COMMAND_QUEUE_LIMIT }, () => desk.run(place).catch((e) => e));
    await expect(desk.run(place)).rejects.toMatchObject({ kind: "Busy" });
    gate.resolve();
    await Promise.all(queued);
    expect(desk.depth).toBe(0);
  });

  it("indexes nothing for a command its asker gave up on, or on a node that is no longer master", async () => {
    const { log, desk } = await master();
    await expect(desk.run(place, Date.now() - 1)).rejects.toMatchObject({ code: "master_changed" });
    const follower = await master({ isMaster: () => false });
    await expect(follower.desk.run(place)).rejects.toBeInstanceOf(NoMaster);
    expect(log.state.lastEventAppliedIdx).toBe(-1);
    expect(follower.log.state.lastEventAppliedIdx).toBe(-1);
  });
});

describe("waitForIndex", () => {
  it("resolves once this node applied the index (after its listeners), false after the bound", async () => {
    const m = await newLog();
    const f = await newLog();
    let seen = -1;
    f.onApplied(async (ie) => {
      await new Promise((r) => setTimeout(r, 20));
      seen = ie.idx;
    });
    const ie = await m.append(makeEvent("TestEvent"));
    expect(await f.waitForIndex(ie.idx, 50)).toBe(false);
    const waiting = f.waitForIndex(ie.idx, 5000);
    await f.appendIndexed(ie);
    expect(await waiting).toBe(true);
    expect(seen).toBe(ie.idx);
    expect(await f.waitForIndex(ie.idx, 0)).toBe(true);
  });
});
