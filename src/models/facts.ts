/**
 * Facts a card may leave open (its size, its GGUF header's shape), resolved on first contact with the hub
 * (HEAD, and a header read through HTTP Range), recorded in `resolved_model_facts`, and applied from then on.
 */
import { eq } from "drizzle-orm";
import { z } from "zod";
import type { Db } from "../store/db.ts";
import { resolvedModelFacts } from "../store/schema.ts";
import type { ModelCard } from "./card.ts";

/** The header facts placement uses (a subset of the GGUF reader's facts, same names). */
export const HeaderFactsSchema = z.object({
  blockCount: z.number().int().positive(),
  headCount: z.number().int().nonnegative(),
  headCountKv: z.number().int().nonnegative(),
  headDim: z.number().int().nonnegative(),
  contextLength: z.number().int().nonnegative(),
}).partial();
export type HeaderFacts = z.infer<typeof HeaderFactsSchema>;

export interface ResolvedFacts {
  storageBytes: number;
  header: HeaderFacts;
}

/**
 * The card with its open facts filled in. The recorded size fills an absent one only; the header's KV
 * shape wins over the card's, because it is what llama.cpp will actually allocate for that file.
 */
export function applyResolvedFacts(card: ModelCard, facts: ResolvedFacts | undefined): ModelCard {
  if (!facts) return card;
  const h = facts.header;
  const out: ModelCard = { ...card };
  if (!out.storage_size && facts.storageBytes > 0) out.storage_size = { in_bytes: facts.storageBytes };
  if (h.headCountKv) out.num_key_value_heads = h.headCountKv;
  if (h.headCount) out.num_attention_heads = h.headCount;
  if (h.headDim) out.head_dim = h.headDim;
  if (!out.context_length && h.contextLength) out.context_length = h.contextLength;
  return out;
}

export async function loadResolvedFacts(db: Db, modelId: string): Promise<ResolvedFacts | undefined> {
  const rows = await db.select().from(resolvedModelFacts).where(eq(resolvedModelFacts.modelId, modelId));
  if (rows.length === 0) return undefined;
  const header = HeaderFactsSchema.safeParse(JSON.parse(rows[0].gguf || "{}"));
  return { storageBytes: rows[0].storageBytes, header: header.success ? header.data : {} };
}

/** Every recorded fact set, by model id (the catalogue listing applies them all at once). */
export async function loadAllResolvedFacts(db: Db): Promise<Map<string, ResolvedFacts>> {
  const out = new Map<string, ResolvedFacts>();
  for (const row of await db.select().from(resolvedModelFacts)) {
    const header = HeaderFactsSchema.safeParse(JSON.parse(row.gguf || "{}"));
    out.set(row.modelId, { storageBytes: row.storageBytes, header: header.success ? header.data : {} });
  }
  return out;
}

export async function recordResolvedFacts(
  db: Db,
  modelId: string,
  facts: ResolvedFacts,
  source: string,
  now = new Date(),
): Promise<void> {
  const row = {
    storageBytes: facts.storageBytes,
    gguf: JSON.stringify(facts.header),
    source,
    resolvedAt: now.toISOString(),
  };
  await db.insert(resolvedModelFacts).values({ modelId, ...row }).onConflictDoUpdate({
    target: resolvedModelFacts.modelId,
    set: row,
  });
}

/** Every file of a sharded GGUF group from its first shard's name (`-00001-of-00003.gguf`). */
export function shardFiles(file: string): string[] {
  const m = /^(.*)-00001-of-(\d{5})\.gguf$/.exec(file);
  if (!m) return [file];
  const n = Number(m[2]);
  return Array.from({ length: n }, (_, i) => `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[2]}.gguf`);
}

export function hubFileUrl(endpoint: string, repo: string, file: string, revision = "main"): string {
  return `${endpoint.replace(/\/$/, "")}/${repo}/resolve/${revision}/${
    file.split("/").map(encodeURIComponent).join("/")
  }`;
}

export interface HubDeps {
  endpoint: string;
  fetch: typeof fetch;
  /** Reads a GGUF header through HTTP Range (the GGUF reader); absent: the size alone is resolved. */
  readHeader?: (url: string) => Promise<HeaderFacts>;
  timeoutMs?: number;
}

/** The hub's size for one file: `x-linked-size` (LFS) when the hub gives it, else the content length. */
export async function headSize(url: string, deps: HubDeps): Promise<number> {
  const res = await deps.fetch(url, {
    method: "HEAD",
    redirect: "follow",
    signal: AbortSignal.timeout(deps.timeoutMs ?? 10_000),
  });
  await res.body?.cancel();
  if (!res.ok) throw new Error(`HEAD ${url} answered ${res.status}`);
  const size = Number(res.headers.get("x-linked-size") ?? res.headers.get("content-length"));
  if (!Number.isFinite(size) || size <= 0) throw new Error(`HEAD ${url} gave no size`);
  return size;
}

/** Resolves what the card leaves open from the hub (every GGUF shard plus the projector). */
export async function resolveFromHub(card: ModelCard, deps: HubDeps): Promise<ResolvedFacts> {
  if (!card.gguf_file) throw new Error(`${card.model_id} names no GGUF file to resolve`);
  const rev = card.source_revision ?? "main";
  const files = [...shardFiles(card.gguf_file), ...(card.mmproj_file ? [card.mmproj_file] : [])];
  let storageBytes = 0;
  for (const f of files) {
    storageBytes += await headSize(hubFileUrl(deps.endpoint, card.model_id, f, rev), deps);
  }
  const header = deps.readHeader
    ? await deps.readHeader(hubFileUrl(deps.endpoint, card.model_id, card.gguf_file, rev))
    : {};
  return { storageBytes, header };
}
