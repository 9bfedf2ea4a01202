/** Table-driven tests of the pure core: reducer, SQL guard, identity encoding, stream framing, routing, worker plan. */
import { describe, expect, it } from "vitest";
import { makeEvent } from "../../src/cluster/events.ts";
import type { Instance } from "../../src/cluster/instances.ts";
import { apply, emptyState, OutOfOrderEvent } from "../../src/cluster/state.ts";
import { base58btc, peerIdFromEd25519 } from "../../src/node/identity.ts";
import { ChatStreamTranslator, SseLineReader } from "../../src/serving/chat-stream.ts";
import { resolveTarget } from "../../src/serving/target.ts";
import { checkReadOnly, ReadOnlyRefusal, splitStatements } from "../../src/store/readonly.ts";
import { planWorker } from "../../src/worker/plan.ts";

function instance(id: string, model: string, nodes: Record<string, string>): Instance {
  const shards = Object.fromEntries(
    Object.values(nodes).map((runner, i) => [runner, {
      PipelineShardMetadata: {
        modelCard: { modelId: model },
        deviceRank: i,
        worldSize: Object.keys(nodes).length,
        resolvedBackend: "llama_cpp-cpu",
        immediateException: false,
        shouldTimeout: null,
        startLayer: 0,
        endLayer: 4,
        nLayers: 4,
      },
    }]),
  );
  return {
    MlxRingInstance: {
      instanceId: id,
      shardAssignments: { modelId: model, runnerToShard: shards, nodeToRunner: nodes },
      contextTokenLimit: 2048,
      hostsByNode: {},
      ephemeralPort: 0,
    },
  };
}

const fold = (events: ReturnType<typeof makeEvent>[]) =>
  events.reduce((s, event, idx) => apply(s, { idx, session: "m/0", event }), emptyState());

describe("the reducer", () => {
  it("creates, updates and deletes instances and their runners", () => {
    const s1 = fold([
      makeEvent("InstanceCreated", { instance: instance("i1", "m", { n1: "r1" }) }),
      makeEvent("RunnerStatusUpdated", { runnerId: "r1", runnerStatus: { RunnerReady: {} } }),
      makeEvent("RunnerStatusUpdated", { runnerId: "ghost", runnerStatus: { RunnerReady: {} } }),
    ]);
    expect(Object.keys(s1.instances)).toEqual(["i1"]);
    expect(s1.runners).toEqual({ r1: { RunnerReady: {} } }); // a runner of no live instance is ignored
    expect(s1.lastEventAppliedIdx).toBe(2);
    const s2 = apply(s1, {
      idx: 3,
      session: "m/0",
      event: makeEvent("InstanceDeleted", { instanceId: "i1" }),
    });
    expect(s2.instances).toEqual({});
    expect(s2.runners).toEqual({});
    expect(s1.instances.i1).toBeDefined(); // the old state is untouched
  });

  it("drops every instance touching a timed-out node", () => {
    const s = fold([
      makeEvent("InstanceCreated", { instance: instance("a", "m", { n1: "r1", n2: "r2" }) }),
      makeEvent("InstanceCreated", { instance: instance("b", "m", { n3: "r3" }) }),
      makeEvent("NodeTimedOut", { nodeId: "n2" }),
    ]);
    expect(Object.keys(s.instances)).toEqual(["b"]);
  });

  it("refuses an index out of order", () => {
    expect(() => apply(emptyState(), { idx: 1, session: "m/0", event: makeEvent("TestEvent") })).toThrowError(
      OutOfOrderEvent,
    );
  });

  it("is deterministic: the same events give the same state", () => {
    const evs = [
      makeEvent("InstanceCreated", { instance: instance("a", "m", { n1: "r1" }) }),
      makeEvent("TracingStateChanged", { enabled: true }),
    ];
    expect(fold(evs)).toEqual(fold(evs));
  });
});

