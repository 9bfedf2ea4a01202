/**
 * Forwarded requests between nodes (issue 14): a forward carries no client credential and is signed as a
 * peer request; two nodes with different API keys, joined by a token, serve each other's chat and realtime.
 */
import { encodeWav } from "../../src/audio/pcm.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clusterKey,
  localIdentity,
  ReplayGuard,
  signedHeaders,
  verifyRequest,
} from "../../src/cluster/peers.ts";
import { TelemetryView } from "../../src/cluster/telemetry.ts";
import { forwardRequest } from "../../src/serving/forward.ts";
import { untag } from "../../src/cluster/tagged.ts";
import { localCardWire, registerCard, singleNodeInstance, type WireState } from "../helpers/cluster.ts";
import { type Daemon, skulk, startDaemon } from "../helpers/daemon.ts";
import { waitFor } from "../helpers/multinode.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { sendManualTurn, tinyWhisperModel, whisperCardWire, whisperServerBinary } from "../helpers/speech.ts";
import { fixtureReading } from "../helpers/telemetry.ts";

describe("forwardRequest", () => {
  it("sends no client credential and signs the request as a peer", async () => {
    const key = await clusterKey("a-cluster-secret-of-at-least-32-characters", "default");
    const guard = new ReplayGuard();
    const seen: { headers: Headers; ok: boolean; from: string | null; body: string }[] = [];
    // Stands in for the serving node: records what arrives and checks it as that node would.
    const target = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
      const body = new Uint8Array(await req.arrayBuffer());
      const url = new URL(req.url);
      const v = await verifyRequest(
        key,
        localIdentity("node-b", "default"),
        { method: req.method, path: url.pathname + url.search, headers: req.headers, body },
        Date.now(),
        guard,
      );
      seen.push({
        headers: req.headers,
        ok: v.ok,
        from: v.ok ? v.nodeId : null,
        body: new TextDecoder().decode(body),
      });
      return Response.json({ answered: true });
    });
    try {
      const telemetry = new TelemetryView();
      const reading = await fixtureReading("plain-server");
      telemetry.offer(
        { ...reading, nodeId: "node-b", apiAddress: `127.0.0.1:${target.addr.port}` },
        1,
        Date.now(),
      );
      const me = localIdentity("node-a", "default");
      const ctx = {
        nodeId: "node-a",
        telemetry,
        cluster: {
          sign: (m: string, p: string, b: Uint8Array) => signedHeaders(key, me, m, p, b, Date.now()),
        },
        config: { forwardConnectTimeout: 3, forwardSilenceTimeout: 15 },
      };
      const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "secret prompt" }] });
      const client = () =>
        new Request("http://127.0.0.1:1/v1/chat/completions?probe=1", {
          method: "POST",
          headers: {
            authorization: "Bearer the-clients-key-0123456789",
            "x-api-key": "the-clients-key-0123456789",
            "proxy-authorization": "Basic Zm9vOmJhcg==",
            cookie: "session=abc",
            "content-type": "application/json",
            "x-request-id": "req-1",
          },
          body,
        });
      // Two identical requests at once: each gets its own signature (the replay guard takes both).
      const answers = await Promise.all([
        forwardRequest(ctx, "node-b", client(), body),
        forwardRequest(ctx, "node-b", client(), body),
      ]);
      for (const a of answers) {
        expect(a instanceof Response && a.status).toBe(200);
        if (a instanceof Response) await a.body?.cancel();
      }
      expect(seen).toHaveLength(2);
      for (const s of seen) {
        for (const h of ["authorization", "x-api-key", "proxy-authorization", "cookie"]) {
          expect(s.headers.get(h), h).toBeNull();
        }
        expect(JSON.stringify([...s.headers])).not.toContain("the-clients-key");
        expect(s.headers.get("content-type")).toBe("application/json");
        expect(s.headers.get("x-request-id")).toBe("req-1");
        expect(s.headers.get("x-skulk-forwarded-by")).toBe("node-a");
        expect(s.ok).toBe(true);
        expect(s.from).toBe("node-a");
        expect(s.body).toBe(body);
      }
    } finally {
      await target.shutdown();
    }
  });
});

const KEY_A = "key-of-node-a-0123456789";
const KEY_B = "key-of-node-b-9876543210";
const CHAT = "skulk-test/forward-tiny";
const STT = "skulk-test/forward-whisper";

