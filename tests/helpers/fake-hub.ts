/**
 * A real HTTP server on loopback in the hub's URL layout (`/{repo}/resolve/main/{file}` with Range, ETag and
 * X-Linked-* headers; `/api/models/{repo}[/tree/main]`; the `/api/models?search=` listing) serving fixture files
 * from disk, with injected faults and private repos.
 * Run as a program (`deno run -A tests/helpers/fake-hub.ts <repo>=<dir> ...`) it prints its URL and serves.
 */
import { createHash } from "node:crypto";
import { join, relative } from "node:path";

export type Fault =
  | { kind: "status"; status: number }
  /** Sends this many bytes of the body, then drops the connection. */
  | { kind: "truncate"; afterBytes: number }
  /** Sends the body at about this many bytes per second. */
  | { kind: "slow"; bytesPerSecond: number }
  /** Sends this many bytes, then nothing more while keeping the connection open. */
  | { kind: "stall"; afterBytes: number }
  /** Flips a byte in the body (the hash check must catch it). */
  | { kind: "corrupt" }
  /** Ignores the Range header and sends the whole file with 200. */
  | { kind: "ignoreRange" };

export interface HubRequest {
  method: string;
  path: string;
  range: string | null;
  authorization: string | null;
  status: number;
}

interface Served {
  size: number;
  sha256: string;
  file: string;
}

export interface FakeHub {
  url: string;
  requests: HubRequest[];
  /** Queues faults for the next requests of one file (`repo/path`), used in order, one per request. */
  fault(repoPath: string, ...faults: Fault[]): void;
  /** A fault applied to every body of this file until cleared (e.g. a steady slow link). */
  always(repoPath: string, fault: Fault | null): void;
  /** Re-reads fixture files (after a test rewrote one). */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

/** What the hub's model listing says of a repo (`GET /api/models`). */
export interface ListedModel {
  downloads?: number;
  likes?: number;
  tags?: string[];
  lastModified?: string;
}

export interface FakeHubOptions {
  /** repo id -> directory whose files form the repo. */
  repos: Record<string, string>;
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** Listing without sha256 (non-LFS entries), to test size-only verification. */
  noHashes?: boolean;
  port?: number;
  /** Listing facts per repo; every repo in `repos` or here is listed by `/api/models` (private ones are not). */
  listed?: Record<string, ListedModel>;
  /** Private repos: each needs `Authorization: Bearer <token>` (401 without one, 403 with another). */
  private?: Record<string, string>;
  /**
   * Entries a hostile hub adds to a repo's listing (`path` as listed, e.g. `../../x`), each served from `file`. A
   * client may send such a path as is and a server normalises it, so the body is served for any request whose path
   * ends with the entry's last part.
   */
  hostile?: Record<string, { path: string; file: string }[]>;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  using f = await Deno.open(path);
  const buf = new Uint8Array(1 << 20);
  for (let n = await f.read(buf); n !== null; n = await f.read(buf)) hash.update(buf.subarray(0, n));
  return hash.digest("hex");
}

async function walk(dir: string, root = dir, out: string[] = []): Promise<string[]> {
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) await walk(p, root, out);
    else if (e.isFile) out.push(relative(root, p));
  }
  return out.sort();
}

