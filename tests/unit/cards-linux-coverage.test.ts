/**
 * The catalogue for Linux users (issue #17 item 5): every model family bundled as MLX only has a GGUF card,
 * or model-cards/linux-coverage.json says why not; and docs/models.md states the counts the cards give.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { isGgufNamed } from "../../src/models/audit.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { servability } from "../../src/placement/capabilities.ts";

const Coverage = z.object({
  about: z.string(),
  families: z.array(
    z.object({
      family: z.string().min(1),
      mlx: z.array(z.string()).min(1),
      gguf: z.array(z.string()).min(1).optional(),
      evidence: z.array(z.string().min(10)).min(1).optional(),
      no_gguf_card: z.string().min(40).optional(),
    }).strict(),
  ),
}).strict();

const ROOT = new URL("../../", import.meta.url).pathname;
const coverage = Coverage.parse(JSON.parse(Deno.readTextFileSync(`${ROOT}model-cards/linux-coverage.json`)));
const cards = Catalog.bundled().all();
const inference = cards.filter((c) => c.tasks.includes("TextGeneration"));
const mlxOnly = inference.filter((c) => c.placement.compatible_backends.every((t) => t.startsWith("mlx")));

describe("Linux coverage of the MLX-only families", () => {
  it("every MLX-only inference card belongs to exactly one family, and every listed id is such a card", () => {
    const listed = coverage.families.flatMap((f) => f.mlx);
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort()).toEqual(mlxOnly.map((c) => c.model_id).sort());
  });

  for (const f of coverage.families) {
    it(`${f.family}: a GGUF card llama.cpp serves, or the documented reason there is none`, () => {
      // Exactly one of the two answers.
      expect(f.gguf === undefined, "gguf and no_gguf_card are exclusive").toBe(f.no_gguf_card !== undefined);
      if (f.gguf === undefined) return;
      expect(f.evidence, "a GGUF family names where its repo was seen").toBeDefined();
      const runnable = f.gguf.filter((id) => {
        const card = cards.find((c) => c.model_id === id);
        expect(card, `${id} is a bundled card`).toBeDefined();
        expect(isGgufNamed(card!), `${id} is a GGUF card`).toBe(true);
        return servability(card!).ok;
      });
      expect(runnable.length, `${f.family} has a GGUF card our llama.cpp runner serves`).toBeGreaterThan(0);
    });
  }

  it("docs/models.md states the counts the bundled cards give", () => {
    const runnable = inference.filter((c) => servability(c).ok).length;
    const families = coverage.families.length;
    const covered = coverage.families.filter((f) => f.gguf).length;
    const docs = Deno.readTextFileSync(`${ROOT}docs/models.md`);
    // Each row: | what | before | now |; "now" must be what the cards give.
    const now = (label: string) =>
      docs.match(new RegExp(`^\\| ${label} \\| [^|]+ \\| ([^|]+) \\|$`, "m"))?.[1];
    expect(now("all cards")).toBe(`${cards.length}`);
    expect(now("inference cards")).toBe(`${inference.length}`);
    expect(now("MLX-only inference cards")).toBe(`${mlxOnly.length}`);
    expect(now("inference cards llama.cpp serves \\(runnable on Linux\\)")).toBe(`${runnable}`);
    expect(now("MLX-only families with a GGUF card")).toBe(`${covered} of ${families}`);
  });
});
