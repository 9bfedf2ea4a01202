/**
 * The flight recorder's ring (bounded, newest kept, fields bounded), its windows and the merge of several
 * nodes' rings into one time line; /proc parsing of the diagnostics' process list.
 */
import { describe, expect, it } from "vitest";
import {
  DETAIL_CHARS,
  type FlightEntry,
  FlightEntrySchema,
  FlightRecorder,
  mergeTimelines,
  TAIL_LINE_CHARS,
  TAIL_LINES,
} from "../../src/diagnostics/recorder.ts";
import { descendants, parseRss, parseStat } from "../../src/diagnostics/procs.ts";

function clock(start = Date.parse("2026-12-03T10:00:00Z")) {
  let t = start;
  return { now: () => t, step: (ms: number) => (t += ms) };
}

describe("the flight recorder", () => {
  it("keeps the newest `size` entries in order, stamped with node, time and sequence", () => {
    const c = clock();
    const r = new FlightRecorder("node-a", 5, c.now);
    for (let i = 0; i < 12; i++) {
      r.note({ source: "runner", event: `e${i}`, detail: `entry ${i}` });
      c.step(10);
    }
    const got = r.entries();
    expect(got.map((e) => e.event)).toEqual(["e7", "e8", "e9", "e10", "e11"]);
    expect(got.map((e) => e.seq)).toEqual([7, 8, 9, 10, 11]);
    expect(got.every((e) => e.nodeId === "node-a")).toBe(true);
    expect(got[0].at).toBe("2026-12-03T10:00:00.070Z");
    expect(r.noted).toBe(12);
    for (const e of got) FlightEntrySchema.parse(e);
  });

  it("bounds every field: detail, log tail lines and their length, attributes", () => {
    const r = new FlightRecorder("n", 3);
    r.note({
      source: "engine",
      event: "exit",
      detail: "x".repeat(DETAIL_CHARS * 3),
      logTail: Array.from({ length: 100 }, (_, i) => `${i} ${"y".repeat(TAIL_LINE_CHARS * 2)}`),
      attrs: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, "v".repeat(1000)])),
    });
    const [e] = r.entries();
    expect(e.detail.length).toBe(DETAIL_CHARS);
    expect(e.logTail.length).toBe(TAIL_LINES);
    expect(e.logTail[0].startsWith("85 ")).toBe(true); // the last lines are kept
    expect(Math.max(...e.logTail.map((l) => l.length))).toBe(TAIL_LINE_CHARS);
    expect(Object.keys(e.attrs).length).toBe(16);
    expect(Math.max(...Object.values(e.attrs).map((v) => String(v).length))).toBe(200);
  });

  it("windows by time (strictly after `since`) and then by count (the newest)", () => {
    const c = clock();
    const r = new FlightRecorder("n", 100, c.now);
    for (let i = 0; i < 10; i++) {
      r.note({ source: "placement", event: `e${i}`, detail: "" });
      c.step(1000);
    }
    const since = Date.parse(r.entries()[3].at);
    expect(r.entries({ sinceMs: since }).map((e) => e.event)).toEqual(["e4", "e5", "e6", "e7", "e8", "e9"]);
    expect(r.entries({ sinceMs: since, limit: 2 }).map((e) => e.event)).toEqual(["e8", "e9"]);
    expect(r.entries({ limit: 3 }).map((e) => e.event)).toEqual(["e7", "e8", "e9"]);
  });

  it("merges nodes' entries by time, then node, then each node's order, and keeps the newest `limit`", () => {
    const entry = (nodeId: string, at: string, seq: number): FlightEntry =>
      FlightEntrySchema.parse({
        at,
        nodeId,
        seq,
        source: "runner",
        event: `${nodeId}${seq}`,
        detail: "",
        phase: null,
        runnerId: null,
        instanceId: null,
        modelId: null,
        taskId: null,
        commandId: null,
        attrs: {},
        logTail: [],
      });
    const a = [entry("a", "2026-12-03T10:00:00.000Z", 0), entry("a", "2026-12-03T10:00:02.000Z", 1)];
    const b = [
      entry("b", "2026-12-03T10:00:01.000Z", 0),
      entry("b", "2026-12-03T10:00:02.000Z", 1),
      entry("b", "2026-12-03T10:00:02.000Z", 2),
    ];
    const c = [entry("c", "2026-12-03T09:59:59.000Z", 0)];
    expect(mergeTimelines([a, b, c]).map((e) => e.event)).toEqual(["c0", "a0", "b0", "a1", "b1", "b2"]);
    expect(mergeTimelines([b, c, a], 2).map((e) => e.event)).toEqual(["b1", "b2"]);
  });

  it("holds a bounded amount of memory when full (measured as serialized size)", () => {
    const r = new FlightRecorder("12D3KooWRtjtYEuyWHiZZn2BKe2w5qAUxNJcvzQWyi8tgeMaD7S9", 2000);
    // A realistic mix: mostly phase changes, some engine exits carrying a full log tail.
    for (let i = 0; i < 4000; i++) {
      const exit = i % 10 === 0;
      r.note({
        source: exit ? "engine" : "runner",
        event: exit ? "exit" : "ready",
        detail: exit ? "llama-server exited with code 1" : "serves on 127.0.0.1:24001",
        runnerId: crypto.randomUUID(),
        instanceId: crypto.randomUUID(),
        modelId: "mlx-community/Llama-3.2-1B-Instruct-4bit",
        attrs: { role: "single", kind: "llama-server" },
        logTail: exit
          ? Array.from({ length: 20 }, () => "load_tensors: CPU_Mapped model buffer size = 1234.56 MiB")
          : [],
      });
    }
    const typical = JSON.stringify(r.entries()).length;
    // The worst case: every field at its bound.
    const worst = new FlightRecorder("n".repeat(52), 2000);
    for (let i = 0; i < 2000; i++) {
      worst.note({
        source: "engine",
        event: "e".repeat(64),
        detail: "d".repeat(DETAIL_CHARS),
        logTail: Array.from({ length: TAIL_LINES }, () => "l".repeat(TAIL_LINE_CHARS)),
        attrs: Object.fromEntries(Array.from({ length: 16 }, (_, k) => [`k${k}`, "v".repeat(200)])),
        runnerId: "r".repeat(200),
      });
    }
    const worstBytes = JSON.stringify(worst.entries()).length;
    console.log(
      `flight recorder, 2000 entries: typical ${(typical / 1024).toFixed(0)} KiB, worst case ${
        (worstBytes / 1024 / 1024).toFixed(1)
      } MiB (JSON)`,
    );
    expect(r.entries().length).toBe(2000);
    expect(worstBytes).toBeLessThan(2000 * (DETAIL_CHARS + TAIL_LINES * TAIL_LINE_CHARS + 16 * 220 + 2000));
  });
});

describe("/proc parsing", () => {
  it("reads a stat line whose command holds spaces and parentheses", () => {
    const line =
      "4242 (llama server) (x)) S 4000 4242 4000 0 -1 4194304 1 0 0 0 250 50 0 0 20 0 8 0 123456 1000000 2500 18446744073709551615";
    expect(parseStat(line)).toEqual({ pid: 4242, ppid: 4000, state: "S", cpuTicks: 300, startTicks: 123456 });
    expect(parseStat("garbage")).toBeNull();
  });

  it("reads VmRSS in kB", () => {
    expect(parseRss("Name:\tdeno\nVmRSS:\t  150028 kB\nThreads: 9\n")).toBe(150028 * 1024);
    expect(parseRss("Name:\tkthreadd\n")).toBeNull();
  });

  it("finds a process's descendants, not its siblings", () => {
    const s = (pid: number, ppid: number) => ({ pid, ppid, state: "S", cpuTicks: 0, startTicks: 0 });
    const tree = [s(1, 0), s(10, 1), s(11, 10), s(12, 11), s(20, 1), s(13, 10)];
    expect([...descendants(10, tree)].sort((a, b) => a - b)).toEqual([10, 11, 12, 13]);
  });
});
