import { describe, expect, it } from "vitest";
import { launchProgress } from "../../src/cli/launch.ts";

const state = (runners: Record<string, Record<string, { errorMessage?: string | null }>>) => ({
  instances: { i1: { LlamaCpp: { shardAssignments: { nodeToRunner: { n1: "r1", n2: "r2" } } } } },
  runners,
});

describe("skulk models launch: reading an instance's progress", () => {
  it("waits while it is absent or loading, and is done when every runner is ready or running", () => {
    expect(launchProgress(state({}), "i2")).toEqual({
      done: false,
      failed: null,
      states: ["not yet in the cluster state"],
    });
    expect(launchProgress(state({ r1: { RunnerReady: {} } }), "i1")).toEqual({
      done: false,
      failed: null,
      states: ["RunnerReady", "RunnerPending"],
    });
    expect(launchProgress(state({ r1: { RunnerReady: {} }, r2: { RunnerRunning: {} } }), "i1")).toEqual({
      done: true,
    });
  });

  it("stops on a failed runner with its message", () => {
    expect(
      launchProgress(state({ r1: { RunnerReady: {} }, r2: { RunnerFailed: { errorMessage: "oom" } } }), "i1"),
    )
      .toMatchObject({ done: false, failed: "oom" });
    expect(launchProgress(state({ r1: { RunnerFailed: { errorMessage: null } } }), "i1"))
      .toMatchObject({ failed: "a runner failed" });
  });
});
