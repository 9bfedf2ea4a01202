/**
 * ONNX model files (onnx.proto's ModelProto): the model's shape and its decoder (the metadata tells what a
 * speech model is before any engine loads it). Float and int64 only; the encoder lives in dev/onnx/encode.ts.
 */
import {
  floatOf,
  intOf,
  intsOf,
  messagesOf,
  type ProtoField,
  readFields,
  readVarint,
  stringOf,
  stringsOf,
  WIRE,
} from "./protobuf.ts";

/** onnx.proto TensorProto.DataType values used here. */
export const DATA_TYPE = { float: 1, int64: 7 } as const;
export type ElemType = keyof typeof DATA_TYPE;
const ELEM_OF: Record<number, ElemType> = { 1: "float", 7: "int64" };

/** AttributeProto.AttributeType values used here. */
export const ATTR = { float: 1, int: 2, string: 3, tensor: 4, ints: 7 } as const;

export interface OnnxTensor {
  name: string;
  dims: number[];
  data: Float32Array | BigInt64Array;
}

export interface OnnxValueInfo {
  name: string;
  elemType: ElemType;
  /** A number is a fixed dimension; a string names a symbolic one (e.g. "N"). */
  shape: (number | string)[];
}

export type OnnxAttribute =
  | { name: string; int: number }
  | { name: string; float: number }
  | { name: string; string: string }
  | { name: string; ints: number[] }
  | { name: string; tensor: OnnxTensor };

export interface OnnxNode {
  opType: string;
  inputs: string[];
  outputs: string[];
  name?: string;
  attributes?: OnnxAttribute[];
}

export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
  initializers: OnnxTensor[];
}

export interface OnnxModel {
  irVersion: number;
  /** Version of the default ("ai.onnx") operator set. */
  opset: number;
  producer: string;
  graph: OnnxGraph;
  metadata: Record<string, string>;
}

export class OnnxFormatError extends Error {}

function decodeTensor(f: ProtoField[]): OnnxTensor {
  const dims = intsOf(f, 1);
  const type = ELEM_OF[intOf(f, 2) ?? 0];
  const name = stringOf(f, 8) ?? "";
  if (!type) {
    throw new OnnxFormatError(`tensor ${name} has data type ${intOf(f, 2)}; only float and int64 are read`);
  }
  const count = dims.reduce((a, b) => a * b, 1);
  const raw = f.find((x) => x.field === 9)?.bytes;
  if (raw) {
    const copy = raw.slice(); // aligned copy: typed arrays need their element alignment
    const data = type === "float"
      ? new Float32Array(copy.buffer, 0, copy.byteLength / 4)
      : new BigInt64Array(copy.buffer, 0, copy.byteLength / 8);
    if (data.length !== count) {
      throw new OnnxFormatError(`tensor ${name} holds ${data.length} values for dims [${dims}] (${count})`);
    }
    return { name, dims, data };
  }
  if (type === "int64") return { name, dims, data: BigInt64Array.from(intsOf(f, 7).map(BigInt)) };
  const packed = f.find((x) => x.field === 4)?.bytes;
  const floats = packed ? new Float32Array(packed.slice().buffer) : new Float32Array(0);
  return { name, dims, data: floats };
}

function decodeValueInfo(f: ProtoField[]): OnnxValueInfo {
  const name = stringOf(f, 1) ?? "";
  const tensorType = messagesOf(messagesOf(f, 2)[0] ?? [], 1)[0];
  if (!tensorType) throw new OnnxFormatError(`value ${name} is not a tensor`);
  const elemType = ELEM_OF[intOf(tensorType, 1) ?? 0];
  if (!elemType) throw new OnnxFormatError(`value ${name} has element type ${intOf(tensorType, 1)}`);
  const shape = messagesOf(messagesOf(tensorType, 2)[0] ?? [], 1).map((d) =>
    intOf(d, 1) ?? stringOf(d, 2) ?? "?"
  );
  return { name, elemType, shape };
}

