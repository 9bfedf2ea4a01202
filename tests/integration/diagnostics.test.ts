/**
 * Diagnostics on real daemons: a key-protected node's diagnostics and capture in upstream's shapes (zod),
 * its log file and its lines shipped to a loopback receiver; then a three-node loopback cluster whose merged
 * timeline shows a placement on the master before the engine exit on the node it placed, answers from every
 * node, and names a node that is down while the others still answer.
 */
import { afterEach, describe, expect, it } from "vitest";
import { localCardWire, postInstance, singleNodeInstance } from "../helpers/cluster.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";
import { allVoters, json, oneMaster, signedPost, waitFor } from "../helpers/multinode.ts";
import {
  CaptureSchema,
  ClusterDiagnosticsSchema,
  NodeDiagnosticsSchema,
  TimelineSchema,
} from "../../src/diagnostics/shapes.ts";
import type { FlightEntry } from "../../src/diagnostics/recorder.ts";

const running: Daemon[] = [];
const servers: Deno.HttpServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((d) => d.kill()));
  for (const s of servers.splice(0)) await s.shutdown().catch(() => {});
});

async function daemon(args: string[], env: Record<string, string> = {}): Promise<Daemon> {
  const d = await startDaemon({ args: ["--no-mdns", ...args], env, timeoutMs: 60_000 });
  running.push(d);
  return d;
}

const KEY = "diagnostics-test-key-0123456789";
const auth = { authorization: `Bearer ${KEY}` };

describe("one node's diagnostics", () => {
  it(
    "answers in upstream's shapes behind the API key, captures a bundle with its log tail, ships its lines",
    async () => {
      const got: { auth: string | null; lines: Record<string, unknown>[] }[] = [];
      const receiver = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
        const lines = (await req.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
        got.push({ auth: req.headers.get("authorization"), lines });
        return new Response(null, { status: 204 });
      });
      servers.push(receiver);
      const token = "log-store-token-never-shown";
      const d = await daemon([], {
        SKULK_API_KEY: KEY,
        SKULK_LOGGING_INGEST_URL: `http://127.0.0.1:${receiver.addr.port}`,
        SKULK_LOGGING_INGEST_TOKEN: token,
        SKULK_LOGGING_INGEST_INTERVAL_MS: "100",
        SKULK_LOG_FILE_MAX_BYTES: "1MiB",
      });

      const refused = await fetch(`${d.url}/v1/diagnostics/node`);
      expect(refused.status).toBe(401);
      await refused.body?.cancel();

      const res = await fetch(`${d.url}/v1/diagnostics/node`, {
        headers: { ...auth, "x-request-id": "diag-req-1" },
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      expect(text).not.toContain(token);
      const diag = NodeDiagnosticsSchema.parse(JSON.parse(text));
      expect(diag.runtime).toMatchObject({
        nodeId: d.nodeId,
        isMaster: true,
        masterNodeId: d.nodeId,
        pid: d.pid,
      });
      expect(diag.identity.dataDir).toBe(d.dataDir);
      const self = diag.processes.find((p) => p.role === "skulk");
      expect(self?.pid).toBe(d.pid);
      expect(self?.rss).toBeGreaterThan(10 * 1024 * 1024);
      expect(diag.logging.file?.path).toBe(`${d.dataDir}/logs/skulk.log`);
      expect(diag.logging.shipping?.url).toBe(`http://127.0.0.1:${receiver.addr.port}/insert/jsonline`);
      expect(diag.runtime.structuredLoggingConfigured).toBe(true);

      const cap = await fetch(`${d.url}/v1/diagnostics/node/capture`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ sampleDurationSeconds: 1, logLines: 40 }),
      });
      const bundle = CaptureSchema.parse(await cap.json());
      expect(bundle.nodeId).toBe(d.nodeId);
      expect(bundle.processSamples.some((p) => p.pid === d.pid && p.durationSeconds === 1)).toBe(true);
      expect(bundle.flightRecorder.some((e) => e.source === "election" && e.event === "became_master")).toBe(
        true,
      );
      expect(bundle.logTail.length).toBeGreaterThan(3);
      for (const l of bundle.logTail) expect(JSON.parse(l).nodeId).toBe(d.nodeId);

      // Bad input: 4xx naming what is wrong.
      const bad = async (path: string, init: RequestInit = {}) => {
        const r = await fetch(`${d.url}${path}`, { ...init, headers: auth });
        return [r.status, (await r.json()).error?.message] as const;
      };
      expect(await bad("/v1/diagnostics/node/capture", { method: "POST", body: '{"runnerId":"nope"}' }))
        .toEqual([
          404,
          "no runner nope on this node",
        ]);
      expect(
        (await bad("/v1/diagnostics/node/capture", { method: "POST", body: '{"sampleDurationSeconds":11}' }))[
          0
        ],
      )
        .toBe(400);
      expect((await bad("/v1/diagnostics/cluster/not-a-node!"))[0]).toBe(400);
      expect(await bad("/v1/diagnostics/cluster/12D3KooWUnknownNode")).toEqual([
        404,
        "no node 12D3KooWUnknownNode in this cluster",
      ]);
      expect((await bad("/v1/diagnostics/cluster/timeline?limit=0"))[0]).toBe(400);
      expect((await bad("/v1/diagnostics/cluster/timeline?since=yesterday"))[0]).toBe(400);
      const own = await fetch(`${d.url}/v1/diagnostics/cluster/${d.nodeId}`, { headers: auth });
      expect(NodeDiagnosticsSchema.parse(await own.json()).runtime.nodeId).toBe(d.nodeId);

      // The lines reach the log store with the node's id, the request's id, and the token only in the header.
      await waitFor(
        "the request's line at the receiver",
        () =>
          got.some((g) =>
            g.lines.some((l) =>
              l.requestId === "diag-req-1" && String(l.msg).includes("/v1/diagnostics/node")
            )
          ),
        20_000,
      );
      expect(got.every((g) => g.auth === `Bearer ${token}`)).toBe(true);
      expect(
        got.flatMap((g) => g.lines).every((l) => l.nodeId === d.nodeId),
      ).toBe(true);
      expect(JSON.stringify(got.map((g) => g.lines))).not.toContain(token);
      const metrics = await (await fetch(`${d.url}/metrics`, { headers: auth })).text();
      expect(Number(/^skulk_log_lines_shipped_total (\d+)/m.exec(metrics)?.[1])).toBeGreaterThan(0);
      expect(metrics).toMatch(/^skulk_log_lines_dropped_total 0$/m);
    },
    120_000,
  );
});

