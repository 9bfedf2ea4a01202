/**
 * A single-node engine that keeps failing on a live node (two real daemons on loopback): the master
 * relaunches it there a bounded number of times, then places it on the other node, which serves it.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  localCardWire,
  postInstance,
  singleNodeInstance,
  waitForState,
  type WireState,
} from "../helpers/cluster.ts";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";

const MODEL = "skulk-test/relaunch-tiny";
const running: Daemon[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((d) => d.kill()));
});

async function node(args: string[], bin: string): Promise<Daemon> {
  const d = await startDaemon({
    args: ["--no-mdns", ...args],
    env: { SKULK_LLAMA_SERVER_BIN: bin, SKULK_HEAL_RETRY: "1", SKULK_NODE_TIMEOUT: "10" },
    timeoutMs: 40_000,
  });
  running.push(d);
  return d;
}

/** The node of the model's instance whose runner is ready, if any. */
function servingNode(s: WireState): string | null {
  for (const inst of Object.values(s.instances ?? {})) {
    // deno-lint-ignore no-explicit-any
    const body = Object.values(inst as Record<string, any>)[0];
    if (body.shardAssignments.modelId !== MODEL) continue;
    const [[nodeId, runnerId]] = Object.entries(body.shardAssignments.nodeToRunner) as [string, string][];
    if (s.runners?.[runnerId] && "RunnerReady" in s.runners[runnerId]) return nodeId;
  }
  return null;
}

describe("an engine that always fails on one node", () => {
  it("is relaunched there twice, then placed on the other node, which serves it; the history says why", async ({ onTestFailed }) => {
    onTestFailed(() => {
      for (const d of running) {
        const lines = d.log().split("\n").filter((l) => /healing|worker|relaunch/.test(l));
        console.error(`--- ${d.nodeId}\n${lines.slice(-30).join("\n")}`);
      }
    });
    // A llama-server that cannot start: it says why on stderr (the log tail) and exits 1.
    const dir = tempDir("skulk-broken-engine-");
    const broken = `${dir}/llama-server`;
    Deno.writeTextFileSync(broken, "#!/bin/sh\necho 'simulated: cannot load the model' >&2\nexit 1\n");
    Deno.chmodSync(broken, 0o755);
    try {
      const a = await node(["--force-master"], broken);
      const b = await node(["--peer", `127.0.0.1:${a.port}`], await engineBinary("llama-server"));
      await oneMaster([a.url, b.url], 45_000);
      await waitFor("both workers' memory in a's view", async () => {
        const st = await json<WireState>(`${a.url}/state`);
        return Object.keys(st.nodeMemory ?? {}).length === 2;
      }, 30_000);
      const instance = singleNodeInstance(a.nodeId, localCardWire(MODEL, await tinyModel()));
      const first = instance.MlxRingInstance.instanceId;
      const res = await postInstance(a, instance, [a, b]);
      expect(res.status, await res.text()).toBe(200);
      const placedAt = Date.now();

      await waitForState(a.url, (s) => servingNode(s) === b.nodeId, "the model to serve on b", 90_000);
      console.log(`placed on the failing node to serving on the other: ${Date.now() - placedAt} ms`);
      const chat = await fetch(`${a.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 4 }),
        signal: AbortSignal.timeout(60_000),
      });
      expect(chat.status, await chat.clone().text()).toBe(200);

      type Row = { id: string; outcome: string; reason: string; nodes: string };
      const rows: Row[] = JSON.parse(
        (await skulk([
          "sql",
          "--data-dir",
          a.dataDir,
          "--json",
          `SELECT id, outcome, reason, nodes FROM instances WHERE model_id = '${MODEL}' ORDER BY created_at`,
        ])).stdout,
      );
      const [x1, x2, x3, moved] = rows;
      expect(rows.map((r) => [r.outcome, JSON.parse(r.nodes)]), JSON.stringify(rows, null, 1)).toEqual([
        ["failed", [a.nodeId]],
        ["failed", [a.nodeId]],
        ["replaced", [a.nodeId]],
        ["running", [b.nodeId]],
      ]);
      expect(x1.id).toBe(first);
      // Each failure's reason is its engine's first line; each row names what followed it.
      const failed =
        `the engine on node ${a.nodeId} failed: llama-server exited before it was ready (code 1)`;
      expect(x1.reason).toBe(`${failed}; its relaunch ${x2.id} failed too`);
      expect(x2.reason).toBe(`${failed}; its relaunch ${x3.id} failed too`);
      expect(x3.reason).toBe(
        `healing: ${failed} (after 2 relaunch(es) there); torn down; replaced by ${moved.id} on one node ` +
          `(${b.nodeId}, MlxRing) without ${a.nodeId}, attempt 1/3`,
      );
      expect(moved.reason).toBe(
        `heals ${x3.id} after ${failed} (after 2 relaunch(es) there): placed on one node ` +
          `(${b.nodeId}, MlxRing) without ${a.nodeId}, attempt 1/3`,
      );
      // The relaunches' own words, as the events recorded them.
      const events = await json<{ event: { InstanceCreated?: { reason?: string } } }[]>(
        `${a.url}/events?limit=10000`,
      );
      const reasons = events.map((e) => e.event.InstanceCreated?.reason).filter(Boolean);
      expect(reasons).toEqual([
        `relaunches ${x1.id} on node ${a.nodeId} after ${failed}, relaunch 1/2`,
        `relaunches ${x2.id} on node ${a.nodeId} after ${failed}, relaunch 2/2`,
        moved.reason,
      ]);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  });
});
