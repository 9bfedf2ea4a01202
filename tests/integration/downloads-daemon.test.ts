/**
 * Downloads through real daemon processes and the real CLI against a loopback hub: resume after `kill -9`
 * mid-download, progress re-advertised from disk after the restart, `skulk models pull/rm`, records in `skulk sql`.
 */
import { createHash } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { DownloadProgress } from "../../src/cluster/downloads.ts";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { json, waitFor } from "../helpers/multinode.ts";
import { fullShard } from "../../src/downloads/manager.ts";
import { Catalog } from "../../src/models/catalog.ts";

const LLAMA = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf";
const SIZE = 4_000_000;

let root: string;
let hub: FakeHub;
let fixture: string;
const daemons: Daemon[] = [];
const dirs: string[] = [];
const nodeDir = () => {
  const d = tempDir("node-");
  dirs.push(d);
  return d;
};

beforeAll(async () => {
  root = tempDir("downloads-daemon-");
  const dir = `${root}/hub`;
  Deno.mkdirSync(dir, { recursive: true });
  const buf = new Uint8Array(SIZE);
  for (let off = 0; off < SIZE; off += 65536) {
    crypto.getRandomValues(buf.subarray(off, Math.min(SIZE, off + 65536)));
  }
  fixture = `${dir}/${FILE}`;
  Deno.writeFileSync(fixture, buf);
  hub = await startFakeHub({ repos: { [LLAMA]: dir } });
});

afterEach(async () => {
  for (const d of daemons.splice(0)) await d.kill();
  hub.always(`${LLAMA}/${FILE}`, null);
  for (const d of dirs.splice(0)) Deno.removeSync(d, { recursive: true });
});

afterAll(async () => {
  await hub?.close();
  Deno.removeSync(root, { recursive: true });
});

const sha = (path: string) => createHash("sha256").update(Deno.readFileSync(path)).digest("hex");

async function daemon(
  dataDir: string,
  env: Record<string, string> = {},
  args: string[] = [],
): Promise<Daemon> {
  const d = await startDaemon({
    dataDir,
    args,
    env: { HF_ENDPOINT: hub.url, SKULK_DOWNLOAD_RETRY_BASE_MS: "20", ...env },
  });
  daemons.push(d);
  return d;
}

async function record(d: Daemon): Promise<DownloadProgress | undefined> {
  const state = await (await fetch(`${d.url}/state`)).json() as {
    downloads: Record<string, DownloadProgress[]>;
  };
  return (state.downloads[d.nodeId] ?? [])[0];
}

