/**
 * Peers' trust boundary (issue 14) on real daemons: with an API key the cluster key is a generated secret no
 * one can derive, refusals name nothing of ours, join tokens form a cluster, and peer bodies are bounded.
 */
import { afterAll, describe, expect, it } from "vitest";
import { makeEvent } from "../../src/cluster/events.ts";
import { H } from "../../src/cluster/peers.ts";
import { VERSION } from "../../src/version.ts";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { signedPost, waitFor } from "../helpers/multinode.ts";

const KEY_A = "key-of-node-a-0123456789";
const KEY_B = "key-of-node-b-9876543210";
const NS = "lab-7x";
const EMPTY_GOSSIP = { statuses: [], readings: [], digest: { statuses: {}, readings: {} } };

const running: Daemon[] = [];
afterAll(async () => {
  await Promise.all(running.map((d) => d.kill()));
});

async function node(args: string[], env: Record<string, string> = {}, dataDir?: string): Promise<Daemon> {
  const d = await startDaemon({
    args: ["--no-mdns", "--no-worker", ...args],
    env,
    dataDir,
    timeoutMs: 60_000,
  });
  running.push(d);
  return d;
}

async function authed<T>(url: string, key: string): Promise<T> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  return await res.json() as T;
}

function vmRssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}

function storedSecret(dataDir: string): string {
  return (JSON.parse(Deno.readTextFileSync(`${dataDir}/cluster.json`)) as { secret: string }).secret;
}

