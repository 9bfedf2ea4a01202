/**
 * Replicas, routing and admission on two real daemons with real llama-servers: a model placed twice runs
 * on both nodes, concurrent requests are shared between its instances, a conversation's next turn reuses
 * its instance's KV cache, a burst past an instance's slots and queue gets 429s while the rest complete,
 * and deleting one instance leaves the other serving.
 */
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";
import { allVoters, json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { postJson, runnerTag, stateOf, waitForState, type WireState } from "../helpers/cluster.ts";

const MODEL = "skulk-test/replica-tiny";
const SOLO = "skulk-test/replica-solo";
/** Each instance's admission queue beyond its 4 engine slots (engines.llama_parallel's default). */
const QUEUE_DEPTH = 2;
const running: Daemon[] = [];
afterAll(async () => {
  await Promise.all(running.map((d) => d.kill()));
});

async function node(args: string[]): Promise<Daemon> {
  const d = await startDaemon({
    args: ["--no-mdns", ...args],
    env: {
      SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
      SKULK_LLAMA_THREADS: "1",
      SKULK_QUEUE_DEPTH: String(QUEUE_DEPTH),
    },
    timeoutMs: 60_000,
  });
  running.push(d);
  return d;
}

const post = (url: string, path: string, body: unknown) => postJson(url, path, body, 120_000);
const nodesOf = (inst: unknown): string[] =>
  Object.keys(
    (Object.values(inst as object)[0] as { shardAssignments: { nodeToRunner: object } }).shardAssignments
      .nodeToRunner,
  );
const runnerOf = (inst: unknown): string =>
  Object.values(
    (Object.values(inst as object)[0] as { shardAssignments: { nodeToRunner: object } }).shardAssignments
      .nodeToRunner,
  )[0] as string;

/** `skulk_requests_total` of one route and instance in a node's exposition, summed over codes. */
async function servedBy(url: string, instance: string, code = "200"): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const line of text.split("\n")) {
    if (
      line.startsWith("skulk_requests_total{") && line.includes('route="/v1/chat/completions"') &&
      line.includes(`instance="${instance}"`) && line.includes(`code="${code}"`)
    ) n += Number(line.split(" ").at(-1));
  }
  return n;
}

/** A streamed chat read to its end: the status, headers, and whether it ended with [DONE]. */
async function streamChat(url: string, body: Record<string, unknown>) {
  const res = await post(url, "/v1/chat/completions", { model: MODEL, stream: true, ...body });
  const text = await res.text();
  return { res, text, done: text.trimEnd().endsWith("data: [DONE]") };
}

