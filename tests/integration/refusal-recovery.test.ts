/**
 * Refusal recovery on real nodes: a node given a shard it cannot fit refuses it before loading anything,
 * and the master places the model again without it; the history says each step and why.
 */
import { afterAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import {
  localCardWire,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";

const MODEL = "skulk-test/refused-tiny";
const running: Daemon[] = [];
afterAll(async () => {
  await Promise.all(running.map((d) => d.kill()));
});

async function node(args: string[], env: Record<string, string> = {}): Promise<Daemon> {
  const d = await startDaemon({
    args: ["--no-mdns", ...args],
    env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), ...env },
  });
  running.push(d);
  return d;
}

describe("a node that refuses its shard", () => {
  it("is left out and the model is placed again on a node that fits it", async () => {
    const a = await node(["--force-master"]);
    // b lends at most 64 MiB: the tiny model's shard (weights plus the engine's working memory) does not fit.
    const b = await node(["--peer", `127.0.0.1:${a.port}`], { SKULK_MEMORY_LIMIT: "64MiB" });
    await oneMaster([a.url, b.url]);
    await waitFor(
      "both nodes in a's view",
      async () => Object.keys((await json<{ lastSeen: object }>(`${a.url}/state`)).lastSeen).length === 2,
    );

    // Placed on b explicitly (POST /instance does not consult the planner), so only b's own check can stop it.
    const instance = singleNodeInstance(b.nodeId, localCardWire(MODEL, await tinyModel()));
    const refusedId = instance.MlxRingInstance.instanceId;
    expect((await postInstance(a, instance, [a, b])).status)
      .toBe(200);

    const s = await waitForState(
      a.url,
      (st) => {
        const ids = Object.keys(st.instances);
        return !ids.includes(refusedId) && ids.length === 1 &&
          Object.values(st.runners).some((r) => "RunnerReady" in (r as object));
      },
      "the model to be placed again and ready",
      60_000,
    );
    const replacement = Object.values(s.instances)[0] as {
      MlxRingInstance: { instanceId: string; shardAssignments: { nodeToRunner: Record<string, string> } };
    };
    expect(Object.keys(replacement.MlxRingInstance.shardAssignments.nodeToRunner)).toEqual([a.nodeId]);
    // b learns of the replacement through replication: wait until it, too, sees the runner ready.
    const runnerId = Object.values(replacement.MlxRingInstance.shardAssignments.nodeToRunner)[0];
    await waitForState(
      b.url,
      (st) => runnerTag(st, runnerId) === "RunnerReady",
      "b to see the replacement ready",
    );

    const res = await fetch(`${b.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    });
    expect(res.status).toBe(200);

    // b never started an engine for the refused shard.
    const engines = JSON.parse(
      (await skulk(["sql", "--data-dir", b.dataDir, "--json", "SELECT count(*) AS n FROM engine_processes"]))
        .stdout,
    );
    expect(engines[0].n).toBe(0);

    const hist = JSON.parse(
      (await skulk([
        "sql",
        "--data-dir",
        a.dataDir,
        "--json",
        `SELECT id, outcome, reason FROM instances ORDER BY created_at`,
      ])).stdout,
    );
    expect(hist[0]).toMatchObject({ id: refusedId, outcome: "replaced" });
    expect(hist[0].reason).toMatch(
      new RegExp(
        `node ${b.nodeId} refused its shard of ${MODEL}: .*needs .* GB here.*can give .* GB now; replaced by`,
      ),
    );
    expect(hist[1].id).toBe(replacement.MlxRingInstance.instanceId);
  });
});
