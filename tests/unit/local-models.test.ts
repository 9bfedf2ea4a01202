import { describe, expect, it } from "vitest";
import type { GgufFacts } from "../../src/models/gguf/reader.ts";
import {
  cardFromFacts,
  defaultLocalModelId,
  LLAMA_CPP_BACKENDS,
  LLAMA_SERVER_BACKENDS,
  localCard,
  LocalModelError,
} from "../../src/models/local.ts";
import { cardToWire } from "../../src/models/card.ts";
import { tinyModel } from "../helpers/models.ts";

const facts = (over: Partial<GgufFacts> = {}): GgufFacts => ({
  architecture: "llama",
  name: "Tiny",
  blockCount: 4,
  embeddingLength: 64,
  headCount: 4,
  headCountKv: 2,
  headDim: 16,
  contextLength: 4096,
  fileType: 15,
  fileTypeName: "Q4_K_M",
  hasChatTemplate: true,
  tensorCount: 38,
  parameterCount: 1000,
  tensorBytes: 5000,
  dataOffset: 800,
  fileBytes: 5810,
  ...over,
});

describe("local GGUF cards", () => {
  it.each([
    ["/m/Qwen3-0.6B-Q4_K_M.gguf", "local/Qwen3-0.6B-Q4_K_M"],
    ["/m/my model.GGUF", "local/my-model"],
    ["/m/.gguf", "local/model"],
  ])("names %s %s by default", (path, id) => expect(defaultLocalModelId(path)).toBe(id));

  it.each([
    [{}, {
      tasks: ["TextGeneration"],
      capabilities: ["text"],
      quantization: "Q4_K_M",
      num_key_value_heads: 2,
      storage_size: { in_bytes: 5810 },
    }],
    [{ poolingType: 1 }, { tasks: ["TextEmbedding"], capabilities: ["embedding"] }],
    [{ architecture: "bert", poolingType: undefined }, { tasks: ["TextEmbedding"], family: "bert" }],
    [{ fileBytes: undefined }, { storage_size: { in_bytes: 5800 } }],
    [{ headCountKv: 0, fileTypeName: undefined }, { quantization: "" }],
  ] as [Partial<GgufFacts>, Record<string, unknown>][])("builds the card from facts %#", (over, expected) => {
    const card = cardFromFacts("local/x", "/m/x.gguf", facts(over));
    expect(card).toMatchObject({
      model_id: "local/x",
      gguf_path: "/m/x.gguf",
      gguf_file: "x.gguf",
      n_layers: 4,
      hidden_size: 64,
      is_custom: true,
      supports_tensor: false,
      ...expected,
    });
    expect(card.placement.compatible_backends).toEqual([...LLAMA_CPP_BACKENDS, ...LLAMA_SERVER_BACKENDS]);
    if (over.headCountKv === 0) expect(card.num_key_value_heads).toBeUndefined();
  });

  it("refuses a header with no layers", () => {
    expect(() => cardFromFacts("local/x", "/m/x.gguf", facts({ blockCount: 0 }))).toThrow(
      /0 layers and width 64; not a usable model/,
    );
  });

  it("reads a real file into a card whose wire form carries ggufPath", async () => {
    const path = await tinyModel({ layers: 2, seed: 33 });
    const card = await localCard(path, "test/t");
    expect(card).toMatchObject({
      n_layers: 2,
      hidden_size: 64,
      num_attention_heads: 4,
      head_dim: 16,
      context_length: 4096,
      quantization: "F16",
    });
    expect(cardToWire(card)).toMatchObject({
      modelId: "test/t",
      ggufPath: path,
      storageSize: { inBytes: Deno.statSync(path).size },
    });
  });

  it("refuses a truncated file", async () => {
    const path = await tinyModel({ layers: 2, seed: 33 });
    const cut = `${path}.cut.gguf`;
    try {
      const bytes = Deno.readFileSync(path);
      Deno.writeFileSync(cut, bytes.subarray(0, bytes.length - 4096));
      await expect(localCard(cut)).rejects.toThrow(
        /is truncated: its header describes \d+ bytes, the file has \d+/,
      );
      await expect(localCard("x.gguf")).rejects.toThrow(LocalModelError);
    } finally {
      Deno.removeSync(cut);
    }
  });
});
