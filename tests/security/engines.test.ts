/**
 * Engines' trust boundary on real nodes: `POST /instance` refuses a donor address that would open the
 * unauthenticated ggml-rpc-server beyond one literal address of the donor, a card whose file is not the
 * catalogue's, bad shard shapes and ports outside the band, all before any engine starts; a forged event
 * is stopped again by the worker; a donor on 127.0.0.1 still serves.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeEvent } from "../../src/cluster/events.ts";
import type { Instance } from "../../src/cluster/instances.ts";
import { listensIn } from "../../src/engines/rpc-server.ts";
import { pidAlive, runnerTag, waitForState, type WireState } from "../helpers/cluster.ts";
import { type Daemon, enginePorts, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { json, oneMaster, signedPost, waitFor } from "../helpers/multinode.ts";

const SECRET = "engines-security-test-secret";
const MODEL = "skulk-test/sec-tiny";
const LAYERS = 4;

let a: Daemon; // the driver
let b: Daemon; // the donor
let card: Record<string, unknown> & { modelId: string };
const running: Daemon[] = [];

beforeAll(async () => {
  const env = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), SKULK_CLUSTER_SECRET: SECRET };
  a = await startDaemon({ args: ["--no-mdns"], env, timeoutMs: 40_000 });
  running.push(a);
  b = await startDaemon({ args: ["--no-mdns", "--peer", `127.0.0.1:${a.port}`], env, timeoutMs: 40_000 });
  running.push(b);
  await oneMaster([a.url, b.url], 45_000);
  // a must hold b's telemetry (its interfaces) before it can judge b's donor address.
  await waitFor("both nodes' telemetry on a", async () => {
    const s = await json<WireState>(`${a.url}/state`);
    return Object.keys(s.lastSeen ?? {}).length === 2;
  }, 45_000);
  const master = (await json<{ masterNodeId: string }>(`${a.url}/state`)).masterNodeId;
  const via = master === a.nodeId ? a : b;
  const res = await fetch(`${via.url}/models/add`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model_id: MODEL, gguf_path: await tinyModel({ layers: LAYERS }) }),
  });
  expect(res.status, await res.text()).toBe(200);
  card = await waitFor("the card in a's log", async () => {
    const events = await json<{ event: Record<string, { modelCard?: Record<string, unknown> }> }[]>(
      `${a.url}/events`,
    );
    return events.find((e) => "CustomModelCardAdded" in e.event)?.event.CustomModelCardAdded
      .modelCard as typeof card | undefined;
  });
}, 180_000);

afterAll(async () => {
  await Promise.all(running.map((d) => d.stop()));
  for (const d of running) Deno.removeSync(d.dataDir, { recursive: true });
});

const shardBase = (worldSize: number, deviceRank: number, c: typeof card = card) => ({
  modelCard: c,
  deviceRank,
  worldSize,
  resolvedBackend: "llama_cpp-cpu",
  immediateException: false,
  shouldTimeout: null,
  nLayers: LAYERS,
});

function pool(rpcHost: string, rpcPort: number, endpoint = `${rpcHost}:${rpcPort}`): Instance {
  return {
    LlamaRpcInstance: {
      instanceId: crypto.randomUUID(),
      shardAssignments: {
        modelId: MODEL,
        runnerToShard: {
          [`drv-${rpcPort}`]: {
            PipelineShardMetadata: { ...shardBase(2, 0), startLayer: 0, endLayer: LAYERS },
          },
          [`don-${rpcPort}`]: {
            RpcDonorShardMetadata: {
              ...shardBase(2, 1),
              startLayer: 0,
              endLayer: 0,
              driverNode: a.nodeId,
              rpcHost,
              rpcPort,
            },
          },
        },
        nodeToRunner: { [a.nodeId]: `drv-${rpcPort}`, [b.nodeId]: `don-${rpcPort}` },
      },
      contextTokenLimit: 512,
      driverNode: a.nodeId,
      donorEndpoints: { [b.nodeId]: endpoint },
    },
  };
}

function single(
  c: typeof card,
  ranges: [Daemon, number, number][] = [[a, 0, LAYERS]],
  extra: Record<string, unknown> = {},
): Instance {
  const runners = ranges.map(() => crypto.randomUUID());
  return {
    MlxRingInstance: {
      instanceId: crypto.randomUUID(),
      shardAssignments: {
        modelId: String(c.modelId),
        runnerToShard: Object.fromEntries(ranges.map(([, s, e], i) => [
          runners[i],
          { PipelineShardMetadata: { ...shardBase(ranges.length, i, c), startLayer: s, endLayer: e } },
        ])),
        nodeToRunner: Object.fromEntries(ranges.map(([d], i) => [d.nodeId, runners[i]])),
      },
      contextTokenLimit: 512,
      hostsByNode: {},
      ephemeralPort: 0,
      ...extra,
    },
  } as Instance;
}

async function post(
  instance: Instance,
): Promise<{ status: number; error: { message: string; param: string } }> {
  const res = await fetch(`${a.url}/instance`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ instance }),
  });
  const body = await res.json();
  return { status: res.status, error: body.error };
}

/** A port in the upper engine band nothing listens on (the workers allocate from a pid-derived start). */
function freeBandPort(): number {
  for (;;) {
    const port = 31000 + Math.floor(Math.random() * 999);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch { /* taken: another */ }
  }
}

