/** The pure parts of adding a hub repo: quantisation names, split-shard grouping, the preferred pick, search answers, config.json cards. */
import { describe, expect, it } from "vitest";
import type { GgufFacts } from "../../src/models/gguf/reader.ts";
import {
  availableQuants,
  chooseGguf,
  configHubCard,
  ggufHubCard,
  ggufListing,
  HubCardError,
  QUANT_PREFERENCE,
  QuantNotFound,
  quantOf,
} from "../../src/models/hub-card.ts";
import { type HubFile, parseSearch, searchUrl } from "../../src/models/hub.ts";
import { servability } from "../../src/placement/capabilities.ts";

const f = (path: string, size = 100): HubFile => ({ path, size, sha256: null });

describe("quantOf", () => {
  it("reads the quantisation from the names repos use", () => {
    expect(quantOf("Qwen3-0.6B-Q4_K_M.gguf")).toBe("Q4_K_M");
    expect(quantOf("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf")).toBe("Q4_K_M");
    expect(quantOf("Q8_0/Model-Q8_0-00002-of-00003.gguf")).toBe("Q8_0");
    expect(quantOf("llama-2-7b.Q5_K_S.gguf")).toBe("Q5_K_S");
    expect(quantOf("Llama-3.2-1B-Instruct-UD-Q4_K_XL.gguf")).toBe("Q4_K_XL");
    expect(quantOf("gpt-oss-20b-mxfp4.gguf")).toBe("MXFP4");
    expect(quantOf("Qwen_Qwen3-8B-IQ4_XS.gguf")).toBe("IQ4_XS");
    expect(quantOf("model-bf16.gguf")).toBe("BF16");
    // Sizes and versions are not quantisations.
    expect(quantOf("Qwen3-0.6B.gguf")).toBeNull();
    expect(quantOf("model.gguf")).toBeNull();
  });
});

describe("ggufListing", () => {
  it("groups split shards into one model with the summed size, apart from projectors and other files", () => {
    const l = ggufListing([
      f("README.md"),
      f("config.json"),
      f("M-Q8_0-00002-of-00003.gguf", 20),
      f("M-Q8_0-00001-of-00003.gguf", 10),
      f("M-Q8_0-00003-of-00003.gguf", 30),
      f("M-Q4_K_M.gguf", 7),
      f("mmproj-M-f16.gguf", 5),
    ]);
    expect(l.projectors.map((p) => p.path)).toEqual(["mmproj-M-f16.gguf"]);
    expect(l.incomplete).toEqual([]);
    expect(l.groups).toEqual([
      { first: "M-Q4_K_M.gguf", files: [f("M-Q4_K_M.gguf", 7)], quant: "Q4_K_M", bytes: 7 },
      {
        first: "M-Q8_0-00001-of-00003.gguf",
        files: [
          f("M-Q8_0-00001-of-00003.gguf", 10),
          f("M-Q8_0-00002-of-00003.gguf", 20),
          f(
            "M-Q8_0-00003-of-00003.gguf",
            30,
          ),
        ],
        quant: "Q8_0",
        bytes: 60,
      },
    ]);
  });

  it("does not offer a split with a shard missing, and says which", () => {
    const l = ggufListing([f("M-Q4_K_M-00001-of-00003.gguf"), f("M-Q4_K_M-00003-of-00003.gguf")]);
    expect(l.groups).toEqual([]);
    expect(l.incomplete).toEqual(["M-Q4_K_M (2 of 3 shards listed)"]);
  });
});

describe("chooseGguf", () => {
  const groups = ggufListing([
    f("M-F16.gguf"),
    f("M-Q8_0.gguf"),
    f("M-Q5_K_M.gguf"),
    f("M-Q4_K_S.gguf"),
    f("M-Q4_K_M-00001-of-00002.gguf"),
    f("M-Q4_K_M-00002-of-00002.gguf"),
    f("M-Q4_K_M.gguf"),
    f("M-weird.gguf"),
  ]).groups;

  it("follows the documented preference, a single file before a split of the same quantisation", () => {
    expect(chooseGguf("o/m", groups).first).toBe("M-Q4_K_M.gguf");
    expect(chooseGguf("o/m", groups.filter((g) => g.first !== "M-Q4_K_M.gguf")).first).toBe(
      "M-Q4_K_M-00001-of-00002.gguf",
    );
    expect(chooseGguf("o/m", groups.filter((g) => g.quant !== "Q4_K_M")).quant).toBe("Q4_K_S");
    expect(chooseGguf("o/m", groups.filter((g) => !g.quant.startsWith("Q4"))).quant).toBe("Q5_K_M");
    // A name the preference does not know comes last.
    expect(availableQuants(groups)).toEqual(["Q4_K_M", "Q4_K_S", "Q5_K_M", "Q8_0", "F16", "M-weird"]);
    expect(QUANT_PREFERENCE.indexOf("Q4_K_M")).toBe(0);
  });

  it("takes the asked quantisation in any case, and names the available ones when it is absent", () => {
    expect(chooseGguf("o/m", groups, "q8_0").first).toBe("M-Q8_0.gguf");
    expect(() => chooseGguf("o/m", groups, "Q3_K_S")).toThrow(QuantNotFound);
    expect(() => chooseGguf("o/m", groups, "Q3_K_S")).toThrow(
      'o/m has no "Q3_K_S" quantisation; it has Q4_K_M, Q4_K_S, Q5_K_M, Q8_0, F16, M-weird',
    );
  });
});

