/**
 * Reads the facts placement needs from a GGUF header (shape, context, file type, tensor bytes), from a
 * local file or a URL through HTTP Range requests, with `@huggingface/gguf` doing the parsing.
 */
import {
  GGMLFileQuantizationType,
  GGMLQuantizationType,
  gguf as parseGguf,
  type GGUFParseOutput,
} from "@huggingface/gguf";
import { z } from "zod";
import { readBounded } from "../../cluster/peers.ts";

const count = z.number().int().nonnegative();

export const GgufFactsSchema = z.object({
  architecture: z.string(),
  name: z.string().optional(),
  blockCount: count,
  embeddingLength: count,
  headCount: count,
  headCountKv: count,
  /** Per-head key width: `<arch>.attention.key_length`, else embedding / heads. */
  headDim: count,
  feedForwardLength: count.optional(),
  contextLength: count,
  vocabSize: count.optional(),
  /** `general.file_type` and its llama.cpp name (F16, Q4_K_M, ...). */
  fileType: count.optional(),
  fileTypeName: z.string().optional(),
  /** `<arch>.pooling_type` when present: an embedding model's header says how to pool. */
  poolingType: count.optional(),
  hasChatTemplate: z.boolean(),
  tensorCount: count,
  parameterCount: count,
  /** Sum of every tensor's bytes in the file (what the weights take in memory). */
  tensorBytes: count,
  /** Where tensor data starts: the header's size. */
  dataOffset: count,
  /** Size of the whole file, when the filesystem or the server's Content-Range told it. */
  fileBytes: count.optional(),
});
export type GgufFacts = z.infer<typeof GgufFactsSchema>;

export class GgufReadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GgufReadError";
  }
}

/** [elements per block, bytes per block] of each ggml tensor type (ggml-common.h's block structs). */
const BLOCKS: Partial<Record<GGMLQuantizationType, [number, number]>> = {
  [GGMLQuantizationType.F32]: [1, 4],
  [GGMLQuantizationType.F16]: [1, 2],
  [GGMLQuantizationType.BF16]: [1, 2],
  [GGMLQuantizationType.F64]: [1, 8],
  [GGMLQuantizationType.I8]: [1, 1],
  [GGMLQuantizationType.I16]: [1, 2],
  [GGMLQuantizationType.I32]: [1, 4],
  [GGMLQuantizationType.I64]: [1, 8],
  [GGMLQuantizationType.Q4_0]: [32, 18],
  [GGMLQuantizationType.Q4_1]: [32, 20],
  [GGMLQuantizationType.Q5_0]: [32, 22],
  [GGMLQuantizationType.Q5_1]: [32, 24],
  [GGMLQuantizationType.Q8_0]: [32, 34],
  [GGMLQuantizationType.Q8_1]: [32, 36],
  [GGMLQuantizationType.Q2_K]: [256, 84],
  [GGMLQuantizationType.Q3_K]: [256, 110],
  [GGMLQuantizationType.Q4_K]: [256, 144],
  [GGMLQuantizationType.Q5_K]: [256, 176],
  [GGMLQuantizationType.Q6_K]: [256, 210],
  [GGMLQuantizationType.Q8_K]: [256, 292],
  [GGMLQuantizationType.IQ2_XXS]: [256, 66],
  [GGMLQuantizationType.IQ2_XS]: [256, 74],
  [GGMLQuantizationType.IQ2_S]: [256, 82],
  [GGMLQuantizationType.IQ3_XXS]: [256, 98],
  [GGMLQuantizationType.IQ3_S]: [256, 110],
  [GGMLQuantizationType.IQ1_S]: [256, 50],
  [GGMLQuantizationType.IQ1_M]: [256, 56],
  [GGMLQuantizationType.IQ4_NL]: [32, 18],
  [GGMLQuantizationType.IQ4_XS]: [256, 136],
  [GGMLQuantizationType.TQ1_0]: [256, 54],
  [GGMLQuantizationType.TQ2_0]: [256, 66],
  [GGMLQuantizationType.MXFP4]: [32, 17],
  [GGMLQuantizationType.NVFP4]: [64, 36],
  [GGMLQuantizationType.Q1_0]: [128, 18],
  [GGMLQuantizationType.Q2_0]: [64, 18],
};

