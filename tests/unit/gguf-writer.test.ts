import { gguf as parseGguf } from "@huggingface/gguf";
import { afterAll, describe, expect, it } from "vitest";
import { resolveTinyOptions, tinyLlama } from "../../src/dev/gguf/tiny.ts";
import { readVocab, resolveVocab, vocabDirs, VocabNotFound } from "../../src/dev/gguf/vocab.ts";
import {
  encodeGgufHeader,
  GgmlType,
  gguf,
  type GgufMetadata,
  GgufType,
  tensorByteSize,
  writeGguf,
} from "../../src/dev/gguf/writer.ts";
import { tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";
import { resolveConfig } from "../../src/config/load.ts";

/** Where this machine keeps llama.cpp's vocab files (its engine cache), as the program resolves it. */
const host = resolveConfig({ flags: {}, env: Deno.env.toObject() }).config;

const dir = tempDir("gguf-writer-");
afterAll(() => Deno.removeSync(dir, { recursive: true }));

const read = (path: string) => parseGguf(path, { allowLocalFile: true, typedMetadata: true });

describe("GGUF writer", () => {
  it("writes every value type so that @huggingface/gguf reads the same values back", async () => {
    const metadata: GgufMetadata = {
      "general.architecture": gguf.str("llama"),
      "general.alignment": gguf.u32(64),
      "t.u8": { type: GgufType.UINT8, value: 250 },
      "t.i8": { type: GgufType.INT8, value: -7 },
      "t.u16": { type: GgufType.UINT16, value: 65000 },
      "t.i16": { type: GgufType.INT16, value: -30000 },
      "t.u32": gguf.u32(4_000_000_000),
      "t.i32": gguf.i32(-2_000_000_000),
      "t.f32": gguf.f32(0.5),
      "t.f64": { type: GgufType.FLOAT64, value: Math.PI },
      "t.u64": { type: GgufType.UINT64, value: 2n ** 40n + 3n },
      "t.i64": { type: GgufType.INT64, value: -(2n ** 40n) },
      "t.bool": gguf.bool(true),
      "t.unicode": gguf.str("añ▁日本"),
      "t.strings": gguf.strings(["a", "", "ß"]),
      "t.f32s": { type: GgufType.ARRAY, subType: GgufType.FLOAT32, value: [1.5, -2, 0] },
    };
    const a = new Float32Array([1, 2, 3]);
    const b = new Uint8Array(new Float16Array([0.5, -1, 2, 4, 8, 16]).buffer);
    const path = `${dir}/types.gguf`;
    const size = await writeGguf(path, metadata, [
      { name: "a", dims: [3], type: GgmlType.F32, data: new Uint8Array(a.buffer) },
      { name: "b", dims: [3, 2], type: GgmlType.F16, data: b },
    ]);
    expect(Deno.statSync(path).size).toBe(size);
    const r = await read(path);
    for (const [k, e] of Object.entries(metadata)) {
      expect(r.typedMetadata[k as keyof typeof r.typedMetadata]).toMatchObject({
        type: e.type,
        value: e.value,
      });
    }
    expect(Number(r.metadata.tensor_count)).toBe(2);
    expect(r.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype, Number(t.offset)])).toEqual([
      ["a", [3], GgmlType.F32, 0],
      ["b", [3, 2], GgmlType.F16, 64], // 12 bytes of "a", padded to the 64-byte alignment
    ]);
    // The bytes sit where header size + offset says.
    const bytes = Deno.readFileSync(path);
    expect(r.tensorDataOffset % 64n).toBe(0n);
    const at = Number(r.tensorDataOffset) + 64;
    expect([...bytes.subarray(at, at + b.length)]).toEqual([...b]);
    expect(new Float32Array(bytes.slice(Number(r.tensorDataOffset), Number(r.tensorDataOffset) + 12).buffer))
      .toEqual(a);
  });

  it("rejects data whose size does not match the shape, and leaves no file behind", async () => {
    const path = `${dir}/bad.gguf`;
    await expect(writeGguf(path, {}, [{ name: "x", dims: [4], type: GgmlType.F32, data: new Uint8Array(8) }]))
      .rejects.toThrow(/x: 8 bytes of data, its shape needs 16/);
    expect(() => Deno.statSync(path)).toThrow();
    expect([...Deno.readDirSync(dir)].filter((e) => e.name.includes("partial"))).toEqual([]);
  });

  it.each([
    [{ "general.alignment": gguf.u32(12) }, /alignment must be a positive multiple of 8/],
    [{ "k": { type: GgufType.ARRAY, value: [1] } }, /k: arrays need an array value and a subType/],
    [{ "k": { type: GgufType.STRING, value: 3 } }, /k: expected a string/],
    [{ "k": { type: GgufType.UINT32, value: "3" } }, /k: expected a number/],
  ] as [GgufMetadata, RegExp][])("refuses bad metadata %#", (metadata, message) => {
    expect(() => encodeGgufHeader(metadata, [])).toThrow(message);
  });

  it("sizes tensors from their shape and type", () => {
    expect(tensorByteSize({ dims: [64, 32000], type: GgmlType.F16 })).toBe(64 * 32000 * 2);
    expect(tensorByteSize({ dims: [7], type: GgmlType.F32 })).toBe(28);
  });
});

