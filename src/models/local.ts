/**
 * Local GGUF files as custom model cards: the card built from a file's header (pure), the checks a file
 * must pass, and the SQLite `custom_cards` rows that keep such cards across restarts.
 */
import { eq } from "drizzle-orm";
import type { Db } from "../store/db.ts";
import { customCards } from "../store/schema.ts";
import { type ModelCard, ModelCardSchema } from "./card.ts";
import { type GgufFacts, GgufReadError, readGgufFacts } from "./gguf/reader.ts";
import { MODEL_ID_RULES, modelIdProblem, quoted } from "../security/ids.ts";

/** A local GGUF runs on the llama.cpp engines only (upstream's synthesized GGUF cards use the same list). */
export const LLAMA_CPP_BACKENDS = ["llama_cpp-vulkan", "llama_cpp-rocm", "llama_cpp-cuda", "llama_cpp-cpu"];
/** Our runner is llama-server, so a local text GGUF may also be pooled over ggml RPC (docs/pooled-gguf.md). */
export const LLAMA_SERVER_BACKENDS = LLAMA_CPP_BACKENDS.map((t) => t.replace(/^llama_cpp/, "llama_server"));

/** Architectures whose GGUF is an encoder for embeddings, whatever the pooling key says. */
const EMBEDDING_ARCHS = new Set([
  "bert",
  "nomic-bert",
  "nomic-bert-moe",
  "jina-bert-v2",
  "jina-bert-v3",
  "modern-bert",
  "t5encoder",
]);

export class LocalModelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LocalModelError";
  }
}

const basename = (p: string) => p.split("/").at(-1) ?? p;

/**
 * `local/<file name without .gguf>`, made a model id (ids.ts): characters it may not hold become `-`, runs of `-`
 * or `.` one, and it starts and ends with a letter, digit or `_`.
 */