function decodeAttribute(f: ProtoField[]): OnnxAttribute {
  const name = stringOf(f, 1) ?? "";
  switch (intOf(f, 20)) {
    case ATTR.int:
      return { name, int: intOf(f, 3) ?? 0 };
    case ATTR.float:
      return { name, float: floatOf(f, 2) ?? 0 };
    case ATTR.string:
      return { name, string: stringOf(f, 4) ?? "" };
    case ATTR.ints:
      return { name, ints: intsOf(f, 8) };
    case ATTR.tensor:
      return { name, tensor: decodeTensor(messagesOf(f, 5)[0] ?? []) };
    default:
      throw new OnnxFormatError(`attribute ${name} has type ${intOf(f, 20)}, which is not read here`);
  }
}

/** Reads an ONNX file; throws OnnxFormatError (or ProtoError) naming what is wrong. */
export function decodeOnnx(bytes: Uint8Array): OnnxModel {
  const m = readFields(bytes);
  const graph = messagesOf(m, 7)[0];
  if (!graph) throw new OnnxFormatError("no graph: this is not an ONNX model file");
  const opsets = messagesOf(m, 8);
  const main = opsets.find((o) => !stringOf(o, 1) || stringOf(o, 1) === "ai.onnx") ?? opsets[0];
  const metadata: Record<string, string> = {};
  for (const e of messagesOf(m, 14)) metadata[stringOf(e, 1) ?? ""] = stringOf(e, 2) ?? "";
  return {
    irVersion: intOf(m, 1) ?? 0,
    producer: stringOf(m, 2) ?? "",
    opset: main ? intOf(main, 2) ?? 0 : 0,
    metadata,
    graph: {
      name: stringOf(graph, 2) ?? "",
      nodes: messagesOf(graph, 1).map((n) => {
        const attributes = messagesOf(n, 5).map(decodeAttribute);
        const node: OnnxNode = {
          inputs: stringsOf(n, 1),
          outputs: stringsOf(n, 2),
          name: stringOf(n, 3),
          opType: stringOf(n, 4) ?? "",
        };
        return attributes.length ? { ...node, attributes } : node;
      }),
      initializers: messagesOf(graph, 5).map(decodeTensor),
      inputs: messagesOf(graph, 11).map(decodeValueInfo),
      outputs: messagesOf(graph, 12).map(decodeValueInfo),
    },
  };
}

/**
 * The metadata of an ONNX file, read without loading it: the top-level fields are walked by seeking past
 * each (a voice's weights can be hundreds of MB; metadata_props usually come last).
 */
export function readOnnxMetadata(path: string): Record<string, string> {
  using file = Deno.openSync(path);
  const size = file.statSync().size;
  const head = new Uint8Array(24);
  const metadata: Record<string, string> = {};
  let at = 0;
  while (at < size) {
    file.seekSync(at, Deno.SeekMode.Start);
    const n = file.readSync(head) ?? 0;
    const view = head.subarray(0, n);
    const [key, afterKey] = readVarint(view, 0);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === WIRE.varint) {
      at += readVarint(view, afterKey)[1];
    } else if (wire === WIRE.fixed32 || wire === WIRE.fixed64) {
      at += afterKey + (wire === WIRE.fixed32 ? 4 : 8);
    } else if (wire === WIRE.bytes) {
      const [len, afterLen] = readVarint(view, afterKey);
      const start = at + afterLen;
      if (start + Number(len) > size) {
        throw new OnnxFormatError(`field ${field} runs past the end of ${path}`);
      }
      if (field === 14) {
        const payload = new Uint8Array(Number(len));
        file.seekSync(start, Deno.SeekMode.Start);
        let got = 0;
        while (got < payload.length) got += file.readSync(payload.subarray(got)) ?? payload.length;
        const entry = readFields(payload);
        metadata[stringOf(entry, 1) ?? ""] = stringOf(entry, 2) ?? "";
      }
      at = start + Number(len);
    } else {
      throw new OnnxFormatError(`${path} is not an ONNX file (wire type ${wire} at byte ${at})`);
    }
  }
  return metadata;
}
