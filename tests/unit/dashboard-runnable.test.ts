/**
 * The model store's "Runs on this cluster" rule over real inputs: bundled cards as `/models` lists them and
 * `/state` made by the server's own stateToWire from node readings.
 */
import { describe, expect, it } from "vitest";
import { stateToWire } from "../../src/api/wire/state.ts";
import { emptyState } from "../../src/cluster/state.ts";
import type { ClusterStateWire } from "../../src/dashboard/app/api.ts";
import { linuxOnly, runnableHere } from "../../src/dashboard/app/runnable.ts";
import { Catalog, modelListEntry } from "../../src/models/catalog.ts";
import { entries, GB, type NodeSpec, NOW } from "../helpers/synthetic-cluster.ts";

/** A live (or silent) node advertising these backend tags. */
function node(id: string, os: string, backends: string[], silentMs = 1000): NodeSpec {
  return { id, os, ram: 64 * GB, computes: backends, silentMs };
}

/** The `/state` JSON the dashboard receives, made by the server's own stateToWire. */
function wire(specs: NodeSpec[]): ClusterStateWire {
  return JSON.parse(JSON.stringify(stateToWire(emptyState(), entries(specs), NOW)));
}

const catalog = Catalog.bundled();
const entry = (id: string) => JSON.parse(JSON.stringify(modelListEntry(catalog.get(id)!)));
const CPU = ["llama_cpp", "llama_cpp-cpu"];
const CUDA = ["llama_cpp", "llama_cpp-cpu", "llama_cpp-cuda"];

describe("which catalogue models this cluster can run", () => {
  it("defaults the filter on only when every live node runs Linux", () => {
    expect(linuxOnly(wire([node("a", "linux", CPU), node("b", "linux", CUDA)]))).toBe(true);
    expect(linuxOnly(wire([node("a", "linux", CPU), node("m", "darwin", [])]))).toBe(false);
    // A silent Mac does not count; no node at all is not "Linux-only".
    expect(linuxOnly(wire([node("a", "linux", CPU), node("m", "darwin", [], 60_000)]))).toBe(true);
    expect(linuxOnly(wire([]))).toBe(false);
  });

  it("refuses an MLX card with the capability table's reason, whatever the nodes offer", () => {
    const v = runnableHere(entry("mlx-community/Qwen3-0.6B-4bit"), wire([node("a", "linux", CUDA)]));
    expect(v).toMatchObject({ ok: false, runner: true });
    expect(v.ok ? "" : v.reason).toMatch(/MLX cards need an MLX runner, which Linux nodes lack/);
  });

  it("runs a GGUF card on a CPU node, and its GGUF counterpart of an MLX family too", () => {
    const s = wire([node("a", "linux", CPU)]);
    expect(runnableHere(entry("Qwen/Qwen3-0.6B-GGUF"), s)).toEqual({ ok: true });
    expect(runnableHere(entry("unsloth/Llama-3.2-1B-Instruct-GGUF"), s)).toEqual({ ok: true });
  });

  it("refuses a GPU-only GGUF card on a CPU-only cluster, naming what the nodes offer", () => {
    const id = "poolside/Laguna-S-2.1-GGUF";
    expect(catalog.get(id)!.placement.compatible_backends.some((t) => t.endsWith("-cpu"))).toBe(false);
    const v = runnableHere(entry(id), wire([node("a", "linux", CPU)]));
    expect(v).toMatchObject({ ok: false, runner: false });
    expect(v.ok ? "" : v.reason).toMatch(/needs llama\.cpp on .*cuda.*; a offers cpu/);
    expect(runnableHere(entry(id), wire([node("a", "linux", CPU), node("g", "linux", CUDA)]))).toEqual({
      ok: true,
    });
  });

  it("asks a speech card's engine of the node itself", () => {
    const id = "ggerganov/whisper.cpp";
    const m = entry(id);
    expect(m.serving).toMatchObject({ ok: true, node_tag: "whisper_cpp" });
    expect(runnableHere(m, wire([node("a", "linux", CPU)]))).toMatchObject({ ok: false, runner: false });
    expect(runnableHere(m, wire([node("a", "linux", [...CPU, "whisper_cpp", "whisper_cpp-cpu"])]))).toEqual({
      ok: true,
    });
  });

  it("says so when no node has reported", () => {
    expect(runnableHere(entry("Qwen/Qwen3-0.6B-GGUF"), wire([]))).toMatchObject({ ok: false, runner: false });
  });
});
