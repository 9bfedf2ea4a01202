/**
 * The metrics registry's exposition (HELP/TYPE lines, escaping, cumulative histogram buckets), its
 * bounded labels, and the pure decisions: which applied events move which counters, generation records.
 */
import { describe, expect, it } from "vitest";
import type { IndexedEvent } from "../../src/cluster/events.ts";
import { emptyState } from "../../src/cluster/state.ts";
import { incrementsOf } from "../../src/metrics/events.ts";
import { BoundedLabel, OTHER } from "../../src/metrics/labels.ts";
import { countedTransport, peerKind } from "../../src/metrics/node.ts";
import { type GaugeSource, generationOf, MAX_MODEL_LABELS, Metrics } from "../../src/metrics/registry.ts";

const source = (over: Partial<GaugeSource> = {}): GaugeSource => ({
  inFlight: () => [],
  streams: () => ({ used: 0, max: 8 }),
  realtime: () => ({ used: 0, max: 4 }),
  commandQueue: () => 0,
  runnerPhases: () => [],
  memory: () => null,
  accelerators: () => [],
  isMaster: () => true,
  ...over,
});
const everyId = { model: () => true, instance: () => true };

/** The sample lines of one metric family, as `{labels} value` keyed by the full series text. */
function samples(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || !line.startsWith(name)) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

describe("the exposition", () => {
  it("has one HELP and one TYPE line per family, before its samples", async () => {
    const m = new Metrics(everyId, source());
    m.request({ route: "/v1/chat/completions", method: "POST", status: 200, model: "a/b", instance: "i1" });
    const { text, contentType } = await m.expose();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((x) => [x[1], x[2]] as const));
    expect(families.get("skulk_requests_total")).toBe("counter");
    expect(families.get("skulk_time_to_first_token_seconds")).toBe("histogram");
    expect(families.get("skulk_runners")).toBe("gauge");
    for (const name of families.keys()) {
      const lines = text.split("\n");
      const help = lines.findIndex((l) => l.startsWith(`# HELP ${name} `));
      const type = lines.indexOf(lines.find((l) => l.startsWith(`# TYPE ${name} `))!);
      expect(help, name).toBeGreaterThanOrEqual(0);
      expect(type).toBe(help + 1);
      expect(lines.filter((l) => l.startsWith(`# TYPE ${name} `))).toHaveLength(1);
    }
  });

  it("escapes backslashes, quotes and newlines in label values", async () => {
    const m = new Metrics(everyId, source());
    m.request({ route: "/x", method: "GET", status: 200, model: 'we"ird\\mo\ndel' });
    const { text } = await m.expose();
    expect(text).toContain('model="we\\"ird\\\\mo\\ndel"');
    // Each sample stays one line.
    expect(text.split("\n").filter((l) => l.includes('we\\"ird'))).toHaveLength(1);
  });

  it("keeps histogram buckets cumulative, with +Inf equal to the count", async () => {
    const m = new Metrics(everyId, source());
    for (const s of [0.004, 0.03, 0.03, 0.7, 3, 100]) m.generation({ model: "a/b", ttftSeconds: s });
    const { text } = await m.expose();
    const buckets = [...samples(text, "skulk_time_to_first_token_seconds_bucket")];
    const values = buckets.map(([, v]) => v);
    for (let i = 1; i < values.length; i++) expect(values[i]).toBeGreaterThanOrEqual(values[i - 1]);
    expect(buckets.at(-1)![0]).toContain('le="+Inf"');
    expect(values.at(-1)).toBe(6);
    expect(
      samples(text, "skulk_time_to_first_token_seconds_bucket").get(
        'skulk_time_to_first_token_seconds_bucket{le="0.05",model="a/b"}',
      ),
    ).toBe(3);
    expect(
      samples(text, "skulk_time_to_first_token_seconds_count").get(
        'skulk_time_to_first_token_seconds_count{model="a/b"}',
      ),
    ).toBe(6);
    expect(
      samples(text, "skulk_time_to_first_token_seconds_sum").get(
        'skulk_time_to_first_token_seconds_sum{model="a/b"}',
      ),
    ).toBeCloseTo(103.764, 6);
  });

  it("reads gauges at scrape time", async () => {
    let phases = ["ready", "ready", "failed"];
    const m = new Metrics(
      everyId,
      source({
        runnerPhases: () => phases,
        memory: () => ({ total: 1000, available: 400 }),
        inFlight: () => [{ instance: "i1" }, { instance: "i1" }, { instance: "i2" }],
        queued: () => [{ instance: "i1", waiting: 3 }],
        accelerators: () => [{
          vendor: "nvidia",
          name: 'free "text"',
          utilizationRatio: 0.5,
          vramTotalBytes: 8e9,
          vramUsedBytes: null,
          gttTotalBytes: null,
          gttUsedBytes: null,
          powerWatts: null,
          temperatureCelsius: 61,
          clockMhz: null,
          unifiedMemory: false,
        }],
      }),
    );
    let { text } = await m.expose();
    expect(text).toContain('skulk_runners{phase="ready"} 2');
    expect(text).toContain('skulk_runners{phase="failed"} 1');
    expect(text).toContain('skulk_runners{phase="starting"} 0');
    expect(text).toContain('skulk_memory_bytes{kind="available"} 400');
    expect(text).toContain('skulk_in_flight_requests{instance="i1"} 2');
    expect(text).toContain('skulk_queue_depth{instance="i1"} 3');
    expect(text).toContain('skulk_accelerator_temperature_celsius{index="0",vendor="nvidia"} 61');
    expect(text).not.toContain("skulk_accelerator_memory_used_bytes{");
    expect(text).not.toContain("free");
    phases = [];
    ({ text } = await m.expose());
    expect(text).toContain('skulk_runners{phase="ready"} 0');
    expect(text).not.toContain('skulk_in_flight_requests{instance="i3"}');
    m.queued("m", 0.2);
    ({ text } = await m.expose());
    expect(text).toContain('skulk_queue_wait_seconds_bucket{le="0.25",model="m"} 1');
    expect(text).toContain('skulk_queue_wait_seconds_bucket{le="0.1",model="m"} 0');
  });
});