describe("search answers", () => {
  it("asks the hub for the most downloaded, only mlx-community when asked", () => {
    const u = new URL(searchUrl("http://hub", { query: "qwen gguf", limit: 5, mlxOnly: true }));
    expect(u.pathname).toBe("/api/models");
    expect(u.searchParams.get("search")).toBe("qwen gguf");
    expect(u.searchParams.get("sort")).toBe("downloads");
    expect(u.searchParams.get("limit")).toBe("5");
    expect(u.searchParams.get("author")).toBe("mlx-community");
  });

  it("sorts by downloads, bounds the answer, and drops ids this node would not accept", () => {
    const out = parseSearch([
      { id: "a/low", downloads: 3, likes: 1, lastModified: "2026-01-02T00:00:00Z", tags: ["gguf"] },
      { id: "../../etc", downloads: 1_000 },
      { id: "b/high", author: "b", downloads: 90, likes: 7, tags: ["x", 5] },
      { id: "c/mid", downloads: 50 },
      { nothing: true },
    ], 2);
    expect(out).toEqual([
      { id: "b/high", author: "b", downloads: 90, likes: 7, last_modified: null, tags: ["x"] },
      { id: "c/mid", author: "c", downloads: 50, likes: 0, last_modified: null, tags: [] },
    ]);
    expect(() => parseSearch({ error: "nope" }, 5)).toThrow();
  });
});

describe("configHubCard", () => {
  it("describes an MLX repo from config.json (a VLM's text_config too) and placement refuses it with the reason", () => {
    const card = configHubCard("mlx-community/Tiny-4bit", {
      model_type: "qwen2_vl",
      text_config: {
        num_hidden_layers: 24,
        hidden_size: 896,
        num_attention_heads: 14,
        num_key_value_heads: 2,
        max_position_embeddings: 32768,
      },
      quantization: { bits: 4, group_size: 64 },
    }, 500_000_000);
    expect(card).toMatchObject({
      n_layers: 24,
      hidden_size: 896,
      num_key_value_heads: 2,
      num_attention_heads: 14,
      context_length: 32768,
      quantization: "4bit",
      family: "qwen2_vl",
      storage_size: { in_bytes: 500_000_000 },
      is_custom: true,
      placement: { compatible_backends: ["mlx"] },
    });
    const s = servability(card);
    expect(s.ok).toBe(false);
    expect(!s.ok && s.reason).toMatch(/MLX runner, which Linux nodes lack/);
  });

  it("refuses a config without a shape or a repo without weights", () => {
    expect(() => configHubCard("o/m", { model_type: "x" }, 10)).toThrow(HubCardError);
    expect(() => configHubCard("o/m", { num_hidden_layers: 2, hidden_size: 8 }, 0)).toThrow(
      /no \.safetensors/,
    );
    expect(() => configHubCard("o/m", [1, 2], 10)).toThrow(/not a JSON object/);
  });
});

describe("ggufHubCard", () => {
  const facts: GgufFacts = {
    architecture: "llama",
    blockCount: 2,
    embeddingLength: 64,
    headCount: 4,
    headCountKv: 2,
    headDim: 16,
    contextLength: 4096,
    fileType: 15,
    fileTypeName: "Q4_K_M",
    hasChatTemplate: true,
    tensorCount: 20,
    parameterCount: 1000,
    tensorBytes: 5_000,
    dataOffset: 1_000,
  };

  it("makes a llama.cpp card: the first shard as gguf_file, shards and projector summed, vision with a projector", () => {
    const g =
      ggufListing([f("M-Q4_K_M-00001-of-00002.gguf", 6_000), f("M-Q4_K_M-00002-of-00002.gguf", 4_000)])
        .groups[0];
    const card = ggufHubCard("o/m", g, facts, f("mmproj-f16.gguf", 500));
    expect(card).toMatchObject({
      model_id: "o/m",
      gguf_file: "M-Q4_K_M-00001-of-00002.gguf",
      mmproj_file: "mmproj-f16.gguf",
      storage_size: { in_bytes: 10_500 },
      n_layers: 2,
      num_key_value_heads: 2,
      capabilities: ["text", "vision"],
      quantization: "Q4_K_M",
      is_custom: true,
    });
    expect(card.gguf_path).toBeUndefined();
    expect(card.placement.compatible_backends).toContain("llama_server-cpu");
    expect(servability(card).ok).toBe(true);
  });

  it("refuses a listing that gives the first file fewer bytes than its own header describes", () => {
    const g = ggufListing([f("M-Q4_K_M.gguf", 5_999)]).groups[0];
    expect(() => ggufHubCard("o/m", g, facts)).toThrow(
      "o/m: M-Q4_K_M.gguf is listed as 5999 bytes but its header describes 6000",
    );
  });
});
