/**
 * Speculative decoding, pure parts: cards' `served_spec_*` fields and the n-gram setting become llama-server
 * flags (every bundled card with them checked), refusals for cards that cannot work, acceptance read from the
 * engine's counters and timings, draft files chosen for download and held to the model's folder.
 */
import { describe, expect, it } from "vitest";
import { llamaServerArgs } from "../../src/engines/llama-server.ts";
import {
  parseSpeculationMetrics,
  speculationArgs,
  SpeculationError,
  speculationFor,
  withAcceptance,
} from "../../src/engines/speculation.ts";
import { type ModelCard, ModelCardSchema } from "../../src/models/card.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { filesForCard } from "../../src/models/hub.ts";
import { localCard, LocalModelError } from "../../src/models/local.ts";
import { modelPathRefusal } from "../../src/placement/shard-check.ts";
import { tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";

const card = (runtime: ModelCard["runtime"], id = "org/model-GGUF"): ModelCard =>
  ModelCardSchema.parse({
    model_id: id,
    n_layers: 4,
    hidden_size: 64,
    supports_tensor: false,
    tasks: ["TextGeneration"],
    gguf_file: "model.gguf",
    ...(runtime ? { runtime } : {}),
  });
const single = { ngram: "off" as const, pooled: false };

describe("speculation from a card", () => {
  it("maps every bundled card's served_spec_type to llama-server's --spec-type", () => {
    const spec = Catalog.bundled().all().filter((c) => c.runtime?.served_spec_type);
    expect(spec.length).toBeGreaterThanOrEqual(7);
    for (const c of spec) {
      const s = speculationFor(c, single)!;
      expect(s.type).toBe(c.runtime!.served_spec_type!.replace("_", "-"));
      expect(s.nMax).toBe(c.runtime!.served_spec_n_max ?? null);
      expect(s.draft?.file).toBe(c.runtime!.served_spec_draft_file);
    }
  });

  it("names the gemma drafter as a companion repo and Laguna's as its own", () => {
    const cat = Catalog.bundled();
    const gemma = speculationFor(cat.get("google/gemma-4-31B-it-qat-q4_0-gguf")!, single)!;
    expect(gemma).toEqual({
      type: "draft-mtp",
      nMax: 4,
      source: "card",
      draft: {
        repo: "FoxlightAI/gemma-4-31B-it-qat-mtp-draft-GGUF",
        file: "gemma-4-31B-it-qat-q4_0-unquantized-assistant-Q8_0.gguf",
      },
    });
    const laguna = speculationFor(cat.get("poolside/Laguna-S-2.1-GGUF")!, single)!;
    expect(laguna.type).toBe("draft-dflash");
    expect(laguna.draft?.repo).toBe("poolside/Laguna-S-2.1-GGUF");
    expect(speculationArgs(gemma, "/m/d.gguf")).toEqual([
      "--spec-type",
      "draft-mtp",
      "--spec-draft-n-max",
      "4",
      "--spec-draft-model",
      "/m/d.gguf",
    ]);
  });

  it("a card's MTP wins over the n-gram setting; the setting serves cards without one", () => {
    const mtp = card({ served_spec_type: "draft_mtp", served_spec_n_max: 3 });
    expect(speculationFor(mtp, { ngram: "ngram-mod", pooled: false })?.type).toBe("draft-mtp");
    expect(speculationFor(card(undefined), { ngram: "ngram-mod", pooled: false })).toEqual({
      type: "ngram-mod",
      nMax: null,
      draft: null,
      source: "setting",
    });
    expect(speculationFor(card(undefined), single)).toBeNull();
  });

  it("a pool speculates only when the card allows it across nodes", () => {
    const mtp = card({ served_spec_type: "draft_mtp" });
    expect(speculationFor(mtp, { ngram: "ngram-mod", pooled: true })).toBeNull();
    const multi = card({ served_spec_type: "draft_mtp", speculative_multi_node: true });
    expect(speculationFor(multi, { ngram: "off", pooled: true })?.type).toBe("draft-mtp");
  });

  it.each([
    [{ served_spec_type: "draft_turbo" }, /not one of draft_mtp/],
    [{ served_spec_type: "draft_simple" }, /needs served_spec_draft_repo and served_spec_draft_file/],
    [{ served_spec_draft_repo: "a/b", served_spec_draft_file: "d.gguf" }, /no served_spec_type/],
    [{ served_spec_type: "draft_mtp", served_spec_n_max: 0 }, /served_spec_n_max must be 1-64/],
    [
      { served_spec_type: "draft_simple", served_spec_draft_file: "../../etc/x.gguf" },
      /not a valid hub name/,
    ],
    [
      { served_spec_type: "draft_simple", served_spec_draft_repo: "../x", served_spec_draft_file: "d.gguf" },
      /not a valid hub name/,
    ],
    [{ served_spec_type: "draft_simple", served_spec_draft_file: "d.safetensors" }, /not a GGUF file/],
  ])("refuses %j", (runtime, message) => {
    expect(() => speculationFor(card(runtime), single)).toThrow(SpeculationError);
    expect(() => speculationFor(card(runtime), single)).toThrow(message);
  });

  it("puts the flags and --metrics on llama-server's command line", () => {
    const spec = speculationFor(
      card({ served_spec_type: "draft_simple", served_spec_draft_file: "d.gguf" }),
      single,
    )!;
    const args = llamaServerArgs({
      bin: "llama-server",
      model: "/m/model.gguf",
      port: 1,
      contextTokens: 512,
      speculation: { spec, draftPath: "/m/d.gguf" },
    });
    expect(args.join(" ")).toContain("--spec-type draft-simple --spec-draft-model /m/d.gguf --metrics");
    expect(llamaServerArgs({ bin: "b", model: "m", port: 1, contextTokens: 1 })).not.toContain("--spec-type");
  });
});

describe("acceptance", () => {
  it("reads llama-server's speculative counters", () => {
    const text = [
      "# TYPE llamacpp:spec_decode_num_draft_tokens_total counter",
      "llamacpp:spec_decode_num_draft_tokens_total 31",
      "llamacpp:spec_decode_num_accepted_tokens_total 29",
      "llamacpp:spec_decode_num_drafts_total 8",
      'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 8',
    ].join("\n");
    expect(parseSpeculationMetrics(text)).toEqual({ draftTokens: 31, acceptedTokens: 29, drafts: 8 });
    expect(parseSpeculationMetrics("llamacpp:prompt_tokens_total 4")).toBeNull();
  });

  it("reports a request's drafts as OpenAI's accepted/rejected prediction tokens", () => {
    const usage = {
      prompt_tokens: 3,
      completion_tokens: 40,
      completion_tokens_details: { reasoning_tokens: 0 },
    };
    expect(withAcceptance(usage, { draft_n: 31, draft_n_accepted: 29 })).toEqual({
      ...usage,
      completion_tokens_details: {
        reasoning_tokens: 0,
        accepted_prediction_tokens: 29,
        rejected_prediction_tokens: 2,
      },
    });
    expect(withAcceptance(usage, { predicted_n: 40 })).toBe(usage);
    expect(withAcceptance(null, { draft_n: 1, draft_n_accepted: 1 })).toBeNull();
  });
});

describe("draft files", () => {
  const listing = [
    { path: "model.gguf", size: 10, sha256: null },
    { path: "draft.gguf", size: 2, sha256: null },
    { path: "other.gguf", size: 3, sha256: null },
  ];

  it("downloads a drafter kept in the model's own repo with it, and not one from another repo", () => {
    const own = card({ served_spec_type: "draft_dflash", served_spec_draft_file: "draft.gguf" });
    expect(filesForCard(own, listing).map((f) => f.path)).toEqual(["model.gguf", "draft.gguf"]);
    const other = card({
      served_spec_type: "draft_simple",
      served_spec_draft_repo: "org/draft-GGUF",
      served_spec_draft_file: "draft.gguf",
    });
    expect(filesForCard(other, listing).map((f) => f.path)).toEqual(["model.gguf"]);
    const missing = card({ served_spec_type: "draft_dflash", served_spec_draft_file: "gone.gguf" });
    expect(() => filesForCard(missing, listing)).toThrow(/no gone.gguf \(the card's draft model\)/);
  });

  it("holds a drafter to the model's folder, and a local model's to the one registered", () => {
    const hub = card({ served_spec_type: "draft_dflash", served_spec_draft_file: "sub/draft.gguf" });
    expect(modelPathRefusal(hub, undefined, "/data/models")).toBeNull();
    const registered = {
      ...card({ served_spec_type: "draft_simple", served_spec_draft_file: "d.gguf" }),
      gguf_path: "/m/model.gguf",
    };
    expect(modelPathRefusal(registered, registered, "/data/models")).toBeNull();
    const forged = {
      ...registered,
      runtime: { served_spec_type: "draft_simple", served_spec_draft_file: "e.gguf" },
    };
    expect(modelPathRefusal(forged, registered, "/data/models")).toMatch(/draft model 'e.gguf'/);
  });

  it("registers a local model with a drafter beside it, and refuses one elsewhere", async () => {
    const dir = tempDir("spec-local-");
    await Deno.copyFile(await tinyModel(), `${dir}/model.gguf`);
    await Deno.copyFile(await tinyModel({ seed: 2 }), `${dir}/draft.gguf`);
    const c = await localCard(`${dir}/model.gguf`, "local/spec", `${dir}/draft.gguf`);
    expect(c.runtime).toEqual({ served_spec_type: "draft_simple", served_spec_draft_file: "draft.gguf" });
    const bytes = Deno.statSync(`${dir}/model.gguf`).size + Deno.statSync(`${dir}/draft.gguf`).size;
    expect(c.storage_size?.in_bytes).toBe(bytes);
    const elsewhere = tempDir("spec-elsewhere-");
    await Deno.copyFile(await tinyModel(), `${elsewhere}/draft.gguf`);
    await expect(localCard(`${dir}/model.gguf`, "local/spec", `${elsewhere}/draft.gguf`)).rejects.toThrow(
      LocalModelError,
    );
    await expect(localCard(`${dir}/model.gguf`, "local/spec", "draft.gguf")).rejects.toThrow(
      /draft_path must be an absolute path/,
    );
  });
});
