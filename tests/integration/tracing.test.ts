/**
 * Request tracing on real nodes: `PUT /v1/tracing` on a follower turns it on for the cluster, a chat sent to
 * one node and forwarded to the node that drives the model leaves spans on both under one task id, readable
 * through the cluster routes and as a Chrome trace file, and through `skulk sql`; an unsigned task id is ignored.
 */
import { afterAll, describe, expect, it } from "vitest";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { tinyModel } from "../helpers/models.ts";
import {
  llamaNodes,
  localCardWire,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";
import { skulk, startDaemon } from "../helpers/daemon.ts";
import { registerCard } from "../helpers/cluster.ts";
import { engineBinary } from "../helpers/models.ts";

const MODEL = "skulk-test/tracing-tiny";
const nodes = llamaNodes();
afterAll(nodes.killAll);

interface TraceView {
  taskId: string;
  traces: {
    name: string;
    category: string;
    nodeId: string;
    rank: number;
    startUs: number;
    durationUs: number;
    attrs: Record<string, unknown>;
  }[];
  sourceNodes: { nodeId: string }[];
  partial?: unknown[];
}

async function chat(url: string, stream: boolean, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 8,
      stream,
    }),
  });
  return res;
}

describe("request tracing across two nodes", () => {
  it("joins a forwarded request's spans from both nodes under one task id", async () => {
    const a = await nodes.start(["--force-master"]);
    const b = await nodes.start(["--peer", `127.0.0.1:${a.port}`]);
    expect(await oneMaster([a.url, b.url])).toBe(a.nodeId);
    await waitFor("both nodes seeing each other", async () => {
      const s = await json<{ lastSeen: Record<string, string> }>(`${b.url}/state`);
      return Object.keys(s.lastSeen).length === 2;
    });
    // Placed on b through a: b drives the model, so a chat sent to a is forwarded.
    const instance = singleNodeInstance(b.nodeId, localCardWire(MODEL, await tinyModel()));
    const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
    expect((await postInstance(a, instance, [a, b])).status).toBe(200);
    for (const u of [a.url, b.url]) {
      await waitForState(
        u,
        (s) => runnerTag(s, runnerId) === "RunnerReady",
        `the runner ready on ${u}`,
        240_000,
      );
    }
    await waitFor("a seeing the model ready", async () => (await chat(a.url, false)).ok, 60_000);

    // Off by default: no task id on the answer, nothing stored.
    expect(await json(`${a.url}/v1/tracing`)).toEqual({ enabled: false });
    const untraced = await chat(a.url, false);
    expect(untraced.status).toBe(200);
    expect(untraced.headers.get("x-skulk-task-id")).toBeNull();
    await untraced.body?.cancel();

    // Turned on through the follower: the master indexes it, every node applies it.
    const put = await fetch(`${b.url}/v1/tracing`, {
      method: "PUT",
      body: JSON.stringify({ enabled: true }),
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toEqual({ enabled: true });
    await waitFor(
      "both nodes tracing",
      async () =>
        (await json<{ enabled: boolean }>(`${a.url}/v1/tracing`)).enabled &&
        (await json<{ enabled: boolean }>(`${b.url}/v1/tracing`)).enabled,
    );
    const bad = await fetch(`${a.url}/v1/tracing`, {
      method: "PUT",
      body: JSON.stringify({ enabled: "yes" }),
    });
    expect(bad.status).toBe(400);

    // Streamed through a to b, which drives the model.
    const res = await chat(a.url, true);
    expect(res.status).toBe(200);
    const taskId = res.headers.get("x-skulk-task-id")!;
    expect(taskId).toMatch(/^[0-9a-f-]{36}$/);
    expect((await res.text()).trimEnd().endsWith("data: [DONE]")).toBe(true);

    let last: unknown = null;
    const view = await waitFor("spans from both nodes", async () => {
      const v = await json<TraceView>(`${a.url}/v1/traces/cluster/${taskId}`);
      last = v;
      const from = new Set(v.traces.map((t) => t.nodeId));
      return from.has(a.nodeId) && from.has(b.nodeId) ? v : null;
    }).catch((e) => {
      throw new Error(`${(e as Error).message}; last answer ${JSON.stringify(last)}`);
    });
    expect(view.partial).toBeUndefined();
    expect(view.sourceNodes.map((n) => n.nodeId)).toEqual([a.nodeId, b.nodeId]);
    const on = (node: string) => view.traces.filter((t) => t.nodeId === node).map((t) => t.category);
    expect(on(a.nodeId)).toEqual(
      expect.arrayContaining(["request", "receive", "route", "forward", "stream"]),
    );
    expect(on(b.nodeId)).toEqual(
      expect.arrayContaining(["request", "receive", "route", "queue", "prefill", "decode", "stream"]),
    );
    const forward = view.traces.find((t) => t.category === "forward")!;
    expect(forward.attrs.toNode).toBe(b.nodeId);
    const served = view.traces.find((t) => t.nodeId === b.nodeId && t.category === "request")!;
    expect(served.attrs.forwardedBy).toBe(a.nodeId);
    expect(served.rank).toBe(1);
    const decode = view.traces.find((t) => t.category === "decode")!;
    expect(Number(decode.attrs.tokens)).toBeGreaterThan(0);
    // The serving node's work lies inside the forward (same machine, one clock).
    expect(served.startUs).toBeGreaterThanOrEqual(forward.startUs);
    expect(served.startUs + served.durationUs).toBeLessThanOrEqual(forward.startUs + forward.durationUs);

    // Each node's local route holds its own spans only.
    const local = await json<TraceView>(`${b.url}/v1/traces/${taskId}`);
    expect(new Set(local.traces.map((t) => t.nodeId))).toEqual(new Set([b.nodeId]));

    // The Chrome trace file: complete events with numeric times, one named thread per node.
    const raw = await fetch(`${b.url}/v1/traces/cluster/${taskId}/raw`);
    expect(raw.status).toBe(200);
    expect(raw.headers.get("content-disposition")).toContain(`trace_${taskId}.json`);
    const chrome = await raw.json() as { traceEvents: Record<string, unknown>[] };
    const complete = chrome.traceEvents.filter((e) => e.ph === "X");
    expect(complete.length).toBe(view.traces.length);
    for (const e of complete) {
      expect(typeof e.name).toBe("string");
      expect(Number.isInteger(e.ts) && Number.isInteger(e.dur) && (e.dur as number) >= 0).toBe(true);
      expect(e.pid).toBe(0);
      expect([0, 1]).toContain(e.tid);
    }
    const threads = chrome.traceEvents.filter((e) => e.ph === "M" && e.name === "thread_name");
    expect(threads.map((t) => t.tid).sort()).toEqual([0, 1]);

    const stats = await json<
      {
        totalWallTimeUs: number;
        byCategory: Record<string, { count: number }>;
        byRank: Record<string, unknown>;
      }
    >(
      `${a.url}/v1/traces/cluster/${taskId}/stats`,
    );
    expect(stats.totalWallTimeUs).toBeGreaterThan(0);
    expect(stats.byCategory.decode.count).toBe(1);
    expect(Object.keys(stats.byRank).sort()).toEqual(["0", "1"]);

    const list = await json<
      { traces: { taskId: string; sourceNodes: { nodeId: string }[]; modelId: string }[] }
    >(
      `${b.url}/v1/traces/cluster`,
    );
    const entry = list.traces.find((t) => t.taskId === taskId)!;
    expect(entry.modelId).toBe(MODEL);
    expect(entry.sourceNodes.map((n) => n.nodeId).sort()).toEqual([a.nodeId, b.nodeId].sort());

    // A task id a client sends, even with the forwarded-by mark, is not trusted without a peer signature.
    const forged = crypto.randomUUID();
    const f = await chat(b.url, false, { "x-skulk-forwarded-by": a.nodeId, "x-skulk-task-id": forged });
    await f.body?.cancel();
    expect((await fetch(`${b.url}/v1/traces/cluster/${forged}`)).status).toBe(404);

    // Ids are validated; an unknown one is a 404 naming it.
    const badId = await fetch(`${a.url}/v1/traces/..%2F..%2Fetc`);
    expect(badId.status).toBe(400);
    expect((await badId.json()).error.message).toContain("task_id");
    const unknown = crypto.randomUUID();
    const missing = await fetch(`${a.url}/v1/traces/${unknown}`);
    expect(missing.status).toBe(404);
    expect((await missing.json()).error.message).toBe(`Trace not found: ${unknown}`);
    expect((await fetch(`${a.url}/v1/traces?limit=100000`)).status).toBe(400);

    // The spans are rows `skulk sql` reads.
    const sql = await skulk([
      "sql",
      "--json",
      "--data-dir",
      b.dataDir,
      `SELECT category, node_id FROM trace_spans WHERE task_id = '${taskId}'`,
    ]);
    expect(sql.code).toBe(0);
    const rows = JSON.parse(sql.stdout) as { category: string; node_id: string }[];
    expect(rows.map((r) => r.category)).toContain("decode");
    expect(new Set(rows.map((r) => r.node_id))).toEqual(new Set([b.nodeId]));

    // A POST that is not a generation is not traced.
    const place = await fetch(`${a.url}/v1/traces/delete`, {
      method: "POST",
      body: JSON.stringify({ taskIds: [] }),
    });
    expect(place.headers.get("x-skulk-task-id")).toBeNull();
    expect(await place.json()).toEqual({ deleted: [], notFound: [] });

    // Off again, through the master: new requests carry no task id.
    const off = await fetch(`${a.url}/v1/tracing`, {
      method: "PUT",
      body: JSON.stringify({ enabled: false }),
    });
    expect(await off.json()).toEqual({ enabled: false });
    await waitFor(
      "b not tracing",
      async () => !(await json<{ enabled: boolean }>(`${b.url}/v1/tracing`)).enabled,
    );
    const after = await chat(a.url, false);
    expect(after.headers.get("x-skulk-task-id")).toBeNull();
    await after.body?.cancel();

    // With b gone, the cluster list still answers with a's traces and names b as missing; deleting a's part
    // of the trace leaves it unknown there.
    await b.kill();
    const partial = await json<
      { traces: { taskId: string }[]; partial: { nodeId: string; error: string }[] }
    >(
      `${a.url}/v1/traces/cluster`,
    );
    expect(partial.traces.map((t) => t.taskId)).toContain(taskId);
    expect(partial.partial.map((p) => p.nodeId)).toEqual([b.nodeId]);
    const del = await json(`${a.url}/v1/traces/delete`, {
      method: "POST",
      body: JSON.stringify({ taskIds: [taskId, forged] }),
    });
    expect(del).toEqual({ deleted: [taskId], notFound: [forged] });
    expect((await fetch(`${a.url}/v1/traces/${taskId}`)).status).toBe(404);
    const badDelete = await fetch(`${a.url}/v1/traces/delete`, {
      method: "POST",
      body: JSON.stringify({ taskIds: ["../x"] }),
    });
    expect(badDelete.status).toBe(400);
  }, 420_000);
});

describe("request tracing between two nodes with different API keys, joined by a token", () => {
  const KEY_A = "key-of-node-a-0123456789";
  const KEY_B = "key-of-node-b-0123456789";
  const authed = (url: string, key: string, init: RequestInit = {}) =>
    fetch(url, { ...init, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } });

  it("joins the spans: the key check and the tracing middleware share one signature check", async () => {
    // Also: SKULK_TRACING_ENABLED on the node that leads turns tracing on for the cluster.
    const a = await startDaemon({
      args: ["--no-mdns"],
      // tracing.enabled: a, which leads, turns tracing on for the cluster at start.
      env: {
        SKULK_API_KEY: KEY_A,
        SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
        SKULK_TRACING_ENABLED: "1",
      },
      timeoutMs: 60_000,
    });
    const token = await skulk(["cluster", "token", "--data-dir", a.dataDir]);
    expect(token.code, token.stderr).toBe(0);
    const b = await startDaemon({
      args: ["--no-mdns", "--no-worker", "--join", token.stdout.trim()],
      env: { SKULK_API_KEY: KEY_B },
      timeoutMs: 60_000,
    });
    try {
      await waitFor("one master for a and b", async () => {
        const views = await Promise.all([
          authed(`${a.url}/cluster/view`, KEY_A).then((r) => r.json()),
          authed(`${b.url}/cluster/view`, KEY_B).then((r) => r.json()),
        ]);
        return views.every((v) => v.session?.master && v.session.master === views[0].session.master);
      }, 60_000);
      const instance = singleNodeInstance(a.nodeId, localCardWire(MODEL, await tinyModel()));
      const { secret } = JSON.parse(await Deno.readTextFile(`${a.dataDir}/cluster.json`));
      await registerCard([a], localCardWire(MODEL, await tinyModel()), { secret, apiKey: KEY_A });
      const placed = await authed(`${a.url}/instance`, KEY_A, {
        method: "POST",
        body: JSON.stringify({ instance }),
      });
      expect(placed.status, await placed.text()).toBe(200);
      const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
      await waitFor("the runner ready and a's address known, seen from b", async () => {
        const s = await (await authed(`${b.url}/state`, KEY_B)).json();
        return runnerTag(s, runnerId) === "RunnerReady" && Object.keys(s.lastSeen ?? {}).length === 2;
      }, 240_000);

      await waitFor(
        "b tracing",
        async () => (await (await authed(`${b.url}/v1/tracing`, KEY_B)).json()).enabled,
      );
      const res = await authed(`${b.url}/v1/chat/completions`, KEY_B, {
        method: "POST",
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
      });
      expect(res.status).toBe(200);
      await res.body?.cancel();
      const taskId = res.headers.get("x-skulk-task-id")!;
      const view = await waitFor("spans from both nodes", async () => {
        const v = await (await authed(`${b.url}/v1/traces/cluster/${taskId}`, KEY_B)).json() as TraceView;
        return new Set(v.traces?.map((t) => t.nodeId)).size === 2 ? v : null;
      });
      expect(view.traces.filter((t) => t.nodeId === a.nodeId).map((t) => t.category)).toContain("decode");
      // The trace routes need the key like the rest of the API.
      expect((await fetch(`${a.url}/v1/traces/${taskId}`)).status).toBe(401);
    } finally {
      await Promise.all([b.kill(), a.kill()]);
    }
  }, 420_000);
});