describe("the read-only SQL guard", () => {
  it.each([
    ["SELECT 1", "SELECT 1"],
    ["  -- note\n select * from nodes; ", "select * from nodes"],
    ["WITH x AS (SELECT 1) SELECT * FROM x", "WITH x AS (SELECT 1) SELECT * FROM x"],
    ["PRAGMA table_info", "PRAGMA table_info"],
    ["SELECT ';' AS semi", "SELECT ';' AS semi"],
  ])("accepts %j", (sql, stmt) => {
    expect(checkReadOnly(sql)).toBe(stmt);
  });
  it.each([
    ["", /no SQL/],
    ["DELETE FROM nodes", /DELETE would write/],
    ["ATTACH 'x.db' AS y", /ATTACH is refused/],
    ["select 1; select 2", /one statement/],
    ["PRAGMA journal_mode = delete", /PRAGMA assignments/],
    ["PRAGMA table_info(nodes)", /PRAGMA assignments/],
  ])("refuses %j", (sql, why) => {
    expect(() => checkReadOnly(sql)).toThrowError(ReadOnlyRefusal);
    expect(() => checkReadOnly(sql)).toThrowError(why);
  });
  it("splits on semicolons outside strings and comments only", () => {
    expect(splitStatements("select 'a;b'; /* ; */ select \"c;\"")).toEqual(["select 'a;b'", 'select "c;"']);
  });
});

describe("node identity", () => {
  it("encodes base58btc with leading zeros", () => {
    expect(base58btc(new Uint8Array([0, 0, 1]))).toBe("112");
    expect(base58btc(new TextEncoder().encode("hello world"))).toBe("StV1DL6CwTryKyV");
  });
  it("derives a libp2p Ed25519 PeerId", () => {
    // Known vector: the all-zero key's PeerId (identity multihash of the protobuf-wrapped key).
    const id = peerIdFromEd25519(new Uint8Array(32));
    expect(id).toMatch(/^12D3KooW/);
    expect(id).toHaveLength(52);
    expect(peerIdFromEd25519(new Uint8Array(32).fill(1))).not.toBe(id);
  });
});

describe("the chat stream translator", () => {
  const drain = (t: ChatStreamTranslator, payloads: string[]) =>
    t.head() + payloads.map((p) => t.push(p)).join("") + t.end();
  const events = (sse: string) => sse.split("\n\n").filter(Boolean);

  it("frames content with the command id and usage on the final chunk", () => {
    const t = new ChatStreamTranslator("cmd-1", "my/model", 100);
    const out = drain(t, [
      JSON.stringify({ choices: [{ index: 0, delta: { role: "assistant", content: null } }] }),
      JSON.stringify({ choices: [{ index: 0, delta: { content: "Hel" } }] }),
      JSON.stringify({ choices: [{ index: 0, delta: { content: "lo" }, finish_reason: "length" }] }),
      JSON.stringify({
        choices: [],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
        timings: { predicted_per_second: 50 },
      }),
      "[DONE]",
    ]);
    const ev = events(out);
    expect(ev[0]).toBe(": keep-alive");
    expect(ev[1]).toBe(": command_id cmd-1");
    const chunks = ev.filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(chunks.map((c) => c.choices[0].delta.content)).toEqual(["Hel", "lo", ""]);
    expect(chunks.every((c) => c.id === "cmd-1" && c.object === "chat.completion" && c.model === "my/model"))
      .toBe(true);
    expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
    expect(chunks.at(-1).usage.total_tokens).toBe(5);
    expect(ev.some((e) => e.startsWith(": generation_stats"))).toBe(true);
    expect(ev.at(-1)).toBe("data: [DONE]");
  });

  it("frames llama-server's plain content deltas the same on the fast path as on the parsing path", () => {
    const plain = (content: string) =>
      JSON.stringify({
        choices: [{ finish_reason: null, index: 0, delta: { content } }],
        created: 1796226699,
        id: "chatcmpl-x",
        model: '/m/tiny "q".gguf',
        system_fingerprint: "b1",
        object: "chat.completion.chunk",
      });
    // Same chunk with its keys in another order: not the fast path's shape, so it is parsed.
    const reordered = (content: string) =>
      JSON.stringify({
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { content }, finish_reason: null }],
      });
    for (const content of [" Hello", 'a"quote"', "back\\slash", "line\nbreak", "ünïcødé ✓"]) {
      const fast = new ChatStreamTranslator("c", "m/x", 7).push(plain(content));
      const slow = new ChatStreamTranslator("c", "m/x", 7).push(reordered(content));
      expect(JSON.parse(fast.slice(6))).toEqual(JSON.parse(slow.slice(6)));
      expect(JSON.parse(fast.slice(6)).choices[0].delta.content).toBe(content);
    }
    expect(new ChatStreamTranslator("c", "m").push(plain(""))).toBe("");
  });

  it("sends each tool call whole in one delta", () => {
    const t = new ChatStreamTranslator("c", "m");
    const out = drain(t, [
      JSON.stringify({
        choices: [{
          delta: {
            tool_calls: [{ index: 0, id: "call_a", function: { name: "get_weather", arguments: "" } }],
          },
        }],
      }),
      JSON.stringify({
        choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] } }],
      }),
      JSON.stringify({
        choices: [{
          delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] },
          finish_reason: "tool_calls",
        }],
      }),
    ]);
    const chunks = events(out).filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(chunks).toHaveLength(1);
    expect(chunks[0].choices[0].finish_reason).toBe("tool_calls");
    expect(chunks[0].choices[0].delta.tool_calls).toEqual([
      {
        id: "call_a",
        index: 0,
        type: "function",
        function: { id: "call_a", name: "get_weather", arguments: '{"city":"Oslo"}' },
      },
    ]);
  });

  it("ends with one error event and [DONE] when the engine fails", () => {
    const t = new ChatStreamTranslator("c", "m");
    t.push(JSON.stringify({ choices: [{ delta: { content: "a" } }] }));
    const out = t.fail("engine died");
    expect(events(out)).toEqual([expect.stringContaining('"engine died"'), "data: [DONE]"]);
    expect(t.end()).toBe("");
  });

  it("reassembles SSE lines split across network chunks", () => {
    const r = new SseLineReader();
    const enc = new TextEncoder();
    expect(r.push(enc.encode('data: {"a":'))).toEqual([]);
    expect(r.push(enc.encode("1}\n\ndata: [DONE]\n"))).toEqual(['{"a":1}', "[DONE]"]);
  });
});