/** Bytes of one tensor, or undefined for a type this table does not know. */
export function ggmlTensorBytes(dtype: number, elements: number): number | undefined {
  const block = BLOCKS[dtype as GGMLQuantizationType];
  if (!block) return undefined;
  return Math.ceil(elements / block[0]) * block[1];
}

type Meta = Record<string, unknown>;

const num = (m: Meta, key: string): number | undefined => {
  const v = m[key];
  if (typeof v === "number" || typeof v === "bigint") return Number(v);
  return undefined;
};

/** Head counts may be per-layer arrays (e.g. hybrid models); the largest is what memory must fit. */
const numOrMax = (m: Meta, key: string): number | undefined => {
  const v = m[key];
  if (Array.isArray(v)) return v.length ? Math.max(...v.map(Number)) : undefined;
  return num(m, key);
};

/** The facts from a parsed header: pure, so it is tested on writer output without I/O. */
export function factsFromParse(
  parsed: Pick<GGUFParseOutput, "metadata" | "tensorInfos" | "tensorDataOffset">,
  fileBytes?: number,
): GgufFacts {
  const m = parsed.metadata as unknown as Meta;
  const arch = m["general.architecture"];
  if (typeof arch !== "string" || !arch) throw new GgufReadError("GGUF header has no general.architecture");
  const need = (key: string) => {
    const v = numOrMax(m, `${arch}.${key}`);
    if (v === undefined) throw new GgufReadError(`GGUF header has no ${arch}.${key}`);
    return v;
  };
  const blockCount = need("block_count");
  const embeddingLength = need("embedding_length");
  const headCount = numOrMax(m, `${arch}.attention.head_count`) ?? 0;
  const headCountKv = numOrMax(m, `${arch}.attention.head_count_kv`) ?? headCount;
  const headDim = num(m, `${arch}.attention.key_length`) ??
    (headCount ? Math.floor(embeddingLength / headCount) : 0);
  let tensorBytes = 0;
  let parameterCount = 0;
  let unknownType = false;
  for (const t of parsed.tensorInfos) {
    const elements = t.shape.reduce((a, d) => a * Number(d), 1);
    parameterCount += elements;
    const bytes = ggmlTensorBytes(t.dtype, elements);
    if (bytes === undefined) unknownType = true;
    else tensorBytes += bytes;
  }
  const dataOffset = Number(parsed.tensorDataOffset);
  // A tensor type newer than the table: the data section's size is the honest upper bound.
  if (unknownType) {
    if (fileBytes === undefined) {
      throw new GgufReadError("GGUF has a tensor type this reader does not know and its size is unknown");
    }
    tensorBytes = fileBytes - dataOffset;
  }
  const fileType = num(m, "general.file_type");
  const vocab = m["tokenizer.ggml.tokens"];
  return {
    architecture: arch,
    name: typeof m["general.name"] === "string" ? m["general.name"] as string : undefined,
    blockCount,
    embeddingLength,
    headCount,
    headCountKv,
    headDim,
    feedForwardLength: numOrMax(m, `${arch}.feed_forward_length`),
    contextLength: num(m, `${arch}.context_length`) ?? 0,
    vocabSize: num(m, `${arch}.vocab_size`) ?? (Array.isArray(vocab) ? vocab.length : undefined),
    fileType,
    fileTypeName: fileType === undefined ? undefined : GGMLFileQuantizationType[fileType],
    poolingType: num(m, `${arch}.pooling_type`),
    hasChatTemplate: typeof m["tokenizer.chat_template"] === "string",
    tensorCount: parsed.tensorInfos.length,
    parameterCount,
    tensorBytes,
    dataOffset,
    fileBytes,
  };
}

