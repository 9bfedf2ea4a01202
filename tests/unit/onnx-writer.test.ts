/**
 * The ONNX writer and reader (protobuf wire format, ModelProto) and the tiny Piper voice built with them:
 * what is written decodes to the same graph, weights and metadata, byte layouts match the protobuf spec.
 */
import { afterAll, describe, expect, it } from "vitest";
import { encodeOnnx } from "../../src/dev/onnx/encode.ts";
import { ProtoWriter } from "../../src/dev/onnx/proto-writer.ts";
import { decodeOnnx, type OnnxModel, readOnnxMetadata } from "../../src/models/onnx/model.ts";
import { intsOf, ProtoError, readFields, signed } from "../../src/models/onnx/protobuf.ts";
import {
  PIPER_SYMBOLS,
  piperTokensTxt,
  tinyPiper,
  tinyPiperConfig,
  writeTinyPiper,
} from "../../src/dev/piper/tiny.ts";
import { tempDir } from "../helpers/daemon.ts";

const dir = tempDir("onnx-writer-");
afterAll(() => Deno.removeSync(dir, { recursive: true }));

describe("protobuf wire format", () => {
  it("writes varints, negative int64s, floats and strings as the spec lays them out", () => {
    const bytes = new ProtoWriter().int(1, 150).int(2, -1).float(3, 1.5).string(4, "hi").finish();
    expect([...bytes]).toEqual([
      0x08,
      0x96,
      0x01, // field 1 varint 150 (the spec's own example)
      0x10,
      ...Array(9).fill(0xff),
      0x01, // field 2: -1 as ten bytes of two's complement
      0x1d,
      0x00,
      0x00,
      0xc0,
      0x3f, // field 3 fixed32 1.5
      0x22,
      0x02,
      0x68,
      0x69, // field 4 "hi"
    ]);
    const fields = readFields(bytes);
    expect(fields.map((f) => f.field)).toEqual([1, 2, 3, 4]);
    expect(Number(fields[0].varint)).toBe(150);
    expect(signed(fields[1].varint!)).toBe(-1);
  });

  it("reads packed and unpacked repeated integers alike", () => {
    const packed = readFields(new ProtoWriter().packedInts(1, [3, 270, -2]).finish());
    const unpacked = readFields(new ProtoWriter().int(1, 3).int(1, 270).int(1, -2).finish());
    expect(intsOf(packed, 1)).toEqual([3, 270, -2]);
    expect(intsOf(unpacked, 1)).toEqual([3, 270, -2]);
  });

  it.each([
    ["a truncated length", [0x0a, 0x05, 0x01]],
    ["a varint that never ends", [0x08, 0xff, 0xff]],
    ["field number 0", [0x00, 0x01]],
    ["wire type 3 (groups)", [0x0b]],
  ])("refuses %s", (_, bytes) => {
    expect(() => readFields(Uint8Array.from(bytes))).toThrow(ProtoError);
  });
});

describe("ONNX models", () => {
  it("decodes what it encodes: graph, initializers, attributes, metadata", () => {
    const model: OnnxModel = {
      irVersion: 8,
      opset: 13,
      producer: "test",
      graph: {
        name: "g",
        nodes: [
          { opType: "MatMul", inputs: ["a", "w"], outputs: ["m"], name: "mm" },
          {
            opType: "Cast",
            inputs: ["m"],
            outputs: ["c"],
            name: "cast",
            attributes: [{ name: "to", int: 7 }, { name: "axes", ints: [0, -1] }, {
              name: "alpha",
              float: 0.25,
            }],
          },
        ],
        inputs: [{ name: "a", elemType: "float", shape: [1, "N"] }],
        outputs: [{ name: "c", elemType: "int64", shape: ["N"] }],
        initializers: [
          { name: "w", dims: [2, 3], data: Float32Array.from([1, -2, 3.5, 0, 1e-3, 7]) },
          { name: "k", dims: [], data: BigInt64Array.from([-5n]) },
        ],
      },
      metadata: { sample_rate: "22050", comment: "piper — ünïcode" },
    };
    const back = decodeOnnx(encodeOnnx(model));
    expect(back).toEqual(model);
    Deno.writeFileSync(`${dir}/g.onnx`, encodeOnnx(model));
    expect(readOnnxMetadata(`${dir}/g.onnx`)).toEqual(model.metadata);
  });

  it("starts with ir_version, as every ONNX file does", () => {
    const bytes = encodeOnnx(tinyPiper());
    expect([...bytes.subarray(0, 2)]).toEqual([0x08, 0x08]);
  });

  it("says a file without a graph is not a model", () => {
    expect(() => decodeOnnx(new ProtoWriter().int(1, 8).finish())).toThrow(/not an ONNX model/);
  });

  it("reads the metadata of a file without decoding its weights, and refuses what is not ONNX", () => {
    Deno.writeFileSync(`${dir}/voice.onnx`, encodeOnnx(tinyPiper({ speakers: 2 })));
    expect(readOnnxMetadata(`${dir}/voice.onnx`)).toMatchObject({ n_speakers: "2", sample_rate: "22050" });
    Deno.writeTextFileSync(`${dir}/text.onnx`, "this is text, not a model\n");
    expect(() => readOnnxMetadata(`${dir}/text.onnx`)).toThrow(/not an ONNX file|runs past the end/);
  });
});