describe("a node with an API key and no cluster secret", () => {
  let a: Daemon;

  it("refuses peers signed with the namespace-derived key, naming nothing of ours", async () => {
    a = await node(["--namespace", NS], { SKULK_API_KEY: KEY_A });
    for (
      const [path, body] of [
        ["submit", { event: makeEvent("TestEvent") }],
        ["restart", {}],
        ["gossip", EMPTY_GOSSIP],
      ] as const
    ) {
      // The derived key: what anyone who heard the namespace (a 403 used to name it; mDNS announces it) holds.
      const res = await signedPost(a.url, path, body, { namespace: NS });
      expect(res.status, `forged ${path}`).toBe(403);
      expect(res.headers.get(H.refusal)).toBe("key");
      await res.body?.cancel();
    }
    // A peer that guessed the namespace wrong learns only that it is wrong, not ours.
    const wrongNs = await signedPost(a.url, "gossip", EMPTY_GOSSIP, { namespace: "guess" });
    expect(wrongNs.status).toBe(403);
    const text = await wrongNs.text();
    expect(text).toMatch(/namespace 'guess'/);
    expect(text).not.toContain(NS);
    // Our own log says everything, ours included.
    await waitFor("the refusal logged", () => /refused a peer: .*namespace 'guess'.*lab-7x/.test(a.log()));
  });

  it("generates a secret of 32 random bytes, kept 0600 in its data dir, and says how others join", async () => {
    const file = `${a.dataDir}/cluster.json`;
    expect(Deno.statSync(file).mode! & 0o777).toBe(0o600);
    const secret = storedSecret(a.dataDir);
    const bytes = atob(secret.replaceAll("-", "+").replaceAll("_", "/"));
    expect(bytes.length).toBe(32);
    expect(a.log()).toMatch(/generated this cluster's secret.*skulk cluster token/);
    const ok = await signedPost(a.url, "gossip", EMPTY_GOSSIP, { namespace: NS, secret });
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
  });

  it("reuses the stored secret at the next start", async () => {
    const secret = storedSecret(a.dataDir);
    expect(await a.stop()).toBe(0);
    a = await node(["--namespace", NS], { SKULK_API_KEY: KEY_A }, a.dataDir);
    expect(storedSecret(a.dataDir)).toBe(secret);
    const ok = await signedPost(a.url, "gossip", EMPTY_GOSSIP, { namespace: NS, secret });
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
  });

  it("lets an explicit SKULK_CLUSTER_SECRET win over the stored one", async () => {
    const explicit = "an-explicit-cluster-secret-of-some-length";
    await a.stop();
    a = await node(["--namespace", NS], { SKULK_API_KEY: KEY_A, SKULK_CLUSTER_SECRET: explicit }, a.dataDir);
    const stored = await signedPost(a.url, "gossip", EMPTY_GOSSIP, {
      namespace: NS,
      secret: storedSecret(a.dataDir),
    });
    expect(stored.status).toBe(403);
    await stored.body?.cancel();
    const ok = await signedPost(a.url, "gossip", EMPTY_GOSSIP, { namespace: NS, secret: explicit });
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
  });
});

describe("join tokens", () => {
  it("join a second node (another API key) to the first's cluster, with the daemon running or stopped", async () => {
    const a = await node(["--namespace", NS], { SKULK_API_KEY: KEY_A });
    const running = await skulk(["cluster", "token", "--data-dir", a.dataDir]);
    expect(running.code, running.stderr).toBe(0);
    const token = running.stdout.trim();
    expect(token).not.toContain(storedSecret(a.dataDir)); // encoded, not pasted in the clear
    const b = await node(["--join", token], { SKULK_API_KEY: KEY_B });
    expect(storedSecret(b.dataDir)).toBe(storedSecret(a.dataDir));
    type View = { session: { master: string } | null; peers: unknown[] };
    const oneCluster = (bUrl: string) => async () => {
      const [va, vb] = await Promise.all([
        authed<View>(`${a.url}/cluster/view`, KEY_A),
        authed<View>(`${bUrl}/cluster/view`, KEY_B),
      ]);
      return va.peers.length === 1 && vb.peers.length === 1 && va.session !== null &&
        va.session.master === vb.session?.master;
    };
    await waitFor("a and b in one cluster under one master", oneCluster(b.url), 60_000);
    expect(b.log()).toMatch(/joined namespace lab-7x through 127\.0\.0\.1:\d+ with a join token/);

    // b keeps the joined secret, namespace and peer: restarted without the token, it rejoins.
    await b.stop();
    const again = await node([], { SKULK_API_KEY: KEY_B }, b.dataDir);
    await waitFor("b back in a's cluster without the token", oneCluster(again.url), 60_000);

    // The same token with a's daemon stopped: it is read from the data dir.
    await a.stop();
    const stopped = await skulk(["cluster", "token", "--data-dir", a.dataDir]);
    expect(stopped.code, stopped.stderr).toBe(0);
    expect(stopped.stdout.trim()).toBe(token);
  });

  it("refuses a damaged token and a namespace that contradicts it, without echoing the token", async () => {
    const dir = tempDir();
    const bad = await skulk(["run", "--no-mdns", "--data-dir", dir, "--join", "skulk-join1.bm90IGpzb24"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/cluster\.join .*damaged/);
    const other = await skulk(["run", "--no-mdns", "--data-dir", dir, "--join", "not-a-token"]);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/skulk cluster token/);
    expect(other.stderr).not.toContain("not-a-token");
  });

  it("refuses to start on a damaged cluster.json, naming it (never a new secret in silence)", async () => {
    const dir = tempDir();
    Deno.writeTextFileSync(`${dir}/cluster.json`, "{half a fi");
    const out = await skulk(["run", "--no-mdns", "--no-worker", "--api-port", "0", "--data-dir", dir], {
      SKULK_API_KEY: KEY_A,
    });
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(`${dir}/cluster.json is damaged`);
  });

  it("has no token to print for a zero-config node (it trusts its LAN)", async () => {
    const d = await node([]);
    const out = await skulk(["cluster", "token", "--data-dir", d.dataDir]);
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/no cluster secret/);
  });
});

/**
 * Sends a 400 MB peer body with a bad signature over a raw socket and returns the status and how long the
 * answer took; stops writing (closes) once an answer arrives.
 */
