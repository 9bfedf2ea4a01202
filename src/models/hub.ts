/**
 * The Hugging Face hub client (`HF_ENDPOINT`, `HF_TOKEN`, `resolve/main` URLs, the tree listing) and the
 * pure choice of which repo files a card needs: the pinned GGUF or its shard group, its projector, or MLX patterns.
 */
import { z } from "zod";
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

  /** Every file of the repo at the revision, following the listing's pagination. */
  async listFiles(repo: string, signal?: AbortSignal): Promise<HubFile[]> {
    const files: HubFile[] = [];
    let url: string | null = treeUrl(this.options, repo);
    while (url) {
      let res: Response;
      try {
        res = await fetch(url, { headers: this.headers(), signal: signal ?? AbortSignal.timeout(30_000) });
      } catch (e) {
        if (signal?.aborted) throw e;
        throw new HubError(
          `${repo}: listing files at ${this.options.endpoint} failed: ${(e as Error).message}`,
          null,
          true,
        );
      }
      if (!res.ok) {
        await res.body?.cancel();
        throw hubStatusError(res.status, repo, "listing files", this.options.token !== null);
      }
      files.push(...parseTree(await res.json()));
      url = nextPage(res.headers.get("link"));
    }
    return files;
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
function projectorRank(path: string): number {
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
