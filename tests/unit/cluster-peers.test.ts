/** Peer authentication (HMAC, namespace, version, replay window) and log replication over real SQLite files. */
import { afterEach, describe, expect, it } from "vitest";
import { makeEvent } from "../../src/cluster/events.ts";
import { EventLog, SNAPSHOT_EVERY } from "../../src/cluster/log.ts";
import {
  clusterKey,
  REPLAY_WINDOW_MS,
  ReplayGuard,
  signedHeaders,
  verifyRequest,
} from "../../src/cluster/peers.ts";
import { answerSync, applyPush, applySync, pushOf } from "../../src/cluster/replication.ts";
import { openStore, type Store } from "../../src/store/db.ts";
import { tempDir } from "../helpers/daemon.ts";

const me = { nodeId: "me", namespace: "home", version: "1.0.0" };
const body = new TextEncoder().encode('{"hello":1}');

async function request(
  o: {
    secret?: string | null;
    namespace?: string;
    version?: string;
    time?: number;
    body?: Uint8Array;
    path?: string;
  },
) {
  const ns = o.namespace ?? "home";
  const key = await clusterKey(o.secret ?? null, ns);
  const headers = await signedHeaders(
    key,
    { nodeId: "peer", namespace: ns, version: o.version ?? "1.0.0" },
    "POST",
    "/cluster/peer/gossip",
    body,
    o.time ?? 1_000_000,
  );
  return {
    method: "POST",
    path: o.path ?? "/cluster/peer/gossip",
    headers: new Headers(headers),
    body: o.body ?? body,
  };
}

describe("peer authentication", () => {
  const cases: { name: string; req: Parameters<typeof request>[0]; mySecret?: string; want: string }[] = [
    { name: "same namespace, derived key", req: {}, want: "ok" },
    { name: "same shared secret", req: { secret: "s3cret-s3cret" }, mySecret: "s3cret-s3cret", want: "ok" },
    { name: "another secret", req: { secret: "other-secret" }, mySecret: "s3cret-s3cret", want: "key" },
    { name: "another namespace", req: { namespace: "work" }, want: "namespace" },
    { name: "another version", req: { version: "1.0.1" }, want: "version" },
    { name: "outside the replay window", req: { time: 1_000_000 - REPLAY_WINDOW_MS - 1 }, want: "replay" },
    { name: "body changed in transit", req: { body: new TextEncoder().encode('{"hello":2}') }, want: "key" },
    { name: "path changed in transit", req: { path: "/cluster/peer/submit" }, want: "key" },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const key = await clusterKey(c.mySecret ?? null, "home");
      const v = await verifyRequest(key, me, await request(c.req), 1_000_000, new ReplayGuard());
      expect(v.ok ? "ok" : v.reason).toBe(c.want);
    });
  }
  it("accepts a request once", async () => {
    const key = await clusterKey(null, "home");
    const guard = new ReplayGuard();
    const req = await request({});
    expect((await verifyRequest(key, me, req, 1_000_000, guard)).ok).toBe(true);
    const again = await verifyRequest(key, me, req, 1_000_000, guard);
    expect(again.ok ? "ok" : again.reason).toBe("replay");
  });
});

describe("replication", () => {
  const stores: Store[] = [];
  const dirs: string[] = [];
  afterEach(() => {
    stores.splice(0).forEach((s) => s.close());
    dirs.splice(0).forEach((d) => Deno.removeSync(d, { recursive: true }));
  });
  const newLog = async (session: string) => {
    const dir = tempDir("skulk-repl-");
    dirs.push(dir);
    const s = await openStore(dir);
    stores.push(s);
    const log = new EventLog(s.db, session);
    await log.load();
    return log;
  };
  const sync = async (master: EventLog, follower: EventLog) => {
    let bytes = 0;
    for (let i = 0; i < 50; i++) {
      const res = await answerSync(master, {
        after: follower.state.lastEventAppliedIdx,
        eventId: follower.lastEventId,
      });
      bytes += JSON.stringify(res).length;
      if (!(await applySync(follower, res))) break;
    }
    return bytes;
  };

  it("a follower catches up by tail, and a joiner's bytes depend on the state, not the history", async () => {
    const m = await newLog("m/0");
    for (let i = 0; i < 70; i++) await m.append(makeEvent("TestEvent"));
    const early = await newLog("f/0");
    const earlyBytes = await sync(m, early);
    expect(early.state).toEqual(m.state);
    for (let i = 0; i < SNAPSHOT_EVERY * 10; i++) await m.append(makeEvent("TestEvent"));
    await sync(m, early);
    expect(early.lastEventId).toBe(m.lastEventId);
    const late = await newLog("g/0");
    const lateBytes = await sync(m, late);
    expect(late.state).toEqual(m.state);
    expect(lateBytes).toBeLessThan(earlyBytes * 1.5);
  });

  it("a follower whose history diverged starts over from the master's snapshot", async () => {
    const m = await newLog("m/0");
    const f = await newLog("f/0");
    for (let i = 0; i < 3; i++) await m.append(makeEvent("TestEvent"));
    await sync(m, f);
    await f.append(makeEvent("TestEvent")); // f indexed an event alone (it led during a partition)
    await m.append(makeEvent("TestEvent"));
    await m.append(makeEvent("TracingStateChanged", { enabled: true }));
    await sync(m, f);
    expect(f.state).toEqual(m.state);
    expect(f.lastEventId).toBe(m.lastEventId);
  });

  it("a push extends the log only when it follows the follower's last event", async () => {
    const m = await newLog("m/0");
    const f = await newLog("f/0");
    const first = await m.append(makeEvent("TestEvent"));
    expect(await applyPush(f, pushOf("m", null, first))).toBe(true);
    const second = await m.append(makeEvent("TestEvent"));
    const third = await m.append(makeEvent("TestEvent"));
    expect(await applyPush(f, pushOf("m", m.lastEventId, third))).toBe(false);
    expect(await applyPush(f, pushOf("m", "not-the-last-id", second))).toBe(false);
    expect(f.state.lastEventAppliedIdx).toBe(0);
  });
});