function bodyStream(
  file: string,
  start: number,
  end: number,
  fault: Fault | null,
): ReadableStream<Uint8Array> {
  let f: Deno.FsFile | null = null;
  let pos = start;
  let sent = 0;
  let wake: ((v: unknown) => void) | undefined;
  const chunk = fault?.kind === "slow"
    ? Math.max(1, Math.min(64 * 1024, Math.floor(fault.bytesPerSecond / 10)))
    : 1 << 20;
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      f ??= await Deno.open(file);
      if (pos === start) await f.seek(start, Deno.SeekMode.Start);
      if (pos > end) {
        f.close();
        ctrl.close();
        return;
      }
      if (fault?.kind === "truncate" && sent >= fault.afterBytes) {
        f.close();
        ctrl.error(new Error("injected truncation"));
        return;
      }
      if (fault?.kind === "stall" && sent >= fault.afterBytes) {
        await new Promise((r) => (wake = r)); // until the client gives up and cancels
        return;
      }
      let want = Math.min(chunk, end - pos + 1);
      if (fault?.kind === "truncate" || fault?.kind === "stall") {
        want = Math.min(want, fault.afterBytes - sent);
      }
      const buf = new Uint8Array(want);
      let got = 0;
      while (got < want) {
        const n = await f.read(buf.subarray(got));
        if (n === null) break;
        got += n;
      }
      if (fault?.kind === "corrupt" && pos === start && got > 0) buf[0] ^= 0xff;
      if (fault?.kind === "slow") {
        await new Promise((r) => setTimeout(r, (got / fault.bytesPerSecond) * 1000));
      }
      pos += got;
      sent += got;
      ctrl.enqueue(buf.subarray(0, got));
    },
    cancel() {
      wake?.(undefined);
      f?.close();
    },
  }, { highWaterMark: 0 });
}