describe("bounded labels", () => {
  it("names known values up to the cap, then counts the rest as other", () => {
    const l = new BoundedLabel(2);
    const known = (v: string) => v !== "typo";
    expect(l.of("a", known)).toBe("a");
    expect(l.of("typo", known)).toBe(OTHER);
    expect(l.of("b", known)).toBe("b");
    expect(l.of("c", known)).toBe(OTHER);
    expect(l.of("a", known)).toBe("a");
    expect(l.of(undefined, known)).toBe("");
  });

  it("never lets request text past the registry's model cap", async () => {
    const m = new Metrics({ model: (id) => id.startsWith("known/"), instance: () => false }, source());
    for (let i = 0; i < MAX_MODEL_LABELS + 20; i++) {
      m.request({ route: "/v1/chat/completions", method: "POST", status: 200, model: `known/${i}` });
    }
    m.request({
      route: "/v1/chat/completions",
      method: "POST",
      status: 404,
      model: "anything a client typed",
    });
    m.request({ route: "/x", method: "GET", status: 200, instance: "not-in-state" });
    m.request({ route: "unmatched", method: "BREW-COFFEE", status: 1000 });
    const { text } = await m.expose();
    const models = new Set(
      [...text.matchAll(/skulk_requests_total\{[^}]*model="([^"]*)"/g)].map((x) => x[1]),
    );
    expect(models.size).toBe(MAX_MODEL_LABELS + 2); // the cap, "other" and "" (the request named none)
    expect(text).not.toContain("anything a client typed");
    expect(text).toContain('code="404",model="other"');
    expect(text).toContain('instance="other"');
    expect(text).toContain('route="unmatched",method="other",code="other"');
    expect(text).not.toContain("COFFEE");
  });

  it("counts peer calls and their failures through the wrapped transport, answers and errors unchanged", async () => {
    const m = new Metrics(everyId, source());
    const t = countedTransport((_address, path) => {
      if (path === "sync") return Promise.reject(new Error("unreachable"));
      return Promise.resolve({ path });
    }, m);
    expect(await t("127.0.0.1:1", "gossip", {})).toEqual({ path: "gossip" });
    expect(await t("127.0.0.1:1", "gossip", {})).toEqual({ path: "gossip" });
    await expect(t("127.0.0.1:1", "sync", {})).rejects.toThrow("unreachable");
    const { text } = await m.expose();
    expect(text).toContain('skulk_peer_exchanges_total{kind="gossip"} 2');
    expect(text).toContain('skulk_peer_exchanges_total{kind="sync"} 1');
    expect(text).toContain('skulk_peer_exchange_failures_total{kind="sync"} 1');
    expect(text).not.toContain('skulk_peer_exchange_failures_total{kind="gossip"}');
  });

  it("counts peer calls by a fixed set of kinds", () => {
    expect(peerKind("gossip")).toBe("gossip");
    expect(peerKind("sync?x=1")).toBe("sync");
    expect(peerKind("forward/whatever")).toBe("other");
  });
});

