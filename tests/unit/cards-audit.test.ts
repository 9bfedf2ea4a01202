import { describe, expect, it } from "vitest";
import { BUNDLED_CARDS } from "../../src/generated/cards.gen.ts";
import { auditSources, isGgufNamed } from "../../src/models/audit.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { servability } from "../../src/placement/capabilities.ts";

const ROOT = new URL("../../model-cards/", import.meta.url).pathname;

function sourceTree(dir = ROOT, prefix = ""): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    if (e.isDirectory) out.push(...sourceTree(`${dir}${e.name}/`, `${prefix}${e.name}/`));
    else if (e.name.endsWith(".toml")) out.push(`${prefix}${e.name}`);
  }
  return out.sort();
}

const report = auditSources(BUNDLED_CARDS);

describe("bundled card audit", () => {
  it("the embedded cards are exactly model-cards/ (run scripts/embed.ts after editing cards)", () => {
    expect(BUNDLED_CARDS.map((c) => c.path).sort()).toEqual(sourceTree());
    for (const { path, toml } of BUNDLED_CARDS) {
      expect(Deno.readTextFileSync(`${ROOT}${path}`), path).toBe(toml);
    }
  });

  it("no model id appears twice", () => {
    expect(report.duplicates).toEqual([]);
  });

  for (const c of report.cards) {
    it(c.path, () => {
      expect(c.problems).toEqual([]);
    });
  }
});

describe("the audit catches bad cards", () => {
  const bad = (path: string, toml: string) => auditSources([{ path, toml }]).cards[0].problems.join("\n");
  const base = `n_layers = 4\nhidden_size = 64\nsupports_tensor = false\nfamily = "x"\n`;
  const table: { name: string; path: string; toml: string; problem: RegExp }[] = [
    { name: "schema", path: "inference/a--b.toml", toml: `model_id = "a/b"\n`, problem: /does not parse/ },
    {
      name: "id vs file name",
      path: "inference/a--c.toml",
      toml:
        `model_id = "a/b"\n${base}tasks = ["TextGeneration"]\nquantization = "4bit"\ncontext_length = 8\nnum_key_value_heads = 1\n`,
      problem: /does not match model_id/,
    },
    {
      name: "KV heads above heads",
      path: "inference/a--b.toml",
      toml:
        `model_id = "a/b"\n${base}tasks = ["TextGeneration"]\nquantization = "4bit"\ncontext_length = 8\nnum_key_value_heads = 8\nnum_attention_heads = 4\n`,
      problem: /exceeds num_attention_heads/,
    },
    {
      name: "a GGUF card missing quantization and context",
      path: "inference/a--b-GGUF.toml",
      toml:
        `model_id = "a/b-GGUF"\n${base}tasks = ["TextGeneration"]\nnum_key_value_heads = 1\ngguf_file = "b.gguf"\n[placement]\ncompatible_backends = ["llama_cpp-cpu"]\n`,
      problem: /context_length must be positive[\s\S]*quantization is empty/,
    },
    {
      name: "GGUF card without its file",
      path: "inference/a--b-GGUF.toml",
      toml:
        `model_id = "a/b-GGUF"\n${base}tasks = ["TextGeneration"]\nquantization = "Q4"\ncontext_length = 8\nnum_key_value_heads = 1\n[placement]\ncompatible_backends = ["llama_cpp-cpu"]\n`,
      problem: /must name its file/,
    },
    {
      name: "unknown tag and preference outside compatible",
      path: "inference/a--b.toml",
      toml:
        `model_id = "a/b"\n${base}tasks = ["TextGeneration"]\nquantization = "4bit"\ncontext_length = 8\nnum_key_value_heads = 1\n[placement]\ncompatible_backends = ["mlx", "tpu-x"]\nbackend_preference = ["mlx-metal"]\n`,
      problem: /unknown backend tag tpu-x[\s\S]*mlx-metal is not in compatible_backends/,
    },
    {
      name: "a [reasoning] section counts as declared thinking (no false alarm)",
      path: "inference/a--b.toml",
      toml:
        `model_id = "a/b"\n${base}tasks = ["TextGeneration"]\nquantization = "4bit"\ncontext_length = 8\nnum_key_value_heads = 1\n[reasoning]\n`,
      problem: /^$/,
    },
    {
      name: "a Qwen3 card that does not declare the thinking it resolves to",
      path: "inference/a--qwen3-8b.toml",
      toml:
        `model_id = "a/qwen3-8b"\n${base}tasks = ["TextGeneration"]\nquantization = "4bit"\ncontext_length = 8\nnum_key_value_heads = 1\n`,
      problem: /resolved supports_thinking=true but the card declares thinking=false/,
    },
  ];
  for (const t of table) {
    it(t.name, () => {
      expect(bad(t.path, t.toml)).toMatch(t.problem);
    });
  }
});

describe("capability resolution over the bundled cards", () => {
  const cards = Catalog.bundled().all();
  it("every text GGUF card without vision is servable by our llama.cpp runner", () => {
    const text = cards.filter((c) =>
      isGgufNamed(c) && c.tasks.includes("TextGeneration") && !c.capabilities.includes("vision")
    );
    expect(text.length).toBeGreaterThan(15);
    for (const c of text) expect(servability(c), c.model_id).toMatchObject({ ok: true });
  });
  it("every MLX-only card is refused with the MLX runner reason", () => {
    const mlx = cards.filter((c) => c.placement.compatible_backends.every((t) => t.startsWith("mlx")));
    expect(mlx.length).toBeGreaterThan(50);
    for (const c of mlx) {
      const s = servability(c);
      expect(s.ok, c.model_id).toBe(false);
    }
  });
  it("a vision GGUF card is servable only when it names its projector", () => {
    const vision = cards.filter((c) => isGgufNamed(c) && c.capabilities.includes("vision"));
    expect(vision.length).toBeGreaterThan(1);
    for (const c of vision) expect(servability(c).ok, c.model_id).toBe(c.mmproj_file !== undefined);
  });
});
