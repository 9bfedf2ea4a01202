/**
 * bench/pooled: decode tokens/s and time to first token of one model served by one llama-server, and
 * pooled over 2 and 3 ggml-rpc-server donors reached over loopback and over veth links (network
 * namespaces), side by side in one run; then the time from a donor's death to a real Skulk cluster
 * serving the model again. Prints ratios against the single node.
 *   deno run -A bench/pooled.ts [--requests N] [--tokens N] [--width W] [--layers L] [--threads T] [--no-heal]
 */
import { median, type StreamTiming, timeChatStream } from "./lib/stream.ts";
import { type Daemon, startDaemon } from "../tests/helpers/daemon.ts";
import { engineBinary, tinyModel } from "../tests/helpers/models.ts";
import { oneMaster, waitFor } from "../tests/helpers/multinode.ts";
import { makeSegment, netnsAvailable, type Segment } from "../tests/helpers/netns.ts";
import { healthy, llamaServerProcess } from "../src/engines/llama-server.ts";
import { rpcServerProcess, tcpAccepts } from "../src/engines/rpc-server.ts";
import type { EngineProcess } from "../src/engines/process.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const REQUESTS = arg("requests", 6);
const TOKENS = arg("tokens", 64);
const WIDTH = arg("width", 512);
const LAYERS = arg("layers", 8);
// One thread per engine by default: idle ggml threads spin-poll, and on a small machine the pool's processes
// would then fight over cores, measuring contention instead of the RPC hop.
const THREADS = arg("threads", 1);
const model = await tinyModel({ width: WIDTH, layers: LAYERS, heads: 8, kvHeads: 4, ffn: 1024 });
const llamaServer = await engineBinary("llama-server");
const rpcServer = await engineBinary("ggml-rpc-server");

type Sample = StreamTiming;

const stream = (url: string, i: number): Promise<Sample> =>
  timeChatStream(url, {
    messages: [{ role: "user", content: `Write about the sea, variation ${i}` }],
    max_tokens: TOKENS,
    temperature: 0,
    seed: 1,
    ignore_eos: true,
  });

/** Starts donors (in namespaces when `where` says so) and a driver, measures, and stops everything. */
async function measure(label: string, donors: { host: string; netns?: string }[]): Promise<Sample> {
  const engines: EngineProcess[] = [];
  const nsProcs: Deno.ChildProcess[] = [];
  try {
    const endpoints: string[] = [];
    for (const [i, d] of donors.entries()) {
      const port = 26100 + i;
      if (d.netns) {
        // A donor inside its namespace: spawned through `ip netns exec`, readiness by TCP from here.
        const child = new Deno.Command("ip", {
          args: [
            "netns",
            "exec",
            d.netns,
            rpcServer,
            "-H",
            d.host,
            "-p",
            String(port),
            "-c",
            "-t",
            String(THREADS),
          ],
          stdout: "null",
          stderr: "null",
        }).spawn();
        nsProcs.push(child);
        await waitFor(`donor ${d.host}:${port}`, () => tcpAccepts(d.host, port), 20_000, 100);
      } else {
        const e = rpcServerProcess({ bin: rpcServer, host: d.host, port, threads: THREADS });
        engines.push(e);
        await e.start();
      }
      endpoints.push(`${d.host}:${port}`);
    }
    const port = 26200;
    const driver = llamaServerProcess({
      bin: llamaServer,
      model,
      port,
      contextTokens: 2048,
      rpc: endpoints,
      threads: THREADS,
      parallel: 1,
    });
    engines.push(driver);
    await driver.start();
    const url = `http://127.0.0.1:${port}`;
    await waitFor("driver health", () => healthy(url), 10_000);
    await stream(url, -1); // warm-up: graphs, caches
    const samples: Sample[] = [];
    for (let i = 0; i < REQUESTS; i++) samples.push(await stream(url, i));
    const out = { ttftMs: median(samples.map((s) => s.ttftMs)), tps: median(samples.map((s) => s.tps)) };
    console.error(`  measured ${label}`);
    return out;
  } finally {
    for (const e of engines.reverse()) await e.stop(1000);
    for (const c of nsProcs) {
      try {
        c.kill("SIGKILL");
      } catch { /* gone */ }
      await c.status;
    }
  }
}

let segment: Segment | null = null;
const daemons: Daemon[] = [];
const cleanup = async () => {
  const done = daemons.splice(0);
  await Promise.all(done.map((d) => d.stop()));
  for (const d of done) Deno.removeSync(d.dataDir, { recursive: true });
  segment?.remove();
  segment = null;
};