describe("tiny llama", () => {
  it("finds the vocab in the engine source cache, or says to build the engine", () => {
    expect(resolveVocab("llama-spm", host)).toMatch(/ggml-vocab-llama-spm\.gguf$/);
    const empty = tempDir("vocab-");
    try {
      const settings = (env: Record<string, string>) => resolveConfig({ flags: {}, env }).config;
      expect(vocabDirs(settings({ SKULK_CACHE_DIR: empty }))).toEqual([]);
      expect(() => resolveVocab("llama-spm", settings({ SKULK_CACHE_DIR: empty }))).toThrow(VocabNotFound);
      expect(() => resolveVocab("llama-spm", { ...host, vocabDir: empty })).toThrow(
        /run scripts\/build-engine first/,
      );
    } finally {
      Deno.removeSync(empty, { recursive: true });
    }
  });

  it("is deterministic by seed and tensor-complete for the llama architecture", async () => {
    const vocab = await readVocab(resolveVocab("llama-spm", host));
    const a = tinyLlama(vocab, { seed: 3 });
    const b = tinyLlama(vocab, { seed: 3 });
    const c = tinyLlama(vocab, { seed: 4 });
    const q = (m: ReturnType<typeof tinyLlama>) =>
      m.tensors.find((t) => t.name === "blk.0.attn_q.weight")!.data;
    expect(q(a)).toEqual(q(b));
    expect(q(a)).not.toEqual(q(c));
    const names = a.tensors.map((t) => t.name);
    expect(names.filter((n) => n.startsWith("blk.0."))).toHaveLength(9);
    expect(names.filter((n) => n.startsWith("blk.")).length).toBe(4 * 9);
    const nVocab = (vocab["tokenizer.ggml.tokens"].value as string[]).length;
    expect(a.tensors.find((t) => t.name === "token_embd.weight")!.dims).toEqual([64, nVocab]);
    expect(a.tensors.find((t) => t.name === "blk.1.attn_k.weight")!.dims).toEqual([64, 32]); // 2 KV heads of 16
    expect(a.metadata["tokenizer.chat_template"].value).toContain("<|im_start|>");
    // Tools are declared (llama-server detects the Hermes/Qwen <tool_call> format from the template) and no
    // space prefix breaks the grammar's replay of the generation prompt.
    expect(a.metadata["tokenizer.chat_template"].value).toContain("<tool_call>");
    expect(a.metadata["tokenizer.chat_template"].value).toContain("{%- if tools %}");
    expect(a.metadata["tokenizer.ggml.add_space_prefix"].value).toBe(false);
    // End-of-text and other non-normal tokens get zero output rows, so they never win greedy decoding.
    const embd = new Float16Array(a.tensors[0].data.slice().buffer);
    const eos = Number(vocab["tokenizer.ggml.eos_token_id"].value);
    expect([...embd.subarray(eos * 64, eos * 64 + 64)].every((x) => x === 0)).toBe(true);
    expect([...embd.subarray(1000 * 64, 1000 * 64 + 64)].some((x) => x !== 0)).toBe(true);
  });

  it("writes a reasoning model's template when asked: the reply opens <think>, earlier reasoning is rendered", async () => {
    const vocab = await readVocab(resolveVocab("llama-spm", host));
    const plain = String(tinyLlama(vocab, {}).metadata["tokenizer.chat_template"].value);
    const thinking = String(tinyLlama(vocab, { thinking: true }).metadata["tokenizer.chat_template"].value);
    expect(plain).not.toContain("<think>");
    expect(thinking).toContain("{{- '<|im_start|>assistant\\n<think>\\n' }}");
    // llama.cpp learns the reasoning markers from how a template renders reasoning_content.
    expect(thinking).toContain("'<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n'");
    expect(thinking).toContain("<tool_call>");
  });

  it.each([
    [{ width: 60, heads: 8 }, /width 60 must be a multiple of heads 8/],
    [{ heads: 4, kvHeads: 3 }, /heads 4 must be a multiple of kvHeads 3/],
    [{ layers: 0 }, /layers must be a positive integer/],
    [{ width: 12, heads: 4 }, /head size 3 must be even/],
  ])("refuses inconsistent shapes %#", (opts, message) => {
    expect(() => resolveTinyOptions(opts)).toThrow(message);
  });

  it("writes a file whose header the reader understands, cached by options", async () => {
    const path = await tinyModel({ layers: 2, seed: 9 });
    const r = await read(path);
    expect(r.typedMetadata["general.architecture"]?.value).toBe("llama");
    expect(r.typedMetadata["llama.block_count" as keyof typeof r.typedMetadata]).toMatchObject({ value: 2 });
    expect(r.typedMetadata["general.alignment" as keyof typeof r.typedMetadata]).toMatchObject({ value: 32 });
    expect(r.tensorInfos.every((t) => Number(t.offset) % 32 === 0)).toBe(true);
    expect(r.tensorInfos).toHaveLength(2 * 9 + 2);
    const mtime = Deno.statSync(path).mtime;
    expect(await tinyModel({ layers: 2, seed: 9 })).toBe(path);
    expect(Deno.statSync(path).mtime).toEqual(mtime);
    expect(await tinyModel({ layers: 2, seed: 10 })).not.toBe(path);
  });
});
