/**
 * Cards for hub repos added by id: the pure choices (a GGUF repo's quantisations and split-shard groups, the
 * preferred quantisation, a card from a config.json) and `hubCard`, which reads only what a card needs from the hub.
 */
import { z } from "zod";
import { quoted, repoPathProblem } from "../security/ids.ts";
import { type ModelCard, ModelCardSchema } from "./card.ts";
import { type GgufFacts, GgufReadError, readGgufFacts } from "./gguf/reader.ts";
import { type HubClient, type HubFile, projectorRank } from "./hub.ts";
import { cardFromFacts, LocalModelError } from "./local.ts";

/**
 * The quantisation picked when none is asked for, best first. Q4_K_M is llama.cpp's recommended balance of size
 * and quality; the other 4-bit kinds follow (smallest loss first), then the larger 5/6/8-bit ones (better, but
 * more memory), then the lossier 3- and 2-bit ones, then unquantised weights. A kind not listed comes after all
 * of these, by name.
 */
export const QUANT_PREFERENCE = [
  "Q4_K_M",
  "Q4_K_S",
  "Q4_K_XL",
  "MXFP4",
  "IQ4_XS",
  "IQ4_NL",
  "Q4_0",
  "Q5_K_M",
  "Q5_K_S",
  "Q5_K_XL",
  "Q6_K",
  "Q6_K_XL",
  "Q8_0",
  "Q8_K_XL",
  "Q3_K_M",
  "Q3_K_L",
  "Q3_K_XL",
  "Q3_K_S",
  "IQ3_M",
  "IQ3_XS",
  "IQ3_XXS",
  "Q2_K",
  "Q2_K_L",
  "Q2_K_XL",
  "IQ2_M",
  "BF16",
  "F16",
  "F32",
] as const;

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;
const PROJECTOR = /(^|\/)[^/]*mmproj[^/]*\.gguf$/i;
const QUANT = /(?<![A-Za-z0-9])(I?Q\d+(?:_[A-Za-z0-9]+)*|BF16|F16|F32|MXFP4)(?![A-Za-z0-9])/gi;

/** Pure: the quantisation a GGUF file name spells (`Qwen3-0.6B-Q4_K_M.gguf` → `Q4_K_M`), or null. */
export function quantOf(path: string): string | null {
  const name = (path.split("/").at(-1) ?? path).replace(SHARD, "$1").replace(/\.gguf$/i, "");
  const all = [...name.matchAll(QUANT)];
  return all.length ? all[all.length - 1][1].toUpperCase() : null;
}

/** One model file of a GGUF repo: a single file, or every shard of a `-NNNNN-of-MMMMM.gguf` split. */
export interface GgufGroup {
  /** The file llama.cpp opens: the file itself, or the first shard. */
  first: string;
  files: HubFile[];
  /** The quantisation its name spells; the file's stem when it spells none. */
  quant: string;
  /** Sum of the files' sizes as listed (0 when the listing gives none). */
  bytes: number;
}

export interface GgufListing {
  groups: GgufGroup[];
  projectors: HubFile[];
  /** Split groups with shards missing: not offered, reported when nothing else is. */
  incomplete: string[];
}

/** Pure: a repo listing's GGUF model files grouped (split shards into one model) and its projectors. */
export function ggufListing(listing: HubFile[]): GgufListing {
  const projectors: HubFile[] = [];
  const singles: HubFile[] = [];
  const splits = new Map<string, { count: number; shards: Map<number, HubFile> }>();
  for (const f of listing) {
    if (!/\.gguf$/i.test(f.path)) continue;
    if (PROJECTOR.test(f.path)) {
      projectors.push(f);
      continue;
    }
    const m = f.path.match(SHARD);
    if (!m) {
      singles.push(f);
      continue;
    }
    const key = `${m[1]}|${m[3]}`;
    const g = splits.get(key) ?? { count: Number(m[3]), shards: new Map() };
    g.shards.set(Number(m[2]), f);
    splits.set(key, g);
  }
  const group = (first: string, files: HubFile[]): GgufGroup => ({
    first,
    files,
    quant: quantOf(first) ?? (first.split("/").at(-1) ?? first).replace(SHARD, "$1").replace(/\.gguf$/i, ""),
    bytes: files.reduce((a, f) => a + f.size, 0),
  });
  const groups = singles.map((f) => group(f.path, [f]));
  const incomplete: string[] = [];
  for (const [key, g] of splits) {
    const files = Array.from({ length: g.count }, (_, i) => g.shards.get(i + 1));
    if (g.count < 1 || files.some((f) => !f) || g.shards.size !== g.count) {
      incomplete.push(`${key.split("|")[0]} (${g.shards.size} of ${g.count} shards listed)`);
      continue;
    }
    groups.push(group(files[0]!.path, files as HubFile[]));
  }
  return { groups: groups.sort((a, b) => a.first.localeCompare(b.first)), projectors, incomplete };
}