describe("replicas, routing and admission", () => {
  let a: Daemon;
  let b: Daemon;
  const instances: Record<string, string> = {};

  it("a model placed twice gets a second instance, on the node not yet serving it", async () => {
    a = await node(["--force-master"]);
    b = await node(["--peer", `127.0.0.1:${a.port}`]);
    await oneMaster([a.url, b.url], 60_000);
    await allVoters([a.url, b.url], 60_000);
    await waitFor(
      "both nodes' memory and engines in a's view",
      async () => Object.keys((await stateOf(a.url)).nodeMemory ?? {}).length === 2,
      60_000,
    );
    const gguf = await tinyModel();
    for (const id of [MODEL, SOLO]) {
      const res = await post(a.url, "/models/add", { model_id: id, gguf_path: gguf });
      expect(res.status, await res.text()).toBe(200);
    }
    const ids: string[] = [];
    for (const via of [a, b]) {
      const res = await post(via.url, "/place_instance", { model_id: MODEL });
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(200);
      ids.push(body.instance_id);
    }
    expect(new Set(ids).size).toBe(2);
    const st = await waitForState(
      a.url,
      (s) => ids.every((id) => s.instances[id] && runnerTag(s, runnerOf(s.instances[id])) === "RunnerReady"),
      "both instances ready",
      180_000,
    );
    const where = ids.map((id) => nodesOf(st.instances[id])[0]);
    expect(new Set(where)).toEqual(new Set([a.nodeId, b.nodeId]));
    instances.a = ids[where.indexOf(a.nodeId)];
    instances.b = ids[where.indexOf(b.nodeId)];
    // The CLI lists them together under the model.
    const out = await skulk(["status", "--url", a.url]);
    expect(out.stdout).toContain(`${MODEL}: 2 instances`);
  }, 300_000);

  it("eight concurrent streams through one node are shared by both instances", async () => {
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        streamChat(a.url, {
          messages: [{ role: "user", content: `Question number ${i}: count the stars` }],
          max_tokens: 48,
        })),
    );
    for (const r of runs) {
      expect(r.res.status, r.text.slice(0, 300)).toBe(200);
      expect(r.done).toBe(true);
    }
    // a counts what it served itself; b counts what a forwarded to it with b's instance named.
    const onA = await servedBy(a.url, instances.a);
    const onB = await servedBy(b.url, instances.b);
    console.log(`8 streams: ${onA} served by a's instance, ${onB} by b's`);
    expect(onA).toBeGreaterThan(0);
    expect(onB).toBeGreaterThan(0);
    expect(onA + onB).toBe(8);
  }, 180_000);

  it("a conversation's next turn goes back to its instance and comes back with cached tokens", async () => {
    const client = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: "unused", maxRetries: 0 });
    for (const topic of ["ships", "rivers", "clocks"]) {
      // ~1,500 tokens of the tiny vocabulary: far beyond the affinity minimum, inside the 4,096 context.
      const system = Array.from({ length: 500 }, (_, i) => `${topic}${i % 89}`).join(" ");
      const turn1 = [{ role: "system" as const, content: system }, {
        role: "user" as const,
        content: "first",
      }];
      const r1 = await client.chat.completions.create({ model: MODEL, messages: turn1, max_tokens: 4 });
      const r2 = await client.chat.completions.create({
        model: MODEL,
        messages: [
          ...turn1,
          { role: "assistant", content: r1.choices[0].message.content ?? "" },
          { role: "user", content: "second" },
        ],
        max_tokens: 4,
      });
      const cached = r2.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      console.log(`${topic}: turn 2 prompt ${r2.usage?.prompt_tokens} tokens, ${cached} cached`);
      expect(r1.usage?.prompt_tokens).toBeGreaterThan(1000);
      expect(cached).toBeGreaterThan(1000);
    }
  }, 300_000);

  it("a burst past an instance's slots and queue gets 429s with Retry-After; the rest complete", async () => {
    const solo = await post(a.url, "/place_instance", { model_id: SOLO });
    const placed = await solo.json();
    expect(solo.status, JSON.stringify(placed)).toBe(200);
    const st = await waitForState(
      a.url,
      (s) => runnerTag(s, runnerOf(s.instances[placed.instance_id])) === "RunnerReady",
      "the solo instance ready",
      180_000,
    );
    // Its driver queues and counts (a forwards to it when the planner put it on b).
    const driver = nodesOf(st.instances[placed.instance_id])[0] === a.nodeId ? a : b;
    // 4 slots + 2 waiting take 6; sixteen at once leave at least ten refused while the first generate.
    const burst = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        (async () => {
          const res = await post(a.url, "/v1/chat/completions", {
            model: SOLO,
            stream: true,
            messages: [{ role: "user", content: `burst ${i}` }],
            max_tokens: 400,
            ignore_eos: true,
          });
          return { res, text: await res.text() };
        })()),
    );
    const ok = burst.filter((r) => r.res.status === 200);
    const refused = burst.filter((r) => r.res.status === 429);
    console.log(
      `burst of 16: ${ok.length} served, ${refused.length} refused; queue ms ${
        ok.map((r) => r.res.headers.get("x-skulk-queue-ms")).join(",")
      }`,
    );
    expect(ok.length + refused.length).toBe(16);
    expect(ok.length).toBeGreaterThanOrEqual(4 + QUEUE_DEPTH);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of ok) {
      expect(r.text.trimEnd().endsWith("data: [DONE]"), r.text.slice(-300)).toBe(true);
      expect(Number(r.res.headers.get("x-skulk-queue-ms"))).toBeGreaterThanOrEqual(0);
    }
    // The queued ones waited for a slot, and said so.
    expect(Math.max(...ok.map((r) => Number(r.res.headers.get("x-skulk-queue-ms"))))).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.res.headers.get("retry-after")).toBe("1");
      const err = JSON.parse(r.text).error;
      expect(err.type).toBe("rate_limit_exceeded");
      expect(err.message).toMatch(/busy/);
    }
    const metrics = await (await fetch(`${driver.url}/metrics`)).text();
    expect(metrics).toMatch(/skulk_queue_wait_seconds_count\{model="skulk-test\/replica-solo"\} [1-9]/);
    expect(metrics).toMatch(/skulk_queue_depth/);
    // Nothing is left queued or running.
    await waitFor("the solo instance idle again", async () => {
      const tasks = Object.values((await stateOf(a.url)).tasks ?? {});
      return tasks.length === 0;
    }, 30_000);
  }, 300_000);

  it("deleting one instance leaves the other serving", async () => {
    const res = await fetch(`${a.url}/instance/${instances.a}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    await waitForState(a.url, (s) => !s.instances[instances.a], "a's instance gone");
    const before = await servedBy(b.url, instances.b);
    for (let i = 0; i < 2; i++) {
      const r = await streamChat(a.url, {
        messages: [{ role: "user", content: "still there?" }],
        max_tokens: 8,
      });
      expect(r.res.status, r.text.slice(0, 300)).toBe(200);
      expect(r.done).toBe(true);
    }
    expect(await servedBy(b.url, instances.b)).toBe(before + 2);
    const st = await json<WireState>(`${b.url}/state`);
    expect(Object.keys(st.instances)).toContain(instances.b);
  }, 120_000);
});
