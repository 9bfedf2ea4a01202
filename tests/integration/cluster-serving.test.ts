/**
 * The data plane across a real cluster on loopback: a model placed on one node answers through every node's
 * API, and keeps answering through a master failover (the instance survives the master's death).
 */
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import { allVoters, json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { tinyModel } from "../helpers/models.ts";
import {
  llamaNodes,
  localCardWire,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";

const MODEL = "skulk-test/cluster-tiny";
const nodes = llamaNodes();
const node = nodes.start;
afterAll(nodes.killAll);

async function chat(url: string): Promise<string> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
  const r = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "Hello" }],
    max_tokens: 6,
  });
  return r.choices[0].message.content ?? "";
}

describe("serving across the cluster", () => {
  it("answers through any node and keeps serving through a master failover", async () => {
    const a = await node(["--force-master"]);
    const b = await node(["--peer", `127.0.0.1:${a.port}`]);
    const c = await node(["--peer", `127.0.0.1:${a.port}`]);
    const urls = [a, b, c].map((d) => d.url);
    expect(await oneMaster(urls)).toBe(a.nodeId);
    for (const u of urls) {
      expect((await json<{ masterNodeId: string }>(`${u}/state`)).masterNodeId).toBe(a.nodeId);
    }
    await waitFor("every node seeing all three", async () => {
      const s = await json<{ lastSeen: Record<string, string> }>(`${c.url}/state`);
      return Object.keys(s.lastSeen).length === 3;
    });

    // Place the model on node b through node c's API; it is driven by b, not by the master.
    const instance = singleNodeInstance(b.nodeId, localCardWire(MODEL, await tinyModel()));
    const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
    const res = await postInstance(c, instance, [a, b, c]);
    expect(res.status).toBe(200);
    for (const u of urls) {
      await waitForState(
        u,
        (s) => runnerTag(s, runnerId) === "RunnerReady",
        `the runner ready as seen by ${u}`,
      );
    }

    // Streamed through c to b and back; non-streamed through a.
    const streamed = await (await fetch(`${c.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 6,
        stream: true,
      }),
    })).text();
    expect(streamed).toMatch(/^: keep-alive\n\n: command_id /);
    expect(streamed.trimEnd().endsWith("data: [DONE]")).toBe(true);
    for (const u of urls) expect((await chat(u)).length).toBeGreaterThan(0);

    // The master dies; the instance on b keeps serving, through b and through c, under the new master. Only
    // once all three vote can two of them elect one (a node votes once it has caught up: docs/cluster.md).
    await allVoters(urls);
    await a.kill();
    const newMaster = await oneMaster([b.url, c.url]);
    expect([b.nodeId, c.nodeId]).toContain(newMaster);
    const s = await json<{ instances: Record<string, unknown> }>(`${c.url}/state`);
    expect(Object.keys(s.instances)).toContain(instance.MlxRingInstance.instanceId);
    expect((await chat(c.url)).length).toBeGreaterThan(0);
    expect((await chat(b.url)).length).toBeGreaterThan(0);
  });
});