describe("diagnostics across a three-node cluster", () => {
  it(
    "merges every node's recorder in time order, answers for every node, and names a node that is down",
    async ({ onTestFailed }) => {
      onTestFailed(() => {
        for (const d of running) {
          console.error(`--- ${d.nodeId}\n${d.log().split("\n").slice(-20).join("\n")}`);
        }
      });
      // A llama-server that cannot start: it says why on stderr (its log tail) and exits 1.
      const dir = tempDir("skulk-diag-engine-");
      const broken = `${dir}/llama-server`;
      Deno.writeTextFileSync(broken, "#!/bin/sh\necho 'simulated: cannot load the model' >&2\nexit 1\n");
      Deno.chmodSync(broken, 0o755);
      // Healing waits long enough between relaunches that the first failure is easy to tell apart.
      const env = { SKULK_LLAMA_SERVER_BIN: broken, SKULK_HEAL_RETRY: "30" };
      try {
        const a = await daemon(["--force-master"], env);
        const [b, c] = await Promise.all([
          daemon(["--peer", `127.0.0.1:${a.port}`], env),
          daemon(["--peer", `127.0.0.1:${a.port}`], env),
        ]);
        const urls = [a.url, b.url, c.url];
        expect(await oneMaster(urls, 60_000)).toBe(a.nodeId);
        await allVoters(urls, 60_000);

        // A peer request signed with another key: a's recorder notes the refusal.
        const forged = await signedPost(a.url, "gossip", {}, {
          secret: "not-this-cluster-key",
          nodeId: "intruder",
        });
        expect(forged.status).toBe(403);
        await forged.body?.cancel();

        const model = "skulk-test/diag-tiny";
        const instance = singleNodeInstance(b.nodeId, localCardWire(model, await tinyModel()));
        const instanceId = instance.MlxRingInstance.instanceId;
        const placed = await postInstance(c, instance, [a, b, c]);
        expect(placed.status, await placed.text()).toBe(200);

        // Asked of c (a follower): the fan-out reaches a and b.
        const isExit = (e: FlightEntry) =>
          e.source === "engine" && e.instanceId === instanceId && e.nodeId === b.nodeId;
        const t = await waitFor(
          "the placement and the engine exit in c's merged timeline",
          async () => {
            const r = await fetch(`${c.url}/v1/diagnostics/cluster/timeline`);
            const tl = TimelineSchema.parse(await r.json());
            return tl.timeline.some(isExit) &&
                tl.timeline.some((e) => e.source === "runner" && e.event === "failed")
              ? tl
              : null;
          },
          90_000,
          500,
        );
        expect(t.localNodeId).toBe(c.nodeId);
        expect(t.masterNodeId).toBe(a.nodeId);
        expect(t.unreachableNodes).toEqual([]);
        expect([...t.nodes].sort()).toEqual([a.nodeId, b.nodeId, c.nodeId].sort());
        // In time order across nodes.
        const times = t.timeline.map((e) => e.at);
        expect(times).toEqual([...times].sort());
        const at = (pred: (e: FlightEntry) => boolean) => t.timeline.findIndex(pred);
        const placement = at((e) =>
          e.source === "placement" && e.event === "placed" && e.instanceId === instanceId
        );
        const starting = at((e) =>
          e.source === "runner" && e.event === "starting" && e.instanceId === instanceId
        );
        const exit = at(isExit);
        const failed = at((e) =>
          e.source === "runner" && e.event === "failed" && e.instanceId === instanceId &&
          e.nodeId === b.nodeId
        );
        expect(placement).toBeGreaterThanOrEqual(0);
        expect(t.timeline[placement].nodeId).toBe(a.nodeId); // the master decided it
        expect(t.timeline[starting].nodeId).toBe(b.nodeId);
        expect(placement).toBeLessThan(starting);
        expect(starting).toBeLessThan(exit);
        expect(exit).toBeLessThan(failed);
        expect(t.timeline[exit].logTail.join("\n")).toContain("simulated: cannot load the model");
        expect(t.timeline[failed].phase).toBe("failed");
        // Elections on every node, and the forged request refused on a.
        for (const d of [b, c]) {
          expect(
            t.timeline.some((e) =>
              e.nodeId === d.nodeId && e.event === "new_master" && e.attrs.master === a.nodeId
            ),
          )
            .toBe(true);
        }
        expect(t.timeline.some((e) => e.nodeId === a.nodeId && e.event === "became_master")).toBe(true);
        expect(
          t.timeline.some((e) => e.nodeId === a.nodeId && e.source === "peer" && e.attrs.reason === "key"),
        ).toBe(
          true,
        );
        expect(t.runners.some((r) => r.instanceId === instanceId && r.nodeId === b.nodeId)).toBe(true);

        // `since` and `limit` bound the answer.
        const since = Date.parse(t.timeline[placement].at);
        const later = TimelineSchema.parse(
          await json(`${c.url}/v1/diagnostics/cluster/timeline?since=${since}&limit=3`),
        );
        expect(later.timeline.length).toBeLessThanOrEqual(3);
        expect(later.timeline.every((e) => Date.parse(e.at) > since)).toBe(true);

        const timed = async <T>(what: string, f: () => Promise<T>): Promise<T> => {
          const t0 = performance.now();
          const v = await f();
          console.log(`${what}: ${Math.round(performance.now() - t0)} ms`);
          return v;
        };
        await timed(
          "timeline of 3 nodes asked of a follower",
          () => json(`${c.url}/v1/diagnostics/cluster/timeline`),
        );
        const all = ClusterDiagnosticsSchema.parse(
          await timed("diagnostics of 3 nodes", () => json(`${c.url}/v1/diagnostics/cluster`)),
        );
        expect(all.nodes.map((n) => [n.nodeId, n.ok]).sort()).toEqual(
          [[a.nodeId, true], [b.nodeId, true], [c.nodeId, true]].sort(),
        );
        const ofA = all.nodes.find((n) => n.nodeId === a.nodeId)!.diagnostics!;
        expect(ofA.runtime).toMatchObject({ isMaster: true, masterNodeId: a.nodeId });
        const ofB = NodeDiagnosticsSchema.parse(await json(`${c.url}/v1/diagnostics/cluster/${b.nodeId}`));
        expect(ofB.runtime).toMatchObject({ nodeId: b.nodeId, isMaster: false, masterNodeId: a.nodeId });
        expect(ofB.placements.some((p) => p.instanceId === instanceId && p.localNodeIsPlacementNode)).toBe(
          true,
        );
        const capB = await fetch(`${c.url}/v1/diagnostics/cluster/${b.nodeId}/capture`, {
          method: "POST",
          body: JSON.stringify({ sampleDurationSeconds: 1, logLines: 20 }),
        });
        const bundleB = CaptureSchema.parse(await capB.json());
        expect(bundleB.nodeId).toBe(b.nodeId);
        expect(bundleB.flightRecorder.some(isExit)).toBe(true);
        const noRunner = await fetch(`${c.url}/v1/diagnostics/cluster/${b.nodeId}/capture`, {
          method: "POST",
          body: JSON.stringify({ runnerId: "no-such-runner" }),
        });
        expect(noRunner.status).toBe(404);
        expect((await noRunner.json()).error.message).toBe(
          `node ${b.nodeId}: no runner no-such-runner on this node`,
        );

        // c goes down: a still answers, for itself and b, and names c.
        await running.splice(running.indexOf(c), 1)[0].kill();
        const partial = ClusterDiagnosticsSchema.parse(
          await timed("diagnostics with one node down", () => json(`${a.url}/v1/diagnostics/cluster`)),
        );
        const down = partial.nodes.find((n) => n.nodeId === c.nodeId)!;
        expect(down.ok).toBe(false);
        expect(down.error).toContain(c.nodeId);
        expect(partial.nodes.filter((n) => n.ok).map((n) => n.nodeId).sort()).toEqual(
          [a.nodeId, b.nodeId].sort(),
        );
        const tl = TimelineSchema.parse(await json(`${a.url}/v1/diagnostics/cluster/timeline`));
        expect(tl.unreachableNodes.map((u) => u.nodeId)).toEqual([c.nodeId]);
        expect(tl.unreachableNodes[0].error).toMatch(/did not answer/);
        expect(tl.timeline.some(isExit)).toBe(true); // b's entries, still
        const proxied = await fetch(`${a.url}/v1/diagnostics/cluster/${c.nodeId}`);
        expect(proxied.status).toBe(503);
        expect((await proxied.json()).error.message).toContain(c.nodeId);
      } finally {
        Deno.removeSync(dir, { recursive: true });
      }
    },
    300_000,
  );
});