const NODE = "node-a";
const runnerOf = (node: string, runnerId: string) => ({
  MlxRingInstance: {
    instanceId: "inst-1",
    shardAssignments: { modelId: "m", runnerToShard: {}, nodeToRunner: { [node]: runnerId } },
  },
});
const ev = (
  event: Record<string, unknown>,
): IndexedEvent => ({ idx: 1, event: { ...event } } as unknown as IndexedEvent);
const progress = (tag: string, bytes: number, node = NODE) => ({
  [tag]: {
    nodeId: node,
    shardMetadata: { PipelineShardMetadata: { modelCard: { modelId: "m" } } },
    modelDirectory: "/x",
    ...(tag === "DownloadOngoing"
      ? { downloadProgress: { downloaded: { inBytes: bytes } } }
      : tag === "DownloadCompleted"
      ? { total: { inBytes: bytes }, readOnly: false }
      : tag === "DownloadFailed"
      ? { errorMessage: "boom" }
      : { downloaded: { inBytes: bytes }, total: { inBytes: 100 } }),
  },
});

describe("which applied events move which counters", () => {
  it("counts placements, healing's refusals and elections", () => {
    const s = emptyState();
    expect(incrementsOf(ev({ InstanceCreated: { instance: {} } }), s, NODE)).toEqual([
      { counter: "placements", labels: { reason: "request" } },
    ]);
    expect(incrementsOf(ev({ InstanceCreated: { instance: {}, reason: "node x died" } }), s, NODE)[0])
      .toEqual({ counter: "placements", labels: { reason: "healing" } });
    expect(incrementsOf(ev({ PlacementFailed: {} }), s, NODE)).toEqual([
      { counter: "placement_refusals", labels: { source: "healing" } },
    ]);
    expect(incrementsOf(ev({ MasterElected: { nodeId: "b", clock: 2 } }), s, NODE)).toEqual([
      { counter: "elections" },
    ]);
    expect(incrementsOf(ev({ TestEvent: {} }), s, NODE)).toEqual([]);
  });

  it("counts starts and failures of this node's runners only, once per transition", () => {
    const s = { ...emptyState(), instances: { "inst-1": runnerOf(NODE, "r1") } } as never;
    const other = { ...emptyState(), instances: { "inst-1": runnerOf("node-b", "r1") } } as never;
    const status = (st: Record<string, unknown>) =>
      ev({ RunnerStatusUpdated: { runnerId: "r1", runnerStatus: st } });
    expect(incrementsOf(status({ RunnerLoading: {} }), s, NODE)).toEqual([{ counter: "engine_starts" }]);
    expect(incrementsOf(status({ RunnerLoading: {} }), other, NODE)).toEqual([]);
    const loading = { ...(s as object), runners: { r1: { RunnerLoading: {} } } } as never;
    expect(incrementsOf(status({ RunnerLoading: {} }), loading, NODE)).toEqual([]);
    expect(incrementsOf(status({ RunnerFailed: { errorMessage: "x" } }), loading, NODE)).toEqual([
      { counter: "engine_failures" },
    ]);
  });

  it("counts this node's download bytes as the growth between its records, and its failures", () => {
    const before = { ...emptyState(), downloads: { [NODE]: [progress("DownloadOngoing", 300)] } } as never;
    const dl = (p: unknown) => ev({ NodeDownloadProgress: { downloadProgress: p } });
    expect(incrementsOf(dl(progress("DownloadOngoing", 1300)), before, NODE)).toEqual([
      { counter: "download_bytes", value: 1000 },
    ]);
    expect(incrementsOf(dl(progress("DownloadCompleted", 2000)), before, NODE)).toEqual([
      { counter: "download_bytes", value: 1700 },
    ]);
    // A first record: bytes already on disk were not fetched now.
    expect(incrementsOf(dl(progress("DownloadOngoing", 500)), emptyState(), NODE)).toEqual([]);
    expect(incrementsOf(dl(progress("DownloadOngoing", 900, "node-b")), before, NODE)).toEqual([]);
    expect(incrementsOf(dl(progress("DownloadFailed", 0)), before, NODE)).toEqual([
      { counter: "download_failures" },
    ]);
  });
});

describe("generation records from the engine's usage and timings", () => {
  it("takes tokens from usage, prefill and per-token time from timings", () => {
    const g = generationOf(
      "m",
      { prompt_tokens: 12, completion_tokens: 5 },
      { prompt_n: 12, prompt_ms: 40, predicted_n: 5, predicted_per_second: 250 },
      null,
    );
    expect(g).toEqual({
      model: "m",
      promptTokens: 12,
      generatedTokens: 5,
      ttftSeconds: 0.04,
      perTokenSeconds: 0.004,
    });
  });

  it("prefers the measured time to first token, and tolerates missing fields", () => {
    expect(generationOf("m", null, { prompt_ms: 40 }, 0.5).ttftSeconds).toBe(0.5);
    expect(generationOf("m", "junk", undefined, null)).toEqual({
      model: "m",
      promptTokens: null,
      generatedTokens: null,
      ttftSeconds: null,
      perTokenSeconds: null,
    });
  });
});