export interface ReadOptions {
  fetch?: typeof fetch;
  headers?: Record<string, string>;
  /**
   * Remote reads: the most bytes fetched before giving up. The parser grows its range 2 MB at a time until the
   * metadata and tensor list are read; a real header (a 150k-token vocabulary) is under 16 MB.
   */
  maxBytes?: number;
  /** Remote reads: called with each range's byte count (to report what a header cost). */
  onRead?: (bytes: number) => void;
}

/** The default bound on a remote header read. */
export const REMOTE_HEADER_MAX_BYTES = 32 << 20;

const isUrl = (s: string) => /^https?:\/\//i.test(s);

/**
 * Reads a GGUF header from a local path or an http(s) URL. Remote reads send Range requests and refuse a
 * server that ignores them (it would send the whole model) or answers an error, naming the URL and status.
 */
export async function readGgufFacts(pathOrUrl: string, opts: ReadOptions = {}): Promise<GgufFacts> {
  let fileBytes: number | undefined;
  let fetched = 0;
  const maxBytes = opts.maxBytes ?? REMOTE_HEADER_MAX_BYTES;
  let params: Parameters<typeof parseGguf>[1];
  if (isUrl(pathOrUrl)) {
    const base = opts.fetch ?? fetch;
    const rangedFetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      let res: Response;
      try {
        res = await base(input, init);
      } catch (e) {
        throw new GgufReadError(`cannot fetch ${pathOrUrl}: ${(e as Error).message}`);
      }
      if (res.status !== 206) {
        await res.body?.cancel();
        if (res.ok) {
          throw new GgufReadError(
            `${pathOrUrl} ignored the HTTP Range request (answered ${res.status}, not 206)`,
          );
        }
        throw new GgufReadError(`${pathOrUrl} answered ${res.status} ${res.statusText}`.trim());
      }
      const total = Number(res.headers.get("content-range")?.match(/\/\s*(\d+)\s*$/)?.[1]);
      if (Number.isSafeInteger(total)) fileBytes = total;
      // The server may not send more than was asked, nor may the header grow past the bound.
      const asked = new Headers(init?.headers).get("range")?.match(/^bytes=(\d+)-(\d+)$/);
      const want = asked ? Number(asked[2]) - Number(asked[1]) + 1 : maxBytes;
      const left = maxBytes - fetched;
      if (left <= 0) {
        await res.body?.cancel();
        throw new GgufReadError(
          `the GGUF header of ${pathOrUrl} is not parsed after ${fetched} bytes (the bound is ${maxBytes})`,
        );
      }
      const body = await readBounded(res, Math.min(want, left));
      if (!body) {
        throw new GgufReadError(
          want <= left
            ? `${pathOrUrl} sent more than the ${want} bytes its Range asked for`
            : `the GGUF header of ${pathOrUrl} is not parsed after ${maxBytes} bytes (the bound)`,
        );
      }
      fetched += body.length;
      opts.onRead?.(body.length);
      return new Response(body as Uint8Array<ArrayBuffer>, { status: 206, headers: res.headers });
    };
    params = { fetch: rangedFetch as typeof fetch, additionalFetchHeaders: opts.headers };
  } else {
    let stat: Deno.FileInfo;
    try {
      stat = await Deno.stat(pathOrUrl);
    } catch (e) {
      throw new GgufReadError(
        e instanceof Deno.errors.NotFound
          ? `no file at ${pathOrUrl}`
          : `cannot read ${pathOrUrl}: ${(e as Error).message}`,
      );
    }
    if (!stat.isFile) throw new GgufReadError(`${pathOrUrl} is not a file`);
    fileBytes = stat.size;
    params = { allowLocalFile: true };
  }
  let parsed: GGUFParseOutput;
  try {
    parsed = await parseGguf(pathOrUrl, params);
  } catch (e) {
    if (e instanceof GgufReadError) throw e;
    throw new GgufReadError(`${pathOrUrl} is not a readable GGUF file (${(e as Error).message})`);
  }
  return factsFromParse(parsed, fileBytes);
}