/** Listening sockets whose owner is a ggml-rpc-server, from `ss -ltnp`. */
function rpcListeners(): string[] {
  const out = new Deno.Command("ss", { args: ["-ltnpH"], stdout: "piped" }).outputSync();
  return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l.includes("ggml-rpc-server"));
}

/** Whether `pid` descends from one of `ancestors` (its parent chain, read from /proc). */
function descendsFrom(pid: number, ancestors: number[]): boolean {
  for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
    if (ancestors.includes(p)) return true;
    try {
      p = Number(Deno.readTextFileSync(`/proc/${p}/status`).match(/^PPid:\s+(\d+)/m)?.[1] ?? 0);
    } catch {
      return false;
    }
  }
  return false;
}

/**
 * ggml-rpc-server listeners this test must never see: any that one of its daemons started, and any bound
 * beyond loopback whoever started it. Other test files may run a loopback donor at the same time.
 */
function forbiddenRpcListeners(): string[] {
  return rpcListeners().filter((l) => {
    const local = l.trim().split(/\s+/)[3] ?? "";
    const pid = Number(l.match(/pid=(\d+)/)?.[1] ?? 0);
    return !/^(127\.[\d.]+|\[::1\]):\d+$/.test(local) || descendsFrom(pid, [a.pid, b.pid]);
  });
}

/** Every process whose command line opens `path` as a model (`-m path`). */
function processesOpening(path: string): number[] {
  const pids: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const args = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0");
      if (args.some((x, i) => x === "-m" && args[i + 1] === path)) pids.push(Number(e.name));
    } catch { /* gone */ }
  }
  return pids;
}

async function noEngines(): Promise<void> {
  expect(await enginePorts(a.dataDir)).toEqual([]);
  expect(await enginePorts(b.dataDir)).toEqual([]);
  expect(forbiddenRpcListeners()).toEqual([]);
  expect(processesOpening("/etc/shadow")).toEqual([]);
  expect(Object.keys((await json<WireState>(`${a.url}/state`)).instances)).toEqual([]);
}

