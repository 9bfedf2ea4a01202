/**
 * The Hugging Face hub client (`HF_ENDPOINT`, `HF_TOKEN`, `resolve/main` URLs, the tree listing) and the
 * pure choice of which repo files a card needs: the pinned GGUF or its shard group, its projector, or MLX patterns.
 */
import { z } from "zod";
import { readBounded } from "../cluster/peers.ts";
import { modelIdProblem } from "../security/ids.ts";
import type { ModelCard } from "./card.ts";

/** One file of a repo as the hub lists it; `sha256` is known for LFS files only. */
export interface HubFile {
  path: string;
  size: number;
  sha256: string | null;
}

export interface HubOptions {
  endpoint: string;
  token: string | null;
  revision: string;
}

/** The hub settings as huggingface_hub has them: hub.endpoint (HF_ENDPOINT), then hf_token or `<hub.home>/token`. */
export function hubOptions(
  config: { hubEndpoint: string; hfToken: string | null; hfHome: string },
  readToken = readTokenFile,
): HubOptions {
  const token = config.hfToken?.trim() || readToken(`${config.hfHome}/token`);
  return { endpoint: config.hubEndpoint.replace(/\/+$/, ""), token: token || null, revision: "main" };
}

function readTokenFile(path: string): string | null {
  try {
    return Deno.readTextFileSync(path).trim() || null;
  } catch {
    return null;
  }
}

const encodePath = (p: string) => p.split("/").map(encodeURIComponent).join("/");

export function resolveUrl(o: Pick<HubOptions, "endpoint" | "revision">, repo: string, path: string): string {
  return `${o.endpoint}/${repo}/resolve/${encodeURIComponent(o.revision)}/${encodePath(path)}`;
}

export function treeUrl(o: Pick<HubOptions, "endpoint" | "revision">, repo: string): string {
  return `${o.endpoint}/api/models/${repo}/tree/${encodeURIComponent(o.revision)}?recursive=true`;
}

/** A hub answer we can act on: `retryable` says whether trying again may help (5xx, resets) or not (401, 404). */
export class HubError extends Error {
  constructor(message: string, readonly status: number | null, readonly retryable: boolean) {
    super(message);
    this.name = "HubError";
  }
}

/** Turns a non-2xx hub status into a message a user can act on. */
export function hubStatusError(status: number, repo: string, what: string, hasToken: boolean): HubError {
  if (status === 401 || status === 403) {
    const hint = hasToken
      ? "the HF_TOKEN given has no access: accept the model's license on its hub page or use a token that can read it"
      : "the repo is gated or private: set HF_TOKEN to a token that can read it";
    return new HubError(`${repo}: ${what} refused with ${status}; ${hint}`, status, false);
  }
  if (status === 404) {
    return new HubError(
      `${repo}: ${what} not found on the hub (404); check the model id and file name`,
      status,
      false,
    );
  }
  if (status === 429 || status >= 500) {
    return new HubError(`${repo}: ${what} failed with ${status} from the hub`, status, true);
  }
  return new HubError(`${repo}: ${what} failed with ${status}`, status, false);
}

const TreeEntrySchema = z.object({
  type: z.string(),
  path: z.string(),
  size: z.number().int().nonnegative().default(0),
  lfs: z.object({ oid: z.string(), size: z.number().int().nonnegative() }).partial().nullish(),
});

/** Pure: the hub's tree JSON to our file list (directories dropped, LFS size and sha256 preferred). */
export function parseTree(json: unknown): HubFile[] {
  const entries = z.array(TreeEntrySchema).parse(json);
  return entries.filter((e) => e.type === "file").map((e) => ({
    path: e.path,
    size: e.lfs?.size ?? e.size,
    sha256: e.lfs?.oid && /^[0-9a-f]{64}$/.test(e.lfs.oid) ? e.lfs.oid : null,
  }));
}

/** The next page of a paginated tree listing, from a `Link: <url>; rel="next"` header. */
export function nextPage(link: string | null): string | null {
  const m = link?.match(/<([^>]+)>\s*;\s*rel="?next"?/);
  return m ? m[1] : null;
}

/** Bounds on what the hub may send us: one listing page, one search answer, one config.json. */
export const HUB_LIMITS = {
  listingPageBytes: 16 << 20,
  searchBytes: 4 << 20,
  jsonFileBytes: 1 << 20,
} as const;

/** One model of a hub search, as `GET /models/search` answers it (spec §1.10, snake_case). */
export const HubModelSchema = z.object({
  id: z.string(),
  author: z.string().nullable(),
  downloads: z.number().int().nonnegative(),
  likes: z.number().int().nonnegative(),
  last_modified: z.string().nullable(),
  tags: z.array(z.string()),
});
export type HubModel = z.infer<typeof HubModelSchema>;

export interface SearchQuery {
  query: string;
  limit: number;
  /** Only `mlx-community` models (upstream's mlx_only). */
  mlxOnly: boolean;
}

