/**
 * Placement of speech cards: which runner serves each (whisper.cpp, espeak-ng, llama.cpp with an audio
 * projector), and that only a node advertising the engine's backend tag is chosen.
 */
import { describe, expect, it } from "vitest";
import { instanceBody } from "../../src/cluster/instances.ts";
import { type ModelCard, parseCard } from "../../src/models/card.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { servability } from "../../src/placement/capabilities.ts";
import { placementRequest, plan } from "../../src/placement/planner.ts";
import { clusterView, counterIds, GB } from "../helpers/synthetic-cluster.ts";

const catalog = Catalog.bundled();
const bundled = (id: string): ModelCard => catalog.get(id)!;
const WHISPER = "ggerganov/whisper.cpp";
const ESPEAK = "skulk/espeak-ng";
const audioGguf = parseCard({
  model_id: "someone/audio-llm-GGUF",
  storage_size: { in_bytes: 2 * GB },
  n_layers: 28,
  hidden_size: 3072,
  supports_tensor: false,
  tasks: ["SpeechToText"],
  family: "voxtral",
  capabilities: ["stt"],
  context_length: 32768,
  num_key_value_heads: 8,
  gguf_file: "model.gguf",
  mmproj_file: "mmproj.gguf",
  audio: { kind: "stt" },
  placement: { compatible_backends: ["llama_cpp-cpu"], backend_preference: ["llama_cpp-cpu"] },
});

describe("speech servability", () => {
  it.each([
    [WHISPER, { ok: true, runner: "whisper.cpp", nodeTag: "whisper_cpp", poolTags: [] }],
    [ESPEAK, { ok: true, runner: "espeak-ng", nodeTag: "espeak_ng", poolTags: [] }],
  ])("%s", (id, expected) => {
    expect(servability(bundled(id))).toMatchObject(expected);
  });

  it("serves an audio GGUF with its projector on llama.cpp", () => {
    expect(servability(audioGguf)).toMatchObject({ ok: true, runner: "llama.cpp" });
  });

  it.each(["csukuangfj/vits-piper-en_US-amy-medium", "csukuangfj/kokoro-en-v0_19"])(
    "serves the neural voice %s with sherpa-onnx",
    (id) => {
      expect(servability(bundled(id))).toMatchObject({
        ok: true,
        runner: "sherpa-onnx",
        nodeTag: "sherpa_onnx",
      });
    },
  );

  it("refuses an MLX build of a neural voice with the reason", () => {
    const s = servability(bundled("majentik/Kokoro-82M-MLX-4bit"));
    expect(s.ok).toBe(false);
    expect(!s.ok && s.reason).toMatch(/MLX build of a kokoro voice/);
  });

  it("refuses a voice family no engine here speaks", () => {
    const card = parseCard({ ...bundled(ESPEAK), model_id: "someone/odd-tts", family: "bark" });
    const s = servability(card);
    expect(!s.ok && s.reason).toMatch(/bark speech synthesis model; Skulk speaks with espeak-ng and/);
  });
});

describe("speech placement", () => {
  const plain = { id: "plain", ram: 64 * GB };
  const speechy = {
    id: "speechy",
    ram: 16 * GB,
    computes: [
      "cpu",
      "whisper_cpp",
      "whisper_cpp-cpu",
      "espeak_ng",
      "espeak_ng-cpu",
      "sherpa_onnx",
      "sherpa_onnx-cpu",
    ],
  };

  it.each([WHISPER, ESPEAK])(
    "puts %s on the node that has its engine, though another has more memory",
    (id) => {
      const r = plan(clusterView([plain, speechy]), bundled(id), placementRequest(id, {}), counterIds());
      if (!r.ok) throw new Error(r.error);
      expect(Object.keys(instanceBody(r.placement.instance).shardAssignments.nodeToRunner)).toEqual([
        "speechy",
      ]);
    },
  );

  it("puts a neural voice (its size resolved from the hub) on the node that has sherpa-onnx", () => {
    const id = "csukuangfj/vits-piper-en_US-amy-medium";
    const card = { ...bundled(id), storage_size: { in_bytes: 80_000_000 } };
    const r = plan(clusterView([plain, speechy]), card, placementRequest(id, {}), counterIds());
    if (!r.ok) throw new Error(r.error);
    expect(Object.keys(instanceBody(r.placement.instance).shardAssignments.nodeToRunner)).toEqual([
      "speechy",
    ]);
    const none = plan(clusterView([plain]), card, placementRequest(id, {}), counterIds());
    expect(!none.ok && none.error).toMatch(/plain has no sherpa-onnx engine/);
  });

  it("says why when no node has the engine", () => {
    const r = plan(clusterView([plain]), bundled(WHISPER), placementRequest(WHISPER, {}), counterIds());
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toMatch(/plain has no whisper\.cpp engine/);
  });
});