describe("POST /instance and the donor's address", () => {
  it.each([
    ["0", "not a literal IP address"],
    ["0x0", "not a literal IP address"],
    ["0.0.0.0", "IPv4 wildcard"],
    ["::", "IPv6 wildcard"],
    ["[::]", "not a literal IP address"],
    ["::ffff:0.0.0.0", "IPv4-mapped"],
    ["localhost", "not a literal IP address"],
    ["ip6-localhost", "not a literal IP address"],
    ["192.0.2.1", "is not an address of node"],
  ])("refuses rpcHost %j with a 400 naming it, before any engine starts", async (host, why) => {
    const r = await post(pool(host, freeBandPort()));
    expect(r.status, JSON.stringify(r.error)).toBe(400);
    expect(r.error.param).toMatch(/RpcDonorShardMetadata\.rpcHost$/);
    expect(r.error.message).toContain(`'${host}'`);
    expect(r.error.message).toContain(why);
    await noEngines();
  });

  it("refuses a donor port outside the engine band", async () => {
    const r = await post(pool("127.0.0.1", 8080));
    expect(r.status).toBe(400);
    expect(r.error.param).toMatch(/rpcPort$/);
    expect(r.error.message).toContain("8080 is outside the engine band 24000-31999");
    await noEngines();
  });
});

describe("POST /instance and the model it runs", () => {
  it("refuses a card pointing at /etc/shadow, for a catalogue model and for an unknown one", async () => {
    const known = await post(single({ ...card, ggufPath: "/etc/shadow" }));
    expect(known.status).toBe(400);
    expect(known.error.param).toMatch(/modelCard\.ggufPath$/);
    expect(known.error.message).toContain(`differs from the catalogue's card for ${MODEL} in ggufPath`);
    const unknown = await post(single({ ...card, modelId: "evil/shadow", ggufPath: "/etc/shadow" }));
    expect(unknown.status).toBe(400);
    expect(unknown.error.param).toMatch(/shardAssignments\.modelId$/);
    expect(unknown.error.message).toContain("unknown model 'evil/shadow'");
    await noEngines();
  });

  it("refuses overlapping layer ranges, layers past the model and a port outside the band", async () => {
    const overlap = await post(single(card, [[a, 0, 3], [b, 2, LAYERS]]));
    expect(overlap.status).toBe(400);
    expect(overlap.error.message).toContain("contiguous and not overlap");
    const past = await post(single(card, [[a, 0, LAYERS + 4]]));
    expect(past.status).toBe(400);
    expect(past.error.param).toMatch(/endLayer$/);
    const port = await post(single(card, [[a, 0, LAYERS]], { ephemeralPort: 22 }));
    expect(port.status).toBe(400);
    expect(port.error.param).toMatch(/ephemeralPort$/);
    const id = await post(single(card, [[a, 0, LAYERS]], { instanceId: "../../etc" }));
    expect(id.status).toBe(400);
    expect(id.error.param).toMatch(/instanceId$/);
    await noEngines();
  });
});