export function defaultLocalModelId(path: string): string {
  const stem = basename(path).replace(/\.gguf$/i, "")
    .replace(/[^A-Za-z0-9_.-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/\.{2,}/g, ".")
    .replace(/^[.-]+|[.-]+$/g, "")
    .slice(0, MODEL_ID_RULES.maxPartLength)
    .replace(/[.-]+$/, "")
    .replace(/\.git$/i, "-git");
  return `local/${stem || "model"}`;
}

/** The card for a local GGUF, from its header facts. */
export function cardFromFacts(modelId: string, path: string, f: GgufFacts): ModelCard {
  if (f.blockCount < 1 || f.embeddingLength < 1) {
    throw new LocalModelError(
      `${path}: the GGUF header gives ${f.blockCount} layers and width ${f.embeddingLength}; not a usable model`,
    );
  }
  const embedding = EMBEDDING_ARCHS.has(f.architecture) || (f.poolingType ?? 0) > 0;
  return ModelCardSchema.parse({
    model_id: modelId,
    storage_size: { in_bytes: f.fileBytes ?? f.dataOffset + f.tensorBytes },
    n_layers: f.blockCount,
    hidden_size: f.embeddingLength,
    supports_tensor: false,
    ...(f.headCountKv > 0 ? { num_key_value_heads: f.headCountKv } : {}),
    ...(f.headCount > 0 ? { num_attention_heads: f.headCount } : {}),
    ...(f.headDim > 0 ? { head_dim: f.headDim } : {}),
    tasks: [embedding ? "TextEmbedding" : "TextGeneration"],
    family: f.architecture,
    quantization: f.fileTypeName ?? "",
    base_model: f.name ?? "",
    gguf_file: basename(path),
    gguf_path: path,
    capabilities: embedding ? ["embedding"] : ["text"],
    context_length: f.contextLength,
    trust_remote_code: false,
    is_custom: true,
    placement: {
      compatible_backends: [...LLAMA_CPP_BACKENDS, ...LLAMA_SERVER_BACKENDS],
      backend_preference: LLAMA_CPP_BACKENDS,
    },
  });
}

/** Reads a local GGUF's header facts, refusing a relative path, an unreadable header or a truncated file. */
async function checkedFacts(path: string, field: string): Promise<GgufFacts> {
  if (!path.startsWith("/")) throw new LocalModelError(`${field} must be an absolute path, got '${path}'`);
  let facts: GgufFacts;
  try {
    facts = await readGgufFacts(path);
  } catch (e) {
    if (e instanceof GgufReadError) throw new LocalModelError(e.message);
    throw e;
  }
  const needed = facts.dataOffset + facts.tensorBytes;
  if (facts.fileBytes !== undefined && facts.fileBytes < needed) {
    throw new LocalModelError(
      `${path} is truncated: its header describes ${needed} bytes, the file has ${facts.fileBytes}`,
    );
  }
  return facts;
}

/**
 * Reads and checks a local GGUF and builds its card; every refusal names the path and the reason. With
 * `draftPath`, a smaller model of the same vocabulary drafts for it (llama-server `--spec-type draft-simple`):
 * it must sit beside the model, so the card names it by file name only, as a repo's card names its files.
 */
export async function localCard(path: string, modelId?: string, draftPath?: string): Promise<ModelCard> {
  const facts = await checkedFacts(path, "gguf_path");
  const id = modelId ?? defaultLocalModelId(path);
  const problem = modelIdProblem(id);
  if (problem) throw new LocalModelError(`model id ${quoted(id)} ${problem}`);
  const card = cardFromFacts(id, path, facts);
  if (draftPath === undefined) return card;
  // Where it is first: nothing outside the model's directory is opened on a request's word.
  const dir = (p: string) => p.slice(0, p.lastIndexOf("/"));
  if (!draftPath.startsWith("/") || dir(draftPath) !== dir(path)) {
    throw new LocalModelError(
      `draft_path must be an absolute path of a GGUF file in the model's directory ${dir(path)}`,
    );
  }
  const draft = await checkedFacts(draftPath, "draft_path").catch((e) => {
    throw e instanceof LocalModelError ? new LocalModelError(`draft_path: ${e.message}`) : e;
  });
  if (card.tasks.includes("TextEmbedding")) {
    throw new LocalModelError(`${id} is an embedding model: speculative decoding applies to text generation`);
  }
  return ModelCardSchema.parse({
    ...card,
    // The draft's weights and KV cache load beside the model's: placement counts both.
    storage_size: { in_bytes: (card.storage_size?.in_bytes ?? 0) + (draft.fileBytes ?? 0) },
    runtime: { served_spec_type: "draft_simple", served_spec_draft_file: basename(draftPath) },
  });
}

/** Every custom card kept in SQLite; a row that no longer parses is skipped and reported, never fatal. */
export async function loadCustomCards(
  db: Db,
): Promise<{ cards: ModelCard[]; errors: { modelId: string; message: string }[] }> {
  const cards: ModelCard[] = [];
  const errors: { modelId: string; message: string }[] = [];
  for (const row of await db.select().from(customCards)) {
    try {
      cards.push({ ...ModelCardSchema.parse(JSON.parse(row.card)), is_custom: true });
    } catch (e) {
      errors.push({ modelId: row.modelId, message: (e as Error).message });
    }
  }
  return { cards, errors };
}

/** Inserts or replaces a custom card (upstream: a later add of the same id overwrites). */
export async function saveCustomCard(
  db: Db,
  card: ModelCard,
  source: string,
  now = new Date(),
): Promise<void> {
  const row = { card: JSON.stringify(card), source, addedAt: now.toISOString() };
  await db.insert(customCards).values({ modelId: card.model_id, ...row })
    .onConflictDoUpdate({ target: customCards.modelId, set: row });
}

export async function deleteCustomCard(db: Db, modelId: string): Promise<boolean> {
  const gone = await db.delete(customCards).where(eq(customCards.modelId, modelId)).returning({
    modelId: customCards.modelId,
  });
  return gone.length > 0;
}
