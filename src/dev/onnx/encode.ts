/**
 * Encodes ONNX model files (onnx.proto's ModelProto) for the tiny test voices: a graph with its initializers,
 * opset and metadata; models/onnx/model.ts decodes what this writes.
 */
import {
  ATTR,
  DATA_TYPE,
  type OnnxAttribute,
  type OnnxModel,
  type OnnxNode,
  type OnnxTensor,
  type OnnxValueInfo,
} from "../../models/onnx/model.ts";
import { ProtoWriter } from "./proto-writer.ts";

function tensorMessage(t: OnnxTensor): ProtoWriter {
  const w = new ProtoWriter().packedInts(1, t.dims);
  w.int(2, t.data instanceof Float32Array ? DATA_TYPE.float : DATA_TYPE.int64);
  w.string(8, t.name);
  // raw_data is little-endian on every platform (onnx.proto says so); typed arrays here are too.
  w.bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  return w;
}

function valueInfoMessage(v: OnnxValueInfo): ProtoWriter {
  const shape = new ProtoWriter();
  for (const d of v.shape) {
    shape.message(1, typeof d === "number" ? new ProtoWriter().int(1, d) : new ProtoWriter().string(2, d));
  }
  const tensorType = new ProtoWriter().int(1, DATA_TYPE[v.elemType]).message(2, shape);
  return new ProtoWriter().string(1, v.name).message(2, new ProtoWriter().message(1, tensorType));
}

function attributeMessage(a: OnnxAttribute): ProtoWriter {
  const w = new ProtoWriter().string(1, a.name);
  if ("int" in a) return w.int(3, a.int).int(20, ATTR.int);
  if ("float" in a) return w.float(2, a.float).int(20, ATTR.float);
  if ("string" in a) return w.string(4, a.string).int(20, ATTR.string);
  if ("ints" in a) return w.packedInts(8, a.ints).int(20, ATTR.ints);
  return w.message(5, tensorMessage(a.tensor)).int(20, ATTR.tensor);
}

function nodeMessage(n: OnnxNode, index: number): ProtoWriter {
  const w = new ProtoWriter();
  for (const i of n.inputs) w.string(1, i);
  for (const o of n.outputs) w.string(2, o);
  w.string(3, n.name ?? `${n.opType.toLowerCase()}_${index}`);
  w.string(4, n.opType);
  for (const a of n.attributes ?? []) w.message(5, attributeMessage(a));
  return w;
}

/** The file bytes of `model`. */
export function encodeOnnx(model: OnnxModel): Uint8Array {
  const g = new ProtoWriter();
  model.graph.nodes.forEach((n, i) => g.message(1, nodeMessage(n, i)));
  g.string(2, model.graph.name);
  for (const t of model.graph.initializers) g.message(5, tensorMessage(t));
  for (const v of model.graph.inputs) g.message(11, valueInfoMessage(v));
  for (const v of model.graph.outputs) g.message(12, valueInfoMessage(v));
  const m = new ProtoWriter()
    .int(1, model.irVersion)
    .string(2, model.producer)
    .message(7, g)
    .message(8, new ProtoWriter().string(1, "").int(2, model.opset));
  for (const [key, value] of Object.entries(model.metadata)) {
    m.message(14, new ProtoWriter().string(1, key).string(2, value));
  }
  return m.finish();
}