describe("the worker's second line against a forged event", () => {
  /** Hands an event straight to the master, as a peer holding the cluster secret could. */
  async function forge(type: "InstanceCreated" | "CustomModelCardAdded", payload: Record<string, unknown>) {
    const event = makeEvent(type, payload);
    const res = await signedPost(a.url, "submit", { event }, { secret: SECRET });
    expect(res.status, await res.text()).toBe(200);
  }

  /** The runner's failure as logged (healing may delete a failed pool from /state at once). */
  async function failure(runnerId: string): Promise<string> {
    return await waitFor(`${runnerId} failed`, async () => {
      type Row = {
        event: { RunnerStatusUpdated?: { runnerId: string; runnerStatus: Record<string, unknown> } };
      };
      const rows = await json<Row[]>(`${a.url}/events?limit=10000`);
      const failed = rows.map((r) => r.event.RunnerStatusUpdated).find((u) =>
        u?.runnerId === runnerId && "RunnerFailed" in u.runnerStatus
      );
      return (failed?.runnerStatus.RunnerFailed as { errorMessage: string } | undefined)?.errorMessage;
    }, 60_000);
  }

  /** Deletes every instance (the forged pool's failure makes healing place the model again). */
  async function clear(): Promise<void> {
    await waitFor("no instance and no engine left", async () => {
      const s = await json<WireState>(`${a.url}/state`);
      for (const id of Object.keys(s.instances)) {
        await (await fetch(`${a.url}/instance/${id}`, { method: "DELETE" })).body?.cancel();
      }
      const ports = [...await enginePorts(a.dataDir), ...await enginePorts(b.dataDir)];
      return Object.keys(s.instances).length === 0 && ports.length === 0;
    }, 60_000);
  }

  it("never binds a donor to 0x0, and never opens /etc/shadow", async () => {
    const port = freeBandPort();
    await forge("InstanceCreated", { instance: pool("0x0", port) });
    expect(await failure(`don-${port}`)).toMatch(/ggml-rpc-server was not started: refusing to bind '0x0'/);
    expect(rpcListeners().filter((l) => l.includes(`:${port}`))).toEqual([]);

    const shadow = single({ ...card, ggufPath: "/etc/shadow" });
    await forge("InstanceCreated", { instance: shadow });
    const runner = Object.keys(Object.values(shadow)[0].shardAssignments.runnerToShard)[0];
    expect(await failure(runner)).toMatch(/gguf_path '\/etc\/shadow' is not a local model registered/);
    expect(processesOpening("/etc/shadow")).toEqual([]);
    await clear();
    await noEngines();
  }, 120_000);

  it("never hands llama-server a file that is not a GGUF, so a log tail quotes none of it", async () => {
    // A forged registration is the one way left to name a file (the routes take only GGUF headers).
    const secret = `${tempDir("skulk-secret-")}/secret.txt`;
    Deno.writeTextFileSync(secret, "TOPSECRET: not a model\n");
    const stolen = { ...card, modelId: "evil/registered", ggufPath: secret };
    await forge("CustomModelCardAdded", { modelCard: stolen });
    await waitFor(
      "the forged card on a",
      async () => (await fetch(`${a.url}/models`).then((r) => r.text())).includes("evil/registered"),
    );
    const inst = single(stolen);
    await forge("InstanceCreated", { instance: inst });
    const runner = Object.keys(Object.values(inst)[0].shardAssignments.runnerToShard)[0];
    expect(await failure(runner)).toBe(`${secret} is not a GGUF file; llama-server was not started`);
    expect(processesOpening(secret)).toEqual([]);
    const everything = [
      await fetch(`${a.url}/state`).then((r) => r.text()),
      await fetch(`${a.url}/node/runners`).then((r) => r.text()),
    ].join("");
    expect(everything).not.toContain("TOPS");
    await clear();
    Deno.removeSync(secret.replace(/\/secret.txt$/, ""), { recursive: true });
  }, 120_000);
});

describe("a donor on loopback", () => {
  it("still serves a pool through POST /instance", async () => {
    const port = freeBandPort();
    const instance = pool("127.0.0.1", port);
    const r = await post(instance);
    expect(r.status, JSON.stringify(r.error)).toBe(200);
    const runners = Object.keys(Object.values(instance)[0].shardAssignments.runnerToShard);
    await waitForState(
      a.url,
      (s) => runners.every((id) => runnerTag(s, id) === "RunnerReady"),
      "the loopback pool to serve",
      120_000,
    );
    const tcp = Deno.readTextFileSync("/proc/net/tcp");
    expect(listensIn(tcp, "127.0.0.1", port)).toBe(true);
    expect(listensIn(tcp, "0.0.0.0", port)).toBe(false);
    expect(rpcListeners().join("\n")).toContain(`127.0.0.1:${port}`);
    const chat = await fetch(`${a.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
      signal: AbortSignal.timeout(60_000),
    });
    expect(chat.status, await chat.clone().text()).toBe(200);
    await chat.body?.cancel();
    const pids = (await Promise.all([a, b].map((d) =>
      json<{ runners: { engine: { pid: number } | null }[] }>(
        `${d.url}/node/runners`,
      )
    ))).flatMap((x) => x.runners.map((r) => r.engine?.pid ?? 0));
    const id = Object.values(instance)[0].instanceId;
    await (await fetch(`${a.url}/instance/${id}`, { method: "DELETE" })).body?.cancel();
    await waitFor("the pool's engines gone", () => pids.every((p) => !pidAlive(p)), 30_000);
  }, 240_000);
});