export async function startFakeHub(opts: FakeHubOptions): Promise<FakeHub> {
  const files = new Map<string, Served>();
  const refresh = async () => {
    files.clear();
    for (const [repo, dir] of Object.entries(opts.repos)) {
      for (const rel of await walk(dir)) {
        const file = join(dir, rel);
        files.set(`${repo}/${rel}`, {
          size: (await Deno.stat(file)).size,
          sha256: await sha256Of(file),
          file,
        });
      }
    }
  };
  await refresh();
  const hostile = new Map<string, { path: string; served: Served }[]>();
  for (const [repo, entries] of Object.entries(opts.hostile ?? {})) {
    hostile.set(
      repo,
      await Promise.all(entries.map(async ({ path, file }) => ({
        path,
        served: { size: (await Deno.stat(file)).size, sha256: await sha256Of(file), file },
      }))),
    );
  }
  const queued = new Map<string, Fault[]>();
  const steady = new Map<string, Fault>();
  const requests: HubRequest[] = [];

  /** The hub's search: id substring (case-insensitive), author, sorted by a numeric field, limited. */
  const listing = (q: URLSearchParams): Response => {
    const ids = new Set([...Object.keys(opts.repos), ...Object.keys(opts.listed ?? {})]);
    const search = (q.get("search") ?? "").toLowerCase();
    const author = q.get("author");
    const sort = (q.get("sort") ?? "downloads") as "downloads" | "likes";
    const dir = q.get("direction") === "1" ? 1 : -1;
    const limit = Number(q.get("limit") ?? 1000);
    const rows = [...ids].filter((id) => !(id in (opts.private ?? {})))
      .filter((id) => id.toLowerCase().includes(search) && (!author || id.split("/")[0] === author))
      .map((id) => {
        const m = opts.listed?.[id] ?? {};
        return {
          _id: createHash("sha1").update(id).digest("hex").slice(0, 24),
          id,
          author: id.split("/")[0],
          downloads: m.downloads ?? 0,
          likes: m.likes ?? 0,
          lastModified: m.lastModified ?? "2026-01-01T00:00:00.000Z",
          tags: m.tags ?? [],
        };
      })
      .sort((a, b) => dir * ((a[sort] ?? 0) - (b[sort] ?? 0)) || a.id.localeCompare(b.id));
    return Response.json(rows.slice(0, limit));
  };

  const handle = (req: Request): Response => {
    const url = new URL(req.url);
    const path = decodeURIComponent(url.pathname);
    if (opts.token && req.headers.get("authorization") !== `Bearer ${opts.token}`) {
      return new Response(JSON.stringify({ error: "Access to this repo is restricted" }), { status: 401 });
    }
    if (path === "/api/models") return listing(url.searchParams);
    const owner = Object.keys(opts.private ?? {}).find((r) =>
      path.startsWith(`/${r}/`) || path.startsWith(`/api/models/${r}/`) || path === `/api/models/${r}`
    );
    if (owner) {
      const auth = req.headers.get("authorization");
      if (auth !== `Bearer ${opts.private![owner]}`) {
        return new Response(JSON.stringify({ error: "Invalid credentials in Authorization header" }), {
          status: auth ? 403 : 401,
        });
      }
    }
    const api = path.match(/^\/api\/models\/(.+?)(?:\/tree\/main)?$/);
    if (api) {
      const repo = api[1];
      const own = [...files.entries()].filter(([k]) => k.startsWith(`${repo}/`)).map(([k, v]) => ({
        path: k.slice(repo.length + 1),
        ...v,
      })).concat((hostile.get(repo) ?? []).map((h) => ({ path: h.path, ...h.served })));
      if (own.length === 0) {
        return new Response(JSON.stringify({ error: "Repository not found" }), { status: 404 });
      }
      if (!path.endsWith("/tree/main")) {
        return Response.json({
          id: repo,
          sha: "0".repeat(40),
          siblings: own.map((f) => ({ rfilename: f.path })),
        });
      }
      return Response.json(own.map((f) => ({
        type: "file",
        oid: createHash("sha1").update(f.path).digest("hex"),
        size: f.size,
        path: f.path,
        ...(opts.noHashes ? {} : { lfs: { oid: f.sha256, size: f.size, pointerSize: 134 } }),
      })));
    }
    const m = path.match(/^\/(.+)\/resolve\/main\/(.+)$/);
    const last = path.split("/").at(-1);
    const served = (m ? files.get(`${m[1]}/${m[2]}`) : undefined) ??
      [...hostile.values()].flat().find((h) => h.path.split("/").at(-1) === last)?.served;
    if (!served) return new Response("Entry not found", { status: 404 });
    const key = m ? `${m[1]}/${m[2]}` : path;
    const fault = queued.get(key)?.shift() ?? steady.get(key) ?? null;
    if (fault?.kind === "status") return new Response(`injected ${fault.status}`, { status: fault.status });
    const headers = new Headers({
      "accept-ranges": "bytes",
      "etag": `"${served.sha256}"`,
      "x-linked-etag": `"${served.sha256}"`,
      "x-linked-size": String(served.size),
      "content-type": "application/octet-stream",
    });
    let start = 0;
    let end = served.size - 1;
    let status = 200;
    const range = req.headers.get("range")?.match(/^bytes=(\d+)-(\d*)$/);
    if (range && fault?.kind !== "ignoreRange") {
      start = Number(range[1]);
      if (range[2]) end = Math.min(end, Number(range[2]));
      if (start >= served.size) {
        headers.set("content-range", `bytes */${served.size}`);
        return new Response(null, { status: 416, headers });
      }
      status = 206;
      headers.set("content-range", `bytes ${start}-${end}/${served.size}`);
    }
    headers.set("content-length", String(end - start + 1));
    if (req.method === "HEAD") return new Response(null, { status, headers });
    return new Response(bodyStream(served.file, start, end, fault), { status, headers });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: opts.port ?? 0, onListen: () => {} }, (req) => {
    const res = handle(req);
    const url = new URL(req.url);
    requests.push({
      method: req.method,
      path: decodeURIComponent(url.pathname),
      range: req.headers.get("range"),
      authorization: req.headers.get("authorization"),
      status: res.status,
    });
    return res;
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    requests,
    fault: (key, ...faults) => queued.set(key, [...(queued.get(key) ?? []), ...faults]),
    always: (key, fault) => (fault ? steady.set(key, fault) : steady.delete(key)),
    refresh,
    close: () => server.shutdown(),
  };
}

if (import.meta.main) {
  const repos = Object.fromEntries(
    Deno.args.filter((a) => a.includes("=")).map((a) => a.split("=", 2) as [string, string]),
  );
  const hub = await startFakeHub({
    repos,
    port: Number(Deno.env.get("FAKE_HUB_PORT") ?? 0),
    noHashes: Deno.env.get("FAKE_HUB_NO_HASHES") === "1",
  });
  console.log(hub.url);
}
