/**
 * The validators of untrusted names (model ids, repo file paths) over tables of bad and good inputs, and
 * resolveInside over a real directory tree with symbolic links.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveInside, strictlyInside } from "../../src/security/contain.ts";
import {
  checkModelId,
  checkRepoPath,
  modelIdProblem,
  repoPathProblem,
  UntrustedInputError,
} from "../../src/security/ids.ts";
import { ModelCardSchema } from "../../src/models/card.ts";
import { loadBundledCards } from "../../src/models/catalog.ts";
import { defaultLocalModelId } from "../../src/models/local.ts";
import { tempDir } from "../helpers/daemon.ts";

describe("model ids", () => {
  const bad: [string, RegExp][] = [
    ["", /empty/],
    [".", /'\.' or '\.\.' part/],
    ["..", /'\.' or '\.\.' part/],
    ["org/..", /'\.' or '\.\.' part/],
    ["../org", /'\.' or '\.\.' part/],
    ["org/./name", /'\.' or '\.\.' part/],
    ["a\0b", /NUL or control/],
    ["org/na\nme", /NUL or control/],
    ["org\\name", /backslash/],
    ["/etc/passwd", /absolute path/],
    ["org//name", /empty part/],
    ["org/", /empty part/],
    ["org/name/extra", /more than one '\/'/],
    ["a".repeat(8000), /8000 characters long/],
    [`org/${"n".repeat(97)}`, /part of 97 characters/],
    ["org/na..me", /contains '\.\.'/],
    ["org--x/name", /contains '--'/],
    ["org/name.git", /ends with '\.git'/],
    ["org/-name", /may use only/],
    ["org/name.", /may use only/],
    ["org/has space", /may use only/],
    ["org/naïve", /may use only/],
    ["org/a%2Fb", /may use only/],
  ];
  it.each(bad)("refuses %j", (id, why) => {
    expect(modelIdProblem(id)).toMatch(why);
    expect(() => checkModelId(id)).toThrow(UntrustedInputError);
  });

  const good = [
    "unsloth/Llama-3.2-1B-Instruct-GGUF",
    "mlx-community/Qwen3-TTS-12Hz-0.6B-Base-4bit",
    "csukuangfj/vits-piper-en_US-amy-medium",
    "gpt2",
    "local/my-model",
    "_org/_n",
    `${"o".repeat(96)}/${"n".repeat(96)}`,
  ];
  it.each(good)("accepts %j", (id) => {
    expect(modelIdProblem(id)).toBeNull();
    expect(checkModelId(id)).toBe(id);
  });

  it("accepts every bundled card's id and files", () => {
    const { cards, errors } = loadBundledCards();
    expect(errors).toEqual([]);
    expect(cards.length).toBeGreaterThan(100);
    for (const c of cards) {
      expect(modelIdProblem(c.model_id), c.model_id).toBeNull();
      if (c.gguf_file) expect(repoPathProblem(c.gguf_file), c.gguf_file).toBeNull();
    }
  });

  it("is enforced on cards from requests and peers", () => {
    const card = { ...loadBundledCards().cards[0] };
    expect(ModelCardSchema.safeParse({ ...card, model_id: "../x" }).success).toBe(false);
    expect(ModelCardSchema.safeParse({ ...card, gguf_file: "../../x.gguf" }).success).toBe(false);
    expect(ModelCardSchema.safeParse({ ...card, mmproj_file: "../../x.gguf" }).success).toBe(false);
    expect(ModelCardSchema.safeParse({ ...card, mmproj_file: "/a\0b" }).success).toBe(false);
    // An absolute projector is a registered local model's, like gguf_path: the schema lets it through, and a
    // request cannot name one (POST /download/start refuses it, containment.test.ts) nor a forged event make an
    // engine open one this node did not register (modelPathRefusal, engines-units.test.ts).
    expect(ModelCardSchema.safeParse({ ...card, mmproj_file: "/models/mmproj.gguf" }).success).toBe(true);
    expect(ModelCardSchema.safeParse(card).success).toBe(true);
  });

  it("makes local ids that pass from any file name", () => {
    for (
      const name of [
        "my model.gguf",
        "a--b..c.gguf",
        "-x-.gguf",
        "ü.gguf",
        "x.git.gguf",
        `${"z".repeat(300)}.gguf`,
      ]
    ) {
      const id = defaultLocalModelId(`/m/${name}`);
      expect(modelIdProblem(id), `${name} -> ${id}`).toBeNull();
    }
  });
});

describe("repo file paths", () => {
  const bad: [string, RegExp][] = [
    ["", /empty/],
    ["../../../x", /'\.' or '\.\.' part/],
    ["onnx/../../x", /'\.' or '\.\.' part/],
    ["./model.gguf", /'\.' or '\.\.' part/],
    ["/etc/shadow", /absolute path/],
    ["a\0b", /NUL or control/],
    ["a\x7fb", /NUL or control/],
    ["onnx\\..\\x", /backslash/],
    ["onnx//model.onnx", /empty part/],
    ["onnx/", /empty part/],
    [".skulk/manifest.json", /\.skulk\//],
    [".skulk", /\.skulk\//],
    [`${"a".repeat(256)}.gguf`, /longer than 255 bytes/],
    [Array(300).fill("abcd").join("/"), /bytes long/],
  ];
  it.each(bad)("refuses %j", (path, why) => {
    expect(repoPathProblem(path)).toMatch(why);
    expect(() => checkRepoPath(path)).toThrow(UntrustedInputError);
  });

  const good = [
    "model.gguf",
    "onnx/model.onnx",
    "espeak-ng-data/lang/gmw/en-US",
    "a b.gguf",
    ".gitattributes",
    "x..y",
  ];
  it.each(good)("accepts %j", (path) => {
    expect(repoPathProblem(path)).toBeNull();
  });
});

describe("resolveInside", () => {
  let root: string;
  let models: string;
  beforeAll(() => {
    root = tempDir("contain-");
    models = `${root}/models`;
    Deno.mkdirSync(`${models}/org--name/sub`, { recursive: true });
    Deno.mkdirSync(`${root}/outside`);
    Deno.symlinkSync(`${root}/outside`, `${models}/org--out`);
    Deno.symlinkSync(`${models}/org--name`, `${models}/org--alias`);
    Deno.symlinkSync(models, `${root}/models-link`);
  });
  afterAll(() => Deno.removeSync(root, { recursive: true }));

  it("accepts paths strictly inside, existing or not", async () => {
    expect(await resolveInside(models, "org--name")).toBe(`${models}/org--name`);
    expect(await resolveInside(models, "org--name/sub/new.gguf")).toBe(`${models}/org--name/sub/new.gguf`);
    expect(await resolveInside(models, "org--new/a/b")).toBe(`${models}/org--new/a/b`);
    // A link that stays inside, and a root that is itself a link, are fine.
    expect(await resolveInside(models, "org--alias/x")).toBe(`${models}/org--alias/x`);
    expect(await resolveInside(`${root}/models-link`, "org--name")).toBe(`${root}/models-link/org--name`);
    // No root yet: nothing below it exists.
    expect(await resolveInside(`${root}/absent`, "a/b")).toBe(`${root}/absent/a/b`);
  });

  const refused: [string, RegExp][] = [
    ["", /does not name something inside/],
    [".", /does not name something inside/],
    ["..", /does not name something inside/],
    ["org--name/../..", /does not name something inside/],
    ["../models-evil", /does not name something inside/],
    ["/etc", /absolute path/],
    ["a\0b", /NUL/],
    ["org--out", /leads outside/],
    ["org--out/new-file", /leads outside/],
  ];
  it.each(refused)("refuses %j", async (rel, why) => {
    await expect(resolveInside(models, rel)).rejects.toThrow(why);
    await expect(resolveInside(models, rel)).rejects.toBeInstanceOf(UntrustedInputError);
  });

  it("says strictly inside, never the root itself or a sibling with the same prefix", () => {
    expect(strictlyInside("/a/models", "/a/models/x")).toBe(true);
    expect(strictlyInside("/a/models", "/a/models")).toBe(false);
    expect(strictlyInside("/a/models", "/a/models-evil/x")).toBe(false);
    expect(strictlyInside("/a/models", "/a")).toBe(false);
    expect(strictlyInside("/a/models", "/a/models/..x")).toBe(true);
  });
});