async function until<T>(
  what: string,
  f: () => Promise<T | undefined | null | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const size = (p: string) => {
  try {
    return Deno.statSync(p).size;
  } catch {
    return 0;
  }
};

describe("downloads in a real daemon", () => {
  it("resumes by itself after kill -9 mid-download: progress never falls back, and the rest is fetched from the partial's end", async () => {
    const dataDir = nodeDir();
    const partial = `${dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}.partial`;
    hub.always(`${LLAMA}/${FILE}`, { kind: "slow", bytesPerSecond: 1_000_000 });
    let d = await daemon(dataDir);
    const res = await fetch(`${d.url}/store/models/${LLAMA}/download`, { method: "POST" });
    expect(res.status).toBe(200);
    expect((await res.json()).modelId).toBe(LLAMA);
    await until("a partial file with bytes", () => Promise.resolve(size(partial) >= 500_000));
    await d.kill(); // SIGKILL: no shutdown path runs
    daemons.splice(daemons.indexOf(d), 1);
    const kept = size(partial);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(SIZE);

    hub.requests.length = 0;
    const restartedAt = new Date().toISOString();
    d = await daemon(dataDir); // nobody asks again: the node picks up what it was doing
    await until("completion", async () => {
      const r = await record(d);
      return r && "DownloadCompleted" in r;
    });
    const fileReqs = hub.requests.filter((q) => q.path.endsWith(`/resolve/main/${FILE}`));
    expect(fileReqs.map((q) => q.range)).toEqual([`bytes=${kept}-`]);
    const final = `${dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}`;
    expect(sha(final)).toBe(sha(fixture));
    expect(size(partial)).toBe(0);

    // Every record published since the restart counted the bytes already on disk (from the SQLite log).
    const out = await skulk([
      "sql",
      "--json",
      "--data-dir",
      dataDir,
      `SELECT payload FROM events WHERE type = 'NodeDownloadProgress' AND created_at >= '${restartedAt}' ORDER BY idx`,
    ]);
    expect(out.code).toBe(0);
    const since = (JSON.parse(out.stdout) as { payload: string }[])
      .map((row) =>
        (JSON.parse(row.payload) as { NodeDownloadProgress: { downloadProgress: DownloadProgress } })
          .NodeDownloadProgress.downloadProgress
      );
    const bytes = (p: DownloadProgress): number => {
      if ("DownloadCompleted" in p) return p.DownloadCompleted.total.inBytes;
      if ("DownloadPending" in p) return p.DownloadPending.downloaded.inBytes;
      if ("DownloadOngoing" in p) return p.DownloadOngoing.downloadProgress.downloaded.inBytes;
      return -1;
    };
    expect(since.length).toBeGreaterThan(1);
    expect(Object.keys(since[0])[0]).toBe("DownloadPending");
    expect(bytes(since[0])).toBe(kept);
    for (const p of since) expect(bytes(p)).toBeGreaterThanOrEqual(kept);
    expect(Object.keys(since.at(-1)!)[0]).toBe("DownloadCompleted");

    const status = await (await fetch(`${d.url}/store/models/${LLAMA}/download/status`)).json();
    expect(status).toEqual({ modelId: LLAMA, status: "complete", progress: 1, error: null });
    const registry = await (await fetch(`${d.url}/store/registry`)).json();
    expect(
      registry.entries.map((e: { model_id: string; total_bytes: number }) => [e.model_id, e.total_bytes]),
    ).toEqual([[LLAMA, SIZE]]);
  });

  it("POST /download/start and DELETE /download/{node}/{model} sent to one node act on the node they name", async () => {
    const aDir = nodeDir();
    const bDir = nodeDir();
    const a = await daemon(aDir, {}, ["--no-mdns"]);
    const b = await daemon(bDir, {}, ["--no-mdns", "--peer", `127.0.0.1:${a.port}`]);
    await waitFor("each node to know the other", async () => {
      const views = await Promise.all(
        [a, b].map((d) => json<{ topology: { nodes: string[] } }>(`${d.url}/state`)),
      );
      return views.every((v) => v.topology.nodes.length === 2);
    });
    const shardMetadata = fullShard(Catalog.bundled().get(LLAMA)!) as {
      PipelineShardMetadata: Record<string, unknown>;
    };
    hub.requests.length = 0;
    const start = await fetch(`${a.url}/download/start`, {
      method: "POST",
      body: JSON.stringify({ targetNodeId: b.nodeId, shardMetadata }),
    });
    expect(start.status).toBe(200);
    expect(typeof (await start.json()).commandId).toBe("string");
    await waitFor("b to complete the download", async () => {
      const r = await record(b);
      return r && "DownloadCompleted" in r;
    });
    const onB = `${bDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}`;
    expect(sha(onB)).toBe(sha(fixture));
    expect(size(`${aDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}`)).toBe(0); // a fetched nothing
    expect(await record(a)).toBeUndefined();

    const del = await fetch(`${a.url}/download/${b.nodeId}/${LLAMA}`, { method: "DELETE" });
    expect(del.status).toBe(200);
    expect(size(onB)).toBe(0);
    // Donors hold no file: refused before anything is sent on.
    const donor = await fetch(`${a.url}/download/start`, {
      method: "POST",
      body: JSON.stringify({
        targetNodeId: b.nodeId,
        shardMetadata: {
          RpcDonorShardMetadata: {
            ...shardMetadata.PipelineShardMetadata,
            driverNode: a.nodeId,
            rpcHost: "127.0.0.1",
            rpcPort: 50052,
          },
        },
      }),
    });
    expect(donor.status).toBe(400);
    expect((await donor.json()).error.message).toMatch(/donors never download/);
  });

  it("refuses bad requests with clear 4xx", async () => {
    const d = await daemon(nodeDir());
    const bad = await fetch(`${d.url}/download/start`, {
      method: "POST",
      body: JSON.stringify({ targetNodeId: d.nodeId }),
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toMatch(/shardMetadata/);
    const other = await fetch(`${d.url}/download/someone-else/${LLAMA}`, { method: "DELETE" });
    expect(other.status).toBe(404);
    expect(
      (await (await fetch(`${d.url}/store/models/no/such-model/download`, { method: "POST" })).json()).error
        .message,
    )
      .toMatch(/not in the catalogue/);
    expect((await fetch(`${d.url}/store/models/${LLAMA}/download/status`)).status).toBe(404);
    expect((await fetch(`${d.url}/store/models/${LLAMA}`, { method: "DELETE" })).status).toBe(404);
  });

  it("skulk models pull goes through the running daemon, failures show in skulk sql and clear on success; rm deletes", async () => {
    const dataDir = nodeDir();
    const d = await daemon(dataDir, { SKULK_DOWNLOAD_ATTEMPTS: "2" });
    hub.always(`${LLAMA}/${FILE}`, { kind: "status", status: 500 });
    const env = { HF_ENDPOINT: hub.url };
    const failed = await skulk(["models", "pull", LLAMA, "--data-dir", dataDir], env);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/download failed: .*HTTP 500.*gave up after 2 attempts/);
    const sql = await skulk([
      "sql",
      "--data-dir",
      dataDir,
      "--json",
      "SELECT node_id, model_id, error, cleared_at FROM download_failures",
    ]);
    expect(sql.code).toBe(0);
    const rows = JSON.parse(sql.stdout);
    expect(rows.length).toBe(1);
    expect(rows[0].node_id).toBe(d.nodeId);
    expect(rows[0].cleared_at).toBeNull();

    hub.always(`${LLAMA}/${FILE}`, null);
    const ok = await skulk(["models", "pull", LLAMA, "--data-dir", dataDir], env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/complete in/);
    expect(ok.stderr).toMatch(/100%/);
    const after = JSON.parse(
      (await skulk([
        "sql",
        "--data-dir",
        dataDir,
        "--json",
        "SELECT cleared_at, cleared_reason FROM download_failures",
      ])).stdout,
    );
    expect(after.length).toBe(1);
    expect(after[0].cleared_reason).toBe("download completed");

    const rm = await skulk(["models", "rm", LLAMA, "--data-dir", dataDir]);
    expect(rm.code).toBe(0);
    expect(size(`${dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}`)).toBe(0);
    const rec = await record(d);
    expect(rec && Object.keys(rec)[0]).toBe("DownloadPending");
  });

  it("skulk models pull without a daemon downloads directly and resumes an interrupted pull", async () => {
    const dataDir = nodeDir();
    const env = { HF_ENDPOINT: hub.url, SKULK_DATA_DIR: dataDir };
    const partial = `${dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}.partial`;
    Deno.mkdirSync(`${dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF`, { recursive: true });
    Deno.writeFileSync(partial, Deno.readFileSync(fixture).subarray(0, 1_000_000));
    hub.requests.length = 0;
    const out = await skulk(["models", "pull", LLAMA], env);
    expect(out.code).toBe(0);
    expect(sha(`${dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}`)).toBe(sha(fixture));
    expect(hub.requests.filter((q) => q.path.endsWith(FILE)).map((q) => q.range)).toEqual(["bytes=1000000-"]);
  });
});