async function authed(url: string, key: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${key}`);
  return await fetch(url, { ...init, headers });
}

describe("two nodes with different API keys, joined by a token", () => {
  let a: Daemon;
  let b: Daemon;

  beforeAll(async () => {
    a = await startDaemon({
      args: ["--no-mdns"],
      env: {
        SKULK_API_KEY: KEY_A,
        SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
        SKULK_WHISPER_SERVER_BIN: await whisperServerBinary(),
      },
      timeoutMs: 60_000,
    });
    const token = await skulk(["cluster", "token", "--data-dir", a.dataDir]);
    expect(token.code, token.stderr).toBe(0);
    b = await startDaemon({
      args: ["--no-mdns", "--no-worker", "--join", token.stdout.trim()],
      env: { SKULK_API_KEY: KEY_B },
      timeoutMs: 60_000,
    });
    const instances = [
      singleNodeInstance(a.nodeId, localCardWire(CHAT, await tinyModel())),
      singleNodeInstance(a.nodeId, whisperCardWire(STT, await tinyWhisperModel())),
    ];
    await waitFor("one master for a and b", async () => {
      const views = await Promise.all([
        authed(`${a.url}/cluster/view`, KEY_A).then((r) => r.json()),
        authed(`${b.url}/cluster/view`, KEY_B).then((r) => r.json()),
      ]);
      return views.every((v) => v.session?.master && v.session.master === views[0].session.master);
    }, 60_000);
    // POST /instance serves catalogue models only: register the cards first, signed with a's generated secret.
    const { secret } = JSON.parse(await Deno.readTextFile(`${a.dataDir}/cluster.json`));
    for (const instance of instances) {
      const shard = Object.values(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
      await registerCard([a], untag(shard).modelCard, { secret, apiKey: KEY_A });
      const res = await authed(`${a.url}/instance`, KEY_A, {
        method: "POST",
        body: JSON.stringify({ instance }),
      });
      expect(res.status, await res.text()).toBe(200);
    }
    const runners = instances.map((i) => Object.keys(i.MlxRingInstance.shardAssignments.runnerToShard)[0]);
    await waitFor("both runners ready, seen from b", async () => {
      const s = await (await authed(`${b.url}/state`, KEY_B)).json() as WireState;
      return runners.every((r) => Object.keys(s.runners?.[r] ?? {})[0] === "RunnerReady");
    }, 180_000);
    // b forwards to a's API address, which it learns from a's telemetry.
    await waitFor("b knows a's address", async () => {
      const s = await (await authed(`${b.url}/state`, KEY_B)).json() as WireState;
      return Object.keys(s.lastSeen ?? {}).length === 2;
    }, 60_000);
  }, 300_000);
  afterAll(async () => {
    await Promise.all([b?.kill(), a?.kill()]);
  });

  it("serves a chat through b (b's key), although a refuses b's key", async () => {
    const direct = await authed(`${a.url}/v1/models`, KEY_B);
    expect(direct.status).toBe(401);
    await direct.body?.cancel();
    const res = await authed(`${b.url}/v1/chat/completions`, KEY_B, {
      method: "POST",
      body: JSON.stringify({ model: CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(JSON.parse(text).choices[0].message.content.length).toBeGreaterThan(0);
    const streamed = await authed(`${b.url}/v1/chat/completions`, KEY_B, {
      method: "POST",
      body: JSON.stringify({
        model: CHAT,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 4,
        stream: true,
      }),
    });
    expect(streamed.status).toBe(200);
    expect((await streamed.text()).trimEnd().endsWith("data: [DONE]")).toBe(true);
    // Without b's key, b forwards nothing.
    const anonymous = await fetch(`${b.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
    });
    expect(anonymous.status).toBe(401);
    await anonymous.body?.cancel();
  });

  it("refuses a forged forward to a (forwarded-by header without a valid signature)", async () => {
    const res = await fetch(`${a.url}/v1/models`, {
      headers: { "x-skulk-forwarded-by": b.nodeId, "x-skulk-node": b.nodeId },
    });
    expect(res.status).toBe(401);
    await res.body?.cancel();
  });

  it("ignores a chosen instance that a client, not a signed peer, names", async () => {
    // A client with a's own key may not pick the instance (x-skulk-instance is a peer's word, taken only
    // on a signed forward): the bogus id is ignored and a's balancer serves the request.
    const res = await authed(`${a.url}/v1/chat/completions`, KEY_A, {
      method: "POST",
      headers: { "x-skulk-forwarded-by": b.nodeId, "x-skulk-instance": "not-an-instance" },
      body: JSON.stringify({ model: CHAT, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(text).not.toContain("not-an-instance");
  });

  it("runs a realtime session through b with b's key", async () => {
    // A second of a tone: the tiny random-weight whisper transcribes anything; the route is what is tested.
    const tone = Float32Array.from(
      { length: 16_000 },
      (_, i) => 0.3 * Math.sin(2 * Math.PI * 220 * i / 16_000),
    );
    const hello = encodeWav({ samples: tone, sampleRate: 16_000 });
    const url = `${b.url.replace("http", "ws")}/v1/realtime?model=${STT}`;
    const anonymous = new WebSocket(url);
    expect(
      await new Promise((
        r,
      ) => ((anonymous.onopen = () => r("open")), (anonymous.onerror = () => r("refused")))),
    ).toBe("refused");
    const ws = new WebSocket(url, {
      headers: { authorization: `Bearer ${KEY_B}` },
    });
    const types: string[] = [];
    const done = new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.onerror = () => reject(new Error("socket error"));
      ws.onclose = (e) => reject(new Error(`closed ${e.code} ${e.reason} after ${types.join(", ")}`));
      ws.onmessage = (e) => {
        const ev = JSON.parse(e.data);
        types.push(ev.type);
        if (ev.type === "session.created") sendManualTurn(ws, hello);
        if (ev.type === "conversation.item.input_audio_transcription.completed") resolve(ev);
      };
    });
    try {
      const completed = await done;
      expect(typeof completed.transcript).toBe("string");
      expect(types).toContain("input_audio_buffer.committed");
    } finally {
      ws.onclose = null;
      ws.close();
    }
  });
});