async function hugePeerPost(
  port: number,
  chunked: boolean,
): Promise<{ status: number; ms: number; sent: number }> {
  const total = 400_000_000;
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const enc = new TextEncoder();
  const head = [
    "POST /cluster/peer/gossip HTTP/1.1",
    `host: 127.0.0.1:${port}`,
    "content-type: application/json",
    chunked ? "transfer-encoding: chunked" : `content-length: ${total}`,
    `${H.node}: forger`,
    `${H.version}: ${VERSION}`,
    `${H.namespace}: default`,
    `${H.time}: ${Date.now()}`,
    `${H.nonce}: 00`,
    `${H.signature}: ${"0".repeat(64)}`,
    "",
    "",
  ].join("\r\n");
  const t0 = performance.now();
  await conn.write(enc.encode(head));
  let answered = false;
  const reply = (async () => {
    const buf = new Uint8Array(4096);
    let text = "";
    while (!text.includes("\r\n\r\n")) {
      const n = await conn.read(buf).catch(() => null);
      if (n === null) break;
      text += new TextDecoder().decode(buf.subarray(0, n));
    }
    answered = true;
    return { text, ms: performance.now() - t0 };
  })();
  const chunk = new Uint8Array(1 << 20).fill(0x20);
  const framed = chunked
    ? new Uint8Array([...enc.encode(`${chunk.length.toString(16)}\r\n`), ...chunk, ...enc.encode("\r\n")])
    : chunk;
  let sent = 0;
  const writer = (async () => {
    try {
      while (sent < total && !answered) {
        // write() may take part of a buffer; the rest must follow or the chunked framing breaks.
        for (let at = 0; at < framed.length;) at += await conn.write(framed.subarray(at));
        sent += chunk.length;
      }
    } catch { /* the node closed the connection, or we did once it answered */ }
  })();
  const { text, ms } = await reply;
  try {
    conn.close(); // a write blocked on a node that stopped reading fails now
  } catch { /* already closed */ }
  await writer;
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), ms, sent };
}

describe("peer bodies", () => {
  it("refuses a 400 MB body with a bad signature quickly and without growing the node", async () => {
    const d = await node([], { SKULK_API_KEY: KEY_A });
    // Settle: the first requests warm up the node's code paths.
    await (await fetch(`${d.url}/healthz`)).body?.cancel();
    const before = vmRssKb(d.pid);
    for (const chunked of [false, true, false, true]) {
      const r = await hugePeerPost(d.port, chunked);
      expect(r.status, `chunked=${chunked}`).toBe(413);
      expect(r.ms, `chunked=${chunked} answered after ${Math.round(r.ms)} ms`).toBeLessThan(10_000);
      // Refused by its declared length before any byte of it, or at the limit (4 MiB) when chunked.
      expect(r.sent).toBeLessThan(64 << 20);
    }
    const grown = (vmRssKb(d.pid) - before) / 1024;
    expect(grown, `RSS grew by ${grown.toFixed(1)} MB`).toBeLessThan(48);
    // Still serving peers and clients.
    const health = await fetch(`${d.url}/healthz`);
    expect(health.status).toBe(200);
    await health.body?.cancel();
  });
});

describe("answers from peers", () => {
  it("ignores an answer not signed with the cluster key: holding an address does not make a member", async () => {
    const forgedId = "12D3KooWForgedForgedForgedForgedForgedForgedForged";
    let asked = 0;
    // Answers every peer request with a status claiming to be a forced master far ahead in the log.
    const fake: Deno.HttpServer<Deno.NetAddr> = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      async (req): Promise<Response> => {
        asked++;
        await req.body?.cancel();
        return Response.json({
          statuses: [{
            nodeId: forgedId,
            hb: Date.now(),
            startedAt: 0,
            forceMaster: true,
            lastIdx: 10_000,
            apiAddress: `127.0.0.1:${fake.addr.port}`,
            session: { master: forgedId, clock: 99 },
          }],
          readings: [],
          digest: { statuses: {}, readings: {} },
        });
      },
    );
    try {
      const d = await node(["--peer", `127.0.0.1:${fake.addr.port}`], { SKULK_API_KEY: KEY_A });
      // Several gossip rounds (500 ms apart) with the fake address.
      await waitFor("gossip with the fake address", () => asked >= 5);
      const v = await authed<{ peers: { nodeId: string }[]; session: { master: string } | null }>(
        `${d.url}/cluster/view`,
        KEY_A,
      );
      expect(v.peers.map((p) => p.nodeId)).not.toContain(forgedId);
      expect(v.session?.master).not.toBe(forgedId);
      await waitFor("the refusal logged", () => /answered without our cluster key's signature/.test(d.log()));
    } finally {
      await fake.shutdown();
    }
  });
});