try {
  const veth = netnsAvailable();
  const rows: { label: string; s: Sample }[] = [];
  rows.push({ label: "one node", s: await measure("one node", []) });
  for (const n of [2, 3]) {
    rows.push({
      label: `${n} donors, loopback`,
      s: await measure(`${n} donors, loopback`, Array.from({ length: n }, () => ({ host: "127.0.0.1" }))),
    });
  }
  if (veth) {
    segment = makeSegment(3);
    for (const n of [2, 3]) {
      const donors = Array.from(
        { length: n },
        (_, i) => ({ host: segment!.node(i).address, netns: segment!.node(i).netns }),
      );
      rows.push({ label: `${n} donors, veth`, s: await measure(`${n} donors, veth`, donors) });
    }
    segment.remove();
    segment = null;
  }
  const base = rows[0].s;
  console.log(
    `\npooled decode and time to first token (${LAYERS} layers x ${WIDTH} wide, ${TOKENS} tokens, median of ${REQUESTS}, ${THREADS} threads)`,
  );
  console.log(
    `${"setup".padEnd(22)} ${"decode tok/s".padStart(13)} ${"ratio".padStart(6)} ${"TTFT ms".padStart(8)} ${
      "ratio".padStart(6)
    }`,
  );
  for (const r of rows) {
    console.log(
      `${r.label.padEnd(22)} ${r.s.tps.toFixed(1).padStart(13)} ${
        (r.s.tps / base.tps).toFixed(2).padStart(6)
      } ${r.s.ttftMs.toFixed(1).padStart(8)} ${(r.s.ttftMs / base.ttftMs).toFixed(2).padStart(6)}`,
    );
  }
  if (!veth) console.log("(veth rows skipped: this machine cannot create network namespaces)");

  if (!Deno.args.includes("--no-heal")) {
    // A real cluster: 4 nodes lending 263 MiB each, so the 8-layer tiny model must pool; kill a donor.
    const small = await tinyModel({ layers: 8 });
    const env = {
      SKULK_LLAMA_SERVER_BIN: llamaServer,
      SKULK_MEMORY_LIMIT: "263MiB",
      SKULK_LOG_LEVEL: "warning",
    };
    if (veth) {
      segment = makeSegment(4);
      for (let i = 0; i < 4; i++) {
        const { netns, address } = segment.node(i);
        daemons.push(
          await startDaemon({
            netns,
            urlHost: address,
            args: ["--api-host", "0.0.0.0", "--api-port", "52415"],
            env,
            timeoutMs: 40_000,
          }),
        );
      }
    } else {
      daemons.push(await startDaemon({ args: ["--no-mdns"], env, timeoutMs: 40_000 }));
      for (let i = 0; i < 3; i++) {
        daemons.push(
          await startDaemon({
            args: ["--no-mdns", "--peer", `127.0.0.1:${daemons[0].port}`],
            env,
            timeoutMs: 40_000,
          }),
        );
      }
    }
    const api = daemons[0];
    await oneMaster(daemons.map((d) => d.url), 45_000);
    await fetch(`${api.url}/models/add`, {
      method: "POST",
      body: JSON.stringify({ model_id: "bench/pooled", gguf_path: small }),
    }).then((r) => r.body?.cancel());
    await waitFor(
      "the card",
      async () => (await (await fetch(`${api.url}/models`)).text()).includes("bench/pooled"),
    );
    await waitFor("a 3-node pool in the previews", async () => {
      const r = await (await fetch(`${api.url}/instance/previews?model_id=bench/pooled`)).json();
      return r.previews.some((p: { error: string | null; node_count: number; instance_meta: string }) =>
        p.instance_meta === "LlamaRpc" && p.error === null && p.node_count >= 3
      );
    }, 60_000);
    await fetch(`${api.url}/place_instance`, {
      method: "POST",
      body: JSON.stringify({ model_id: "bench/pooled", instance_meta: "LlamaRpc", min_nodes: 3 }),
    }).then((r) => r.body?.cancel());
    const chatOk = async () => {
      const r = await fetch(`${api.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({
          model: "bench/pooled",
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 4,
        }),
      });
      await r.body?.cancel();
      return r.status === 200;
    };
    await waitFor("the pool to serve", chatOk, 120_000, 100);
    const donorPid = await waitFor("a donor engine", async () => {
      for (const d of daemons) {
        const { runners } = await (await fetch(`${d.url}/node/runners`)).json();
        const donor = runners.find((r: { role: string }) => r.role === "donor");
        if (donor?.engine?.pid) return donor.engine.pid as number;
      }
      return null;
    });
    const t0 = performance.now();
    Deno.kill(donorPid, "SIGKILL");
    let placedAt = 0;
    const before = JSON.stringify(Object.keys((await (await fetch(`${api.url}/state`)).json()).instances));
    await waitFor(
      "serving again",
      async () => {
        if (!placedAt) {
          const now = JSON.stringify(Object.keys((await (await fetch(`${api.url}/state`)).json()).instances));
          if (now !== before && now !== "[]") placedAt = performance.now();
        }
        return await chatOk();
      },
      120_000,
      50,
    );
    const total = (performance.now() - t0) / 1000;
    const load = placedAt ? (performance.now() - placedAt) / 1000 : NaN;
    console.log(
      `\nhealing over ${veth ? "veth" : "loopback"}: donor killed -> serving again in ${
        total.toFixed(2)
      } s ` +
        `(re-placed after ${((placedAt - t0) / 1000).toFixed(2)} s, then ${
          load.toFixed(2)
        } s to load and answer; target <= 10 s + load)`,
    );
  }
} finally {
  await cleanup();
}