const SearchEntrySchema = z.object({
  id: z.string(),
  author: z.string().nullish(),
  downloads: z.number().nullish(),
  likes: z.number().nullish(),
  lastModified: z.string().nullish(),
  tags: z.array(z.unknown()).nullish(),
});

const count = (n: number | null | undefined) => (Number.isSafeInteger(n) && n! > 0 ? n! : 0);

/**
 * Pure: the hub's `/api/models` answer to our list, most downloaded first. An entry whose id is not a model id
 * this node accepts is dropped (a result is only worth showing if it can be added); tags are bounded.
 */
export function parseSearch(json: unknown, limit: number): HubModel[] {
  const entries = z.array(z.unknown()).parse(json);
  const out: HubModel[] = [];
  for (const raw of entries) {
    const e = SearchEntrySchema.safeParse(raw);
    if (!e.success || modelIdProblem(e.data.id)) continue;
    out.push({
      id: e.data.id,
      author: e.data.author ?? (e.data.id.includes("/") ? e.data.id.split("/")[0] : null),
      downloads: count(e.data.downloads),
      likes: count(e.data.likes),
      last_modified: e.data.lastModified ?? null,
      tags: (e.data.tags ?? []).filter((t): t is string => typeof t === "string" && t.length <= 100).slice(
        0,
        64,
      ),
    });
  }
  return out.sort((a, b) => b.downloads - a.downloads || a.id.localeCompare(b.id)).slice(0, limit);
}

/** The hub's listing URL for a search: most downloaded first, only the fields we answer with. */
export function searchUrl(endpoint: string, q: SearchQuery): string {
  const p = new URLSearchParams({ sort: "downloads", direction: "-1", limit: String(q.limit) });
  if (q.query) p.set("search", q.query);
  if (q.mlxOnly) p.set("author", "mlx-community");
  for (const f of ["author", "downloads", "likes", "lastModified", "tags"]) p.append("expand[]", f);
  return `${endpoint}/api/models?${p}`;
}

export class HubClient {
  constructor(readonly options: HubOptions) {}

  headers(): Headers {
    const h = new Headers({ "user-agent": "skulk" });
    if (this.options.token) h.set("authorization", `Bearer ${this.options.token}`);
    return h;
  }

  fileUrl(repo: string, path: string): string {
    return resolveUrl(this.options, repo, path);
  }

