/**
 * The Skulk 1.4 card audit's corrections (1.4 notes §k), one test each, over the cards as bundled.
 * Each fails on the 1.3.0 cards: a deleted repo, a thinking claim, missing KV heads, missing contexts.
 */
import { describe, expect, it } from "vitest";
import { BUNDLED_CARDS } from "../../src/generated/cards.gen.ts";
import { Catalog, modelListEntry } from "../../src/models/catalog.ts";
import { resolveCapabilities } from "../../src/models/capabilities.ts";

const catalog = Catalog.bundled();
const card = (id: string) => {
  const c = catalog.get(id);
  if (!c) throw new Error(`no bundled card ${id}`);
  return c;
};

describe("1.4 card corrections", () => {
  it("the Ornith 1.0-35B MLX card names the mlx-community conversion, not the deleted repo", () => {
    const ids = catalog.all().map((c) => c.model_id);
    expect(ids).not.toContain("leonsarmiento/Ornith-1.0-35B-4bit-mlx");
    expect(BUNDLED_CARDS.some((c) => c.toml.includes('"leonsarmiento/'))).toBe(false);
    const ornith = card("mlx-community/Ornith-1.0-35B-4bit");
    expect(ornith.vision?.weights_repo).toBe("mlx-community/Ornith-1.0-35B-4bit");
    // Structurally identical to the card it replaces.
    expect(ornith).toMatchObject({
      n_layers: 40,
      hidden_size: 2048,
      num_key_value_heads: 2,
      context_length: 262144,
    });
  });

  for (const quant of ["4bit", "8bit"]) {
    const id = `mlx-community/Qwen3-235B-A22B-Instruct-2507-${quant}`;
    it(`${id} neither claims nor resolves to thinking`, () => {
      const c = card(id);
      expect(c.capabilities).not.toContain("thinking");
      expect(c.capabilities).not.toContain("thinking_toggle");
      expect(c.reasoning).toBeUndefined();
      expect(resolveCapabilities(c).supports_thinking).toBe(false);
      expect(modelListEntry(c).tags).not.toContain("thinking");
    });
  }

  it("every Nemotron-3-Nano card has its KV heads (2 of 32 heads, head dim 128)", () => {
    const nano = catalog.all().filter((c) =>
      c.model_id.startsWith("mlx-community/NVIDIA-Nemotron-3-Nano-30B-A3B")
    );
    expect(nano.length).toBe(7);
    for (const c of nano) {
      expect(c, c.model_id).toMatchObject({ num_key_value_heads: 2, num_attention_heads: 32, head_dim: 128 });
    }
  });

  const contexts: [string, number][] = [
    ["mlx-community/DeepSeek-V3.1-4bit", 163840],
    ["mlx-community/DeepSeek-V3.1-8bit", 163840],
    ["mlx-community/DeepSeek-V3.2-4bit", 163840],
    ["mlx-community/DeepSeek-V3.2-8bit", 163840],
    ["mlx-community/gemma-3n-E2B-it-4bit", 32768],
    ["mlx-community/gemma-3n-E4B-it-4bit", 32768],
    ["mlx-community/gemma-4-e4b-it-8bit", 131072],
  ];
  for (const [id, ctx] of contexts) {
    it(`${id} states its context length (${ctx})`, () => {
      expect(card(id).context_length).toBe(ctx);
    });
  }

  it("the two GLM-5 cards live under file names that match their ids", () => {
    for (const id of ["mlx-community/GLM-5-8bit-MXFP8", "mlx-community/GLM-5"]) {
      const entry = BUNDLED_CARDS.find((c) => c.toml.includes(`model_id = "${id}"`));
      expect(entry?.path, id).toBe(`inference/${id.replace("/", "--")}.toml`);
    }
  });
});