describe("request routing", () => {
  const s = fold([
    makeEvent("InstanceCreated", { instance: instance("i1", "m", { n1: "r1" }) }),
    makeEvent("InstanceCreated", { instance: instance("i2", "m", { n2: "r2" }) }),
    makeEvent("RunnerStatusUpdated", { runnerId: "r2", runnerStatus: { RunnerReady: {} } }),
  ]);
  it("404s a model with no instance", () => {
    expect(resolveTarget(s, "other", "n1")).toEqual({
      ok: false,
      status: 404,
      message: "No instance found for model other",
    });
  });
  it("picks a ready instance, even on another node", () => {
    const r = resolveTarget(s, "m", "n1");
    expect(r).toMatchObject({ ok: true, target: { instanceId: "i2", driverNode: "n2", runnerId: "r2" } });
  });
  it("prefers a ready instance driven by this node", () => {
    const s2 = apply(s, {
      idx: 3,
      session: "m/0",
      event: makeEvent("RunnerStatusUpdated", { runnerId: "r1", runnerStatus: { RunnerReady: {} } }),
    });
    expect(resolveTarget(s2, "m", "n1")).toMatchObject({ ok: true, target: { instanceId: "i1" } });
  });
  it("says why when nothing is ready", () => {
    const f = fold([
      makeEvent("InstanceCreated", { instance: instance("i1", "m", { n1: "r1" }) }),
      makeEvent("RunnerStatusUpdated", {
        runnerId: "r1",
        runnerStatus: { RunnerFailed: { errorMessage: "out of memory" } },
      }),
    ]);
    const r = resolveTarget(f, "m", "n1");
    expect(r).toMatchObject({ ok: false, status: 503 });
    expect(!r.ok && r.message).toContain("out of memory");
  });
});

describe("the worker plan", () => {
  const s = fold([
    makeEvent("InstanceCreated", { instance: instance("i1", "m", { n1: "r1", n2: "r2" }) }),
    makeEvent("InstanceCreated", { instance: instance("i2", "m", { n2: "r3" }) }),
  ]);
  it("starts the runners placed on this node, in a stable order", () => {
    expect(planWorker(s, "n2", []).map((a) => [a.kind, a.runnerId])).toEqual([["start", "r2"], [
      "start",
      "r3",
    ]]);
    expect(planWorker(s, "n9", [])).toEqual([]);
  });
  it("stops runners whose instance is gone and leaves running ones alone", () => {
    const acts = planWorker(s, "n1", [{ runnerId: "r1", instanceId: "i1", phase: "ready" }, {
      runnerId: "old",
      instanceId: "gone",
      phase: "ready",
    }]);
    expect(acts).toEqual([{ kind: "stop", runnerId: "old", reason: "instance gone is no longer placed" }]);
  });
  it("does not restart a runner the cluster saw fail", () => {
    const f = apply(s, {
      idx: 2,
      session: "m/0",
      event: makeEvent("RunnerStatusUpdated", {
        runnerId: "r1",
        runnerStatus: { RunnerFailed: { errorMessage: "x" } },
      }),
    });
    expect(planWorker(f, "n1", [])).toEqual([]);
  });
});
