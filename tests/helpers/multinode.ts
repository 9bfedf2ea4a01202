/**
 * Helpers for multi-node tests: polling until a condition holds, reading a node's cluster view and log,
 * and sending a signed peer request the way a node would.
 */
import { clusterKey, signedHeaders } from "../../src/cluster/peers.ts";
import type { ClusterView } from "../../src/cluster/handle.ts";
import { VERSION } from "../../src/version.ts";

export async function waitFor<T>(
  what: string,
  f: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 30_000,
  everyMs = 200,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < end) {
    try {
      const v = await f();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ""}`);
}

export async function json<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
  const body = await res.json();
  if (!res.ok) throw new Error(`${url}: ${res.status} ${JSON.stringify(body)}`);
  return body as T;
}

export const view = (url: string) => json<ClusterView>(`${url}/cluster/view`);

export async function eventIds(url: string): Promise<string[]> {
  const rows = await json<{ idx: number; event: Record<string, { eventId: string }> }[]>(
    `${url}/events?limit=10000`,
  );
  return rows.map((r) => Object.values(r.event)[0].eventId);
}

/** Waits until every node names the same master; returns its id. */
export async function oneMaster(urls: string[], timeoutMs = 30_000): Promise<string> {
  return await waitFor(`one master among ${urls.length} nodes`, async () => {
    const views = await Promise.all(urls.map(view));
    const masters = new Set(views.map((v) => v.session?.master ?? "none"));
    const leaders = views.filter((v) => v.role === "master");
    return masters.size === 1 && leaders.length === 1 && !masters.has("none") ? leaders[0].nodeId : null;
  }, timeoutMs);
}

/**
 * Waits until every node lists all of `urls`' nodes as voters: only then does the cluster tolerate losing
 * a minority of them (a node becomes a voter once it follows the master and has caught up).
 */
export async function allVoters(urls: string[], timeoutMs = 30_000): Promise<string[]> {
  return await waitFor(`all ${urls.length} nodes voting`, async () => {
    const views = await Promise.all(urls.map(view));
    const ids = views.map((v) => v.nodeId).sort();
    return views.every((v) => JSON.stringify([...v.voters].sort()) === JSON.stringify(ids)) ? ids : null;
  }, timeoutMs);
}

/** Waits until every node has applied the same last index; returns it. */
export async function sameLog(urls: string[], timeoutMs = 30_000): Promise<number> {
  return await waitFor("every node at the same log index", async () => {
    const idx = await Promise.all(urls.map(async (u) => (await view(u)).lastIdx));
    return idx.every((i) => i === idx[0]) ? idx[0] + 1 || true : null;
  }, timeoutMs).then((v) => (v === true ? -1 : Number(v) - 1));
}

export async function signedPost(
  url: string,
  path: string,
  body: unknown,
  o: { secret?: string | null; namespace?: string; version?: string; nodeId?: string } = {},
): Promise<Response> {
  const namespace = o.namespace ?? "default";
  const key = await clusterKey(o.secret ?? null, namespace);
  const bytes = new TextEncoder().encode(JSON.stringify(body));
  const full = `/cluster/peer/${path}`;
  const headers = await signedHeaders(
    key,
    { nodeId: o.nodeId ?? "test-peer", namespace, version: o.version ?? VERSION },
    "POST",
    full,
    bytes,
    Date.now(),
  );
  return await fetch(`${url}${full}`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: bytes,
  });
}