describe("the tiny Piper voice", () => {
  it("carries the metadata and inputs sherpa-onnx's Piper loader reads", () => {
    const m = decodeOnnx(encodeOnnx(tinyPiper({ sampleRate: 16000 })));
    expect(m.metadata).toMatchObject({
      model_type: "vits",
      comment: "piper",
      n_speakers: "1",
      sample_rate: "16000",
      language: "English",
      voice: "en-us",
    });
    expect(m.graph.inputs.map((i) => [i.name, i.elemType])).toEqual([
      ["x", "int64"],
      ["x_length", "int64"],
      ["scales", "float"],
    ]);
    expect(m.graph.outputs).toEqual([{ name: "y", elemType: "float", shape: [1, 1, "T"] }]);
    expect(m.graph.initializers.find((t) => t.name === "emb.weight")!.dims).toEqual([
      PIPER_SYMBOLS.length,
      32,
    ]);
  });

  it("takes a speaker id when it has several speakers", () => {
    const m = tinyPiper({ speakers: 4 });
    expect(m.graph.inputs.map((i) => i.name)).toEqual(["x", "x_length", "scales", "sid"]);
    expect(m.metadata.n_speakers).toBe("4");
    expect(Object.keys(tinyPiperConfig({ speakers: 4 }).speaker_id_map as object)).toHaveLength(4);
  });

  it("is a well-formed graph: every node reads a graph input, a weight or an earlier node's output", () => {
    for (const speakers of [1, 3]) {
      const g = tinyPiper({ speakers }).graph;
      const known = new Set([...g.inputs.map((i) => i.name), ...g.initializers.map((t) => t.name)]);
      for (const n of g.nodes) {
        for (const i of n.inputs) expect(known.has(i), `${n.opType} reads ${i}`).toBe(true);
        n.outputs.forEach((o) => known.add(o));
      }
      expect(known.has("y")).toBe(true);
    }
  });

  it("is deterministic by seed", () => {
    const weights = (seed: number) =>
      decodeOnnx(encodeOnnx(tinyPiper({ seed }))).graph.initializers.find((t) => t.name === "emb.weight")!
        .data;
    expect(weights(1)).toEqual(weights(1));
    expect(weights(1)).not.toEqual(weights(2));
  });

  it("writes tokens.txt with one unique symbol per id, the space as its id alone", () => {
    const lines = piperTokensTxt().trimEnd().split("\n");
    expect(lines).toHaveLength(PIPER_SYMBOLS.length);
    expect(new Set(PIPER_SYMBOLS).size).toBe(PIPER_SYMBOLS.length);
    expect(lines.slice(0, 4)).toEqual(["_ 0", "^ 1", "$ 2", " 3"]);
  });

  it("rejects options that make no voice", () => {
    expect(() => tinyPiper({ hop: 0 })).toThrow(/hop must be a positive integer/);
    expect(() => tinyPiper({ speakers: 1.5 })).toThrow(/speakers/);
  });

  it("writes a voice directory once; a second writer leaves it as it is", async () => {
    const voice = `${dir}/voice`;
    const size = await writeTinyPiper(voice, { seed: 3 });
    expect(Deno.statSync(`${voice}/model.onnx`).size).toBe(size);
    const before = Deno.readFileSync(`${voice}/model.onnx`);
    await writeTinyPiper(voice, { seed: 4 });
    expect(Deno.readFileSync(`${voice}/model.onnx`)).toEqual(before);
    expect(Deno.readTextFileSync(`${voice}/tokens.txt`)).toBe(piperTokensTxt());
    expect(JSON.parse(Deno.readTextFileSync(`${voice}/model.onnx.json`)).audio.sample_rate).toBe(22050);
    expect([...Deno.readDirSync(dir)].filter((e) => e.isDirectory).map((e) => e.name)).toEqual(["voice"]);
  });
});
