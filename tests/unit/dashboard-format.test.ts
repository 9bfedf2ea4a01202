import { describe, expect, it } from "vitest";
import {
  bytes,
  downloadText,
  downloadView,
  duration,
  instanceReady,
  instanceView,
  runnerState,
  runningByInstance,
  sizeBucket,
} from "../../src/dashboard/app/format.ts";
import { emptyAnswer, foldItem, SseParser } from "../../src/dashboard/app/sse.ts";
import type { DownloadProgress } from "../../src/cluster/downloads.ts";
import type { Instance } from "../../src/cluster/instances.ts";

describe("dashboard formatting", () => {
  it.each([[0, "0 B"], [999, "999 B"], [1500, "1.5 KB"], [25_300_000_000, "25.3 GB"], [
    123_456_789_012,
    "123 GB",
  ], [null, "—"]])(
    "bytes(%j) = %s",
    (n, want) => expect(bytes(n)).toBe(want),
  );
  it.each([[0, "0 s"], [59_400, "59 s"], [61_000, "1 min 1 s"], [3_723_000, "1 h 2 min"], [NaN, "—"]])(
    "duration(%j) = %s",
    (ms, want) => expect(duration(ms)).toBe(want),
  );
  it.each([[5e8, "tiny"], [2e9, "small"], [8e9, "medium"], [3e10, "large"], [2e11, "huge"]])(
    "size %d is %s",
    (n, want) => expect(sizeBucket(n)).toBe(want),
  );

  it.each(
    [
      [undefined, "waiting", "idle"],
      [{ RunnerReady: {} }, "ready", "ok"],
      [{ RunnerLoading: { layersLoaded: 3, totalLayers: 18 } }, "loading", "busy"],
      [{ RunnerFailed: { errorMessage: "out of memory" } }, "failed", "error"],
      [{ RunnerWarmingUp: {} }, "warming up", "busy"],
    ] as const,
  )("runner %j reads %s", (status, label, tone) => {
    const st = runnerState(status);
    expect([st.label, st.tone]).toEqual([label, tone]);
  });

  it("reads an instance's shards and readiness", () => {
    const shard = (start: number, end: number) => ({
      PipelineShardMetadata: {
        modelCard: { modelId: "m" },
        deviceRank: 0,
        worldSize: 2,
        resolvedBackend: null,
        immediateException: false,
        shouldTimeout: null,
        startLayer: start,
        endLayer: end,
        nLayers: 24,
      },
    });
    const instance = {
      MlxRingInstance: {
        instanceId: "i1",
        shardAssignments: {
          modelId: "m",
          runnerToShard: { r1: shard(0, 12), r2: shard(12, 24) },
          nodeToRunner: { a: "r1", b: "r2" },
        },
        contextTokenLimit: 4096,
        hostsByNode: {},
        ephemeralPort: 0,
      },
    } as Instance;
    const loading = instanceView("i1", instance, {
      r1: { RunnerReady: {} },
      r2: { RunnerLoading: { layersLoaded: 1, totalLayers: 12 } },
    });
    expect(loading.shards.map((s) => [s.nodeId, s.layers])).toEqual([["a", "layers 0–12 of 24"], [
      "b",
      "layers 12–24 of 24",
    ]]);
    expect(loading.contextTokenLimit).toBe(4096);
    expect(instanceReady(loading)).toBe(false);
    expect(
      instanceReady(instanceView("i1", instance, { r1: { RunnerReady: {} }, r2: { RunnerRunning: {} } })),
    ).toBe(true);
  });

  it("reads download progress with speed and ETA", () => {
    const base = {
      nodeId: "n1",
      shardMetadata: { PipelineShardMetadata: { modelCard: { modelId: "org/m" } } },
      modelDirectory: "/x",
    };
    const p = {
      DownloadOngoing: {
        ...base,
        downloadProgress: { total: { inBytes: 1000 }, downloaded: { inBytes: 250 }, speed: 50, etaMs: 15000 },
      },
    } as unknown as DownloadProgress;
    expect(downloadView(p)).toMatchObject({
      modelId: "org/m",
      state: "downloading",
      ratio: 0.25,
      speed: 50,
      etaMs: 15000,
    });
    const f = { DownloadFailed: { ...base, errorMessage: "disk full" } } as unknown as DownloadProgress;
    expect(downloadView(f)).toMatchObject({ state: "failed", error: "disk full" });
    expect(downloadText(downloadView(p))).toBe("250 B / 1.0 KB · 50 B/s · 15 s left");
  });

  it("says 'size unknown' for a pending download of an open size, never 0 B / 0 B", () => {
    const pending = {
      DownloadPending: {
        nodeId: "n1",
        shardMetadata: { PipelineShardMetadata: { modelCard: { modelId: "org/open" } } },
        modelDirectory: "/x",
      },
    } as unknown as DownloadProgress;
    const view = downloadView(pending);
    expect(view).toMatchObject({ state: "pending", total: 0 });
    expect(downloadText(view)).toBe("size unknown");
    expect(downloadText({ ...view, downloaded: 2048 })).toBe("2.0 KB of an unknown size");
  });
});

describe("chat stream reading", () => {
  it("splits lines across arbitrary chunk boundaries and keeps comments apart", () => {
    const text =
      ': keep-alive\n: command_id abc-1\ndata: {"choices":[{"delta":{"content":"Hel"}}]}\n\ndata: {"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n';
    for (const cut of [1, 7, 13, 40]) {
      const p = new SseParser();
      let a = emptyAnswer();
      for (let i = 0; i < text.length; i += cut) {
        for (const item of p.push(text.slice(i, i + cut))) a = foldItem(a, item);
      }
      expect(a).toMatchObject({
        content: "Hello",
        finishReason: "stop",
        done: true,
        commandId: "abc-1",
        error: null,
      });
    }
  });

  it("keeps reasoning apart from the answer and gathers tool calls", () => {
    const p = new SseParser();
    let a = emptyAnswer();
    const lines = [
      { choices: [{ delta: { reasoning_content: "think " } }] },
      { choices: [{ delta: { reasoning_content: "more" } }] },
      { choices: [{ delta: { content: "ok" } }] },
      {
        choices: [{
          delta: {
            tool_calls: [{
              id: "t1",
              index: 0,
              type: "function",
              function: { name: "get_weather", arguments: '{"city":' },
            }],
          },
        }],
      },
      {
        choices: [{
          delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] },
          finish_reason: "tool_calls",
        }],
      },
    ].map((c) => `data: ${JSON.stringify(c)}\n`).join("");
    for (const item of p.push(lines)) a = foldItem(a, item);
    expect(a.reasoning).toBe("think more");
    expect(a.content).toBe("ok");
    expect(a.toolCalls).toEqual([{ id: "t1", name: "get_weather", arguments: '{"city":"Oslo"}' }]);
    expect(a.finishReason).toBe("tool_calls");
  });

  it("surfaces an error chunk", () => {
    const a = new SseParser().push('data: {"error":{"message":"model gone"}}\n').reduce(
      foldItem,
      emptyAnswer(),
    );
    expect(a.error).toBe("model gone");
  });
});

describe("runningByInstance", () => {
  it("counts each node's reported tasks per instance, ignoring tasks without one", () => {
    const tasks = {
      t1: { TextGeneration: { instanceId: "a" } },
      t2: { TextGeneration: { instanceId: "b" } },
      t3: { TextEmbedding: { instanceId: "a" } },
      t4: { TextGeneration: {} },
    };
    expect([...runningByInstance(tasks)].sort()).toEqual([["a", 2], ["b", 1]]);
  });
});