/** The asked quantisation is not in the repo; the message names what is. */
export class QuantNotFound extends Error {
  override name = "QuantNotFound";
}

const rank = (quant: string) => {
  const i = (QUANT_PREFERENCE as readonly string[]).indexOf(quant);
  return i < 0 ? QUANT_PREFERENCE.length : i;
};

/** Pure: every quantisation a repo offers, in preference order. */
export function availableQuants(groups: GgufGroup[]): string[] {
  return [...new Set(groups.map((g) => g.quant))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/**
 * Pure: the model file to add: the asked quantisation (case-insensitive), else the first of QUANT_PREFERENCE the
 * repo has. Among files of one quantisation a single file wins over a split, then the shorter name (the plain
 * model over a variant in a subfolder).
 */
export function chooseGguf(repo: string, groups: GgufGroup[], quant?: string): GgufGroup {
  const pool = quant ? groups.filter((g) => g.quant.toUpperCase() === quant.toUpperCase()) : groups;
  if (pool.length === 0) {
    throw new QuantNotFound(
      `${repo} has no ${quoted(quant ?? "")} quantisation; it has ${availableQuants(groups).join(", ")}`,
    );
  }
  return [...pool].sort((a, b) =>
    rank(a.quant) - rank(b.quant) || a.files.length - b.files.length || a.first.length - b.first.length ||
    a.first.localeCompare(b.first)
  )[0];
}

/** The projector to take when a repo ships several precisions (hub.ts's order, as downloads pick it). */
function chooseProjector(projectors: HubFile[]): HubFile | undefined {
  return [...projectors].sort((a, b) =>
    projectorRank(a.path) - projectorRank(b.path) || a.path.localeCompare(b.path)
  )[0];
}

/** A hub repo whose files cannot make a card (no model files, a hostile listing, an unreadable header). */
export class HubCardError extends Error {
  override name = "HubCardError";
}

/** Pure: the GGUF card from the first file's header facts, the group's size and the projector. */
export function ggufHubCard(repo: string, g: GgufGroup, facts: GgufFacts, projector?: HubFile): ModelCard {
  let base: ModelCard;
  try {
    base = cardFromFacts(repo, g.first, facts);
  } catch (e) {
    if (e instanceof LocalModelError) throw new HubCardError(`${repo}: ${e.message}`);
    throw e;
  }
  // The first file holds the header and its own tensors: a listing smaller than that is wrong or hostile.
  const first = g.files[0];
  if (first.size > 0 && first.size < facts.dataOffset + facts.tensorBytes) {
    throw new HubCardError(
      `${repo}: ${g.first} is listed as ${first.size} bytes but its header describes ${
        facts.dataOffset + facts.tensorBytes
      }`,
    );
  }
  const { gguf_path: _local, ...card } = base;
  const bytes = g.bytes + (projector?.size ?? 0);
  return ModelCardSchema.parse({
    ...card,
    gguf_file: g.first,
    storage_size: { in_bytes: bytes },
    quantization: facts.fileTypeName ?? g.quant,
    ...(projector ? { mmproj_file: projector.path, capabilities: [...card.capabilities, "vision"] } : {}),
  });
}

const count = z.number().int().positive();
/** The config.json fields a card needs; VLMs keep the language model's under `text_config`. */
const ConfigSchema = z.object({
  model_type: z.string().optional(),
  num_hidden_layers: count.optional(),
  hidden_size: count.optional(),
  num_attention_heads: count.optional(),
  num_key_value_heads: count.optional(),
  head_dim: count.optional(),
  max_position_embeddings: count.optional(),
  quantization: z.object({ bits: z.number().int().positive().optional() }).loose().optional(),
  torch_dtype: z.string().optional(),
}).loose();

/**
 * Pure: the card of a safetensors/MLX repo from its config.json and the listed weight bytes. It names the MLX
 * backend (upstream's runner for such repos): no runner of this build serves it, so placement refuses it with
 * the capability table's reason, and the card says so to a client that lists it.
 */
export function configHubCard(repo: string, config: unknown, weightBytes: number): ModelCard {
  const raw = z.object({ text_config: z.unknown().optional() }).loose().safeParse(config);
  if (!raw.success) throw new HubCardError(`${repo}: config.json is not a JSON object`);
  const top = ConfigSchema.safeParse(config);
  const text = ConfigSchema.safeParse(raw.data.text_config ?? {});
  // A VLM's top level lacks the language model's shape; where both give a field, the top level's wins.
  const c = { ...(text.success ? text.data : {}), ...(top.success ? top.data : {}) };
  if (!c.num_hidden_layers || !c.hidden_size) {
    throw new HubCardError(
      `${repo}: config.json gives no num_hidden_layers and hidden_size; not a model this node can describe`,
    );
  }
  if (weightBytes <= 0) throw new HubCardError(`${repo}: the hub lists no .safetensors weights`);
  const bits = c.quantization?.bits;
  return ModelCardSchema.parse({
    model_id: repo,
    storage_size: { in_bytes: weightBytes },
    n_layers: c.num_hidden_layers,
    hidden_size: c.hidden_size,
    supports_tensor: false,
    ...(c.num_key_value_heads ? { num_key_value_heads: c.num_key_value_heads } : {}),
    ...(c.num_attention_heads ? { num_attention_heads: c.num_attention_heads } : {}),
    ...(c.head_dim ? { head_dim: c.head_dim } : {}),
    tasks: ["TextGeneration"],
    family: c.model_type ?? "",
    quantization: bits ? `${bits}bit` : (c.torch_dtype ?? ""),
    base_model: repo.split("/").at(-1)!,
    capabilities: ["text"],
    context_length: c.max_position_embeddings ?? 0,
    trust_remote_code: false,
    is_custom: true,
    placement: { compatible_backends: ["mlx"], backend_preference: ["mlx"] },
  });
}

/** What resolving a hub card cost and found, reported with the card. */
export interface HubCardReport {
  card: ModelCard;
  kind: "gguf" | "mlx";
  /** GGUF repos: every quantisation offered, in preference order. */
  quants: string[];
  /** Bytes read through HTTP Range to parse the GGUF header. */
  header_bytes: number;
}

/** Refuses a listing that names a path this node would not write (traversal, control characters, `.skulk/`). */
function checkListing(repo: string, files: HubFile[]): void {
  for (const f of files) {
    const problem = repoPathProblem(f.path);
    if (problem) {
      throw new HubCardError(
        `${repo}: the hub lists a file ${quoted(f.path)} that ${problem}; refusing this repo`,
      );
    }
  }
}

/**
 * Builds the card for a hub repo from the fewest reads: the file listing, then for a GGUF repo the chosen file's
 * header through HTTP Range (and a HEAD per file the listing gives no size), else config.json.
 */
export async function hubCard(hub: HubClient, repo: string, quant?: string): Promise<HubCardReport> {
  const listing = await hub.listFiles(repo);
  checkListing(repo, listing);
  const gguf = ggufListing(listing);
  if (gguf.groups.length === 0 && gguf.incomplete.length > 0) {
    throw new HubCardError(`${repo}: every split GGUF is incomplete: ${gguf.incomplete.join("; ")}`);
  }
  if (gguf.groups.length > 0) {
    const chosen = chooseGguf(repo, gguf.groups, quant);
    const files = await Promise.all(
      chosen.files.map(async (f) => f.size > 0 ? f : { ...f, size: await hub.fileSize(repo, f.path) }),
    );
    const group: GgufGroup = { ...chosen, files, bytes: files.reduce((a, f) => a + f.size, 0) };
    let projector = chooseProjector(gguf.projectors);
    if (projector && projector.size <= 0) {
      projector = { ...projector, size: await hub.fileSize(repo, projector.path) };
    }
    let headerBytes = 0;
    let facts: GgufFacts;
    try {
      facts = await readGgufFacts(hub.fileUrl(repo, group.first), {
        headers: Object.fromEntries(hub.headers()),
        onRead: (n) => (headerBytes += n),
      });
    } catch (e) {
      if (e instanceof GgufReadError) throw new HubCardError(`${repo}: ${group.first}: ${e.message}`);
      throw e;
    }
    return {
      card: ggufHubCard(repo, group, facts, projector),
      kind: "gguf",
      quants: availableQuants(gguf.groups),
      header_bytes: headerBytes,
    };
  }
  if (quant) {
    throw new QuantNotFound(`${repo} has no GGUF files, so no ${quoted(quant)} quantisation to pick`);
  }
  if (!listing.some((f) => f.path === "config.json")) {
    throw new HubCardError(`${repo} has neither GGUF files nor a config.json; not a model this node can add`);
  }
  const config = await hub.readJsonFile(repo, "config.json");
  const weights = listing.filter((f) =>
    f.path.endsWith(".safetensors") && !/^(original|metal)\//.test(f.path)
  );
  return {
    card: configHubCard(repo, config, weights.reduce((a, f) => a + f.size, 0)),
    kind: "mlx",
    quants: [],
    header_bytes: 0,
  };
}
