/**
 * The dashboard's one door to the node's API: typed fetch helpers that turn upstream's error envelope
 * into an ApiFailure carrying the server's own message and the field it names.
 */
import type { stateToWire } from "../../api/wire/state.ts";
import type { SettingView } from "../../config/edit.ts";
import type { ModelListEntry } from "../../models/catalog.ts";
import type { HubModel } from "../../models/hub.ts";

export type ClusterStateWire = ReturnType<typeof stateToWire>;

/** The live `/state` poll main.tsx runs and every view reads. */
export interface Live {
  state: ClusterStateWire | null;
  error: string | null;
  /** The node refused the request for want of its API key (it was started with `api.key`). */
  needsKey: boolean;
  updatedAt: number | null;
  localNodeId: string | null;
  refresh: () => void;
}
export type { HubModel, ModelListEntry, SettingView };

/**
 * `POST /models/add` for a hub repo (`addHubModel` in src/app/models.ts): the catalogue entry the node now lists,
 * with what the hub offered. Spelled out here because that module's imports (SQLite, the GGUF reader) are not
 * the browser's.
 */
export interface HubAdded extends ModelListEntry {
  gguf_file: string | null;
  available_quants: string[];
  servable: { ok: boolean; reason: string | null };
}

export interface Preview {
  model_id: string;
  sharding: string;
  instance_meta: string;
  instance: Record<string, unknown> | null;
  memory_delta_by_node: Record<string, number> | null;
  error: string | null;
  context_token_limit?: number | null;
  expected_tokens_per_second?: number | null;
  expected_speed?: number | string | null;
  estimated_tokens_per_second?: number | null;
}

export interface ConfigView {
  config: Record<string, unknown>;
  configPath: string;
  fileExists: boolean;
  effective: { has_hf_token: boolean; settings?: SettingView[]; cluster?: Record<string, unknown> };
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly body: unknown = null,
  ) {
    super(message);
    this.name = "ApiFailure";
  }
}

/** Reads an error response: upstream's envelope when there is one, the status line otherwise. */
export async function failure(res: Response): Promise<ApiFailure> {
  const text = await res.text().catch(() => "");
  try {
    const body = JSON.parse(text) as {
      error?: { message?: string; param?: string | null };
      detail?: unknown;
    };
    if (body.error?.message) {
      return new ApiFailure(res.status, body.error.message, body.error.param ?? null, body);
    }
    if (body.detail) {
      return new ApiFailure(
        res.status,
        typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail),
        null,
        body,
      );
    }
  } catch { /* not JSON */ }
  return new ApiFailure(
    res.status,
    `${res.status} ${res.statusText}${text ? `: ${text.slice(0, 200)}` : ""}`,
  );
}

const KEY_STORE = "skulk.apiKey";

/** The API key this browser was given for a node started with `api.key`, if any. */
export function apiKey(): string | null {
  try {
    return localStorage.getItem(KEY_STORE);
  } catch {
    return null;
  }
}

export function setApiKey(key: string | null): void {
  if (key) localStorage.setItem(KEY_STORE, key);
  else localStorage.removeItem(KEY_STORE);
}

/** Headers every request carries: JSON, and the bearer key when one is set. */
export function headers(extra: HeadersInit = {}): Record<string, string> {
  const key = apiKey();
  return {
    "content-type": "application/json",
    ...(key ? { authorization: `Bearer ${key}` } : {}),
    ...(extra as Record<string, string>),
  };
}

export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, { ...init, headers: headers(init.headers) });
  } catch (e) {
    throw new ApiFailure(0, `the node did not answer (${(e as Error).message}); is it running?`);
  }
  if (!res.ok) throw await failure(res);
  return await res.json() as T;
}

export const getJson = <T>(path: string) => api<T>(path);
export const sendJson = <T>(method: string, path: string, body?: unknown) =>
  api<T>(path, { method, body: body === undefined ? undefined : JSON.stringify(body) });