  /**
   * GETs a hub URL and reads its body up to `limit` bytes; network failures, error statuses and oversized
   * bodies become HubErrors naming `repo` (or the hub) and what was asked.
   */
  async #get(
    url: string,
    repo: string,
    what: string,
    limit: number,
    init: { signal?: AbortSignal; method?: string } = {},
  ): Promise<{ res: Response; body: Uint8Array }> {
    let res: Response;
    try {
      res = await fetch(url, {
        method: init.method ?? "GET",
        headers: this.headers(),
        signal: init.signal ?? AbortSignal.timeout(30_000),
      });
    } catch (e) {
      if (init.signal?.aborted) throw e;
      throw new HubError(
        `${repo}: ${what} at ${this.options.endpoint} failed: ${(e as Error).message}`,
        null,
        true,
      );
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw hubStatusError(res.status, repo, what, this.options.token !== null);
    }
    if (init.method === "HEAD") {
      await res.body?.cancel();
      return { res, body: new Uint8Array() };
    }
    const body = await readBounded(res, limit).catch((e) => {
      throw new HubError(
        `${repo}: ${what} at ${this.options.endpoint} failed: ${(e as Error).message}`,
        null,
        true,
      );
    });
    if (!body) {
      throw new HubError(`${repo}: ${what}: the hub's answer is larger than ${limit} bytes`, null, false);
    }
    return { res, body };
  }

  async #getJson(url: string, repo: string, what: string, limit: number, signal?: AbortSignal) {
    const { res, body } = await this.#get(url, repo, what, limit, { signal });
    try {
      return { res, json: JSON.parse(new TextDecoder().decode(body)) as unknown };
    } catch {
      throw new HubError(`${repo}: ${what}: the hub's answer is not JSON`, null, false);
    }
  }

  /** Every file of the repo at the revision, following the listing's pagination. */
  async listFiles(repo: string, signal?: AbortSignal): Promise<HubFile[]> {
    const files: HubFile[] = [];
    let url: string | null = treeUrl(this.options, repo);
    while (url) {
      const { res, json } = await this.#getJson(
        url,
        repo,
        "listing files",
        HUB_LIMITS.listingPageBytes,
        signal,
      );
      try {
        files.push(...parseTree(json));
      } catch (e) {
        throw new HubError(
          `${repo}: the hub's file listing is not one we can read: ${(e as Error).message}`,
          null,
          false,
        );
      }
      url = nextPage(res.headers.get("link"));
    }
    return files;
  }

  /** The hub's models matching `q`, most downloaded first (`GET /api/models`). */
  async search(q: SearchQuery, signal?: AbortSignal): Promise<HubModel[]> {
    const { json } = await this.#getJson(
      searchUrl(this.options.endpoint, q),
      "the hub",
      "searching models",
      HUB_LIMITS.searchBytes,
      signal,
    );
    try {
      return parseSearch(json, q.limit);
    } catch (e) {
      throw new HubError(
        `the hub's search answer is not a list of models: ${(e as Error).message}`,
        null,
        false,
      );
    }
  }

  /** A small JSON file of a repo (config.json), bounded. */
  async readJsonFile(repo: string, path: string, signal?: AbortSignal): Promise<unknown> {
    return (await this.#getJson(
      this.fileUrl(repo, path),
      repo,
      `reading ${path}`,
      HUB_LIMITS.jsonFileBytes,
      signal,
    ))
      .json;
  }

  /** A file's exact size from a HEAD: `X-Linked-Size` (LFS files) first, else the content length. */
  async fileSize(repo: string, path: string, signal?: AbortSignal): Promise<number> {
    const { res } = await this.#get(this.fileUrl(repo, path), repo, `sizing ${path}`, 0, {
      method: "HEAD",
      signal,
    });
    const size = Number(res.headers.get("x-linked-size") ?? res.headers.get("content-length"));
    if (!Number.isSafeInteger(size) || size <= 0) {
      throw new HubError(`${repo}: the hub gave no size for ${path}`, null, false);
    }
    return size;
  }
}

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;
const MLX_IGNORED = [/^original\//, /^metal\//];
const PROJECTOR = /(^|\/)[^/]*mmproj[^/]*\.gguf$/i;

export class FileSelectionError extends Error {
  override name = "FileSelectionError";
}

/** Whether a GGUF card loads a projector (its vision is served by llama.cpp's multimodal path). */
export function usesProjector(card: Pick<ModelCard, "mmproj_file" | "capabilities" | "vision">): boolean {
  return card.mmproj_file !== undefined || card.capabilities.includes("vision") || card.vision !== undefined;
}

/** Projector preference when a repo ships several precisions: smaller first, then the rest by name. */
export function projectorRank(path: string): number {
  const p = path.toLowerCase();
  return ["f16", "bf16", "q8_0", "f32"].findIndex((t) => p.includes(t)) >>> 0;
}

/**
 * Pure: the files of `listing` a card needs. GGUF cards: the pinned file, or every shard of its
 * `-NNNNN-of-MMMMM.gguf` group, plus the projector when the card uses one and `config.json` when
 * present. Other cards: the whole repo except `original/`, `metal/` (and root safetensors for image cards).
 */
export function filesForCard(
  card: Pick<
    ModelCard,
    "model_id" | "gguf_file" | "mmproj_file" | "capabilities" | "vision" | "tasks" | "runtime"
  >,
  listing: HubFile[],
): HubFile[] {
  const byPath = new Map(listing.map((f) => [f.path, f]));
  if (card.gguf_file === undefined) {
    const image = card.tasks.some((t) => t === "TextToImage" || t === "ImageToImage");
    return listing.filter((f) =>
      !MLX_IGNORED.some((r) => r.test(f.path)) &&
      !(image && !f.path.includes("/") && f.path.endsWith(".safetensors"))
    );
  }
  const chosen: HubFile[] = [];
  const shard = card.gguf_file.match(SHARD);
  if (shard) {
    const [, base, , count] = shard;
    for (let i = 1; i <= Number(count); i++) {
      const path = `${base}-${String(i).padStart(5, "0")}-of-${count}.gguf`;
      const f = byPath.get(path);
      if (!f) {
        throw new FileSelectionError(
          `${card.model_id}: the hub lists no ${path} (shard ${i} of ${Number(count)} of ${card.gguf_file})`,
        );
      }
      chosen.push(f);
    }
  } else {
    const f = byPath.get(card.gguf_file);
    if (!f) {
      throw new FileSelectionError(
        `${card.model_id}: the hub lists no ${card.gguf_file} (the card's pinned GGUF)`,
      );
    }
    chosen.push(f);
  }
  if (usesProjector(card)) {
    const pinned = card.mmproj_file === undefined ? undefined : byPath.get(card.mmproj_file);
    if (card.mmproj_file !== undefined && !pinned) {
      throw new FileSelectionError(
        `${card.model_id}: the hub lists no ${card.mmproj_file} (the card's projector)`,
      );
    }
    const found = pinned ??
      listing.filter((f) => PROJECTOR.test(f.path)).sort((a, b) =>
        projectorRank(a.path) - projectorRank(b.path) || a.path.localeCompare(b.path)
      )[0];
    if (found) chosen.push(found);
  }
  // A speculative drafter kept in the model's own repo comes down with it; one from another repo is a
  // companion the worker fetches as its own download.
  const rt = card.runtime;
  if (rt?.served_spec_draft_file && (rt.served_spec_draft_repo ?? card.model_id) === card.model_id) {
    const draft = byPath.get(rt.served_spec_draft_file);
    if (!draft) {
      throw new FileSelectionError(
        `${card.model_id}: the hub lists no ${rt.served_spec_draft_file} (the card's draft model)`,
      );
    }
    if (!chosen.includes(draft)) chosen.push(draft);
  }
  const config = byPath.get("config.json");
  if (config) chosen.push(config);
  return chosen;
}
