/**
 * `/metrics` on a real node serving the tiny model: after real chat requests (streamed, not, and a 404)
 * it passes `promtool check metrics`, its counters moved by exactly those requests, and a real Prometheus
 * process scrapes a key-protected node on loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localCardWire, placeOnNode, registerCard } from "../helpers/cluster.ts";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { waitFor } from "../helpers/multinode.ts";

const MODEL = "skulk-test/metrics-tiny";
const KEY = "metrics-key-0123456789";

/** Every sample of the exposition, keyed by its series (`name{labels}`). */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

function series(name: string, labels: Record<string, string>): string {
  const inner = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(",");
  return `${name}{${inner}}`;
}

async function scrape(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return await res.text();
}

async function promtool(text: string): Promise<{ code: number; out: string }> {
  const child = new Deno.Command("promtool", {
    args: ["check", "metrics"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(text));
  await w.close();
  const r = await child.output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout) + dec.decode(r.stderr) };
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

describe("GET /metrics on a node serving the tiny model", () => {
  let node: Daemon;
  let instanceId: string;

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") } });
    const card = localCardWire(MODEL, await tinyModel());
    await placeOnNode(node, card, 2048, 120_000);
    const state = await (await fetch(`${node.url}/state`)).json();
    instanceId = Object.keys(state.instances)[0];
  }, 180_000);
  afterAll(async () => {
    await node?.stop();
  });

  it("passes promtool and counts exactly the requests made", async () => {
    const before = parse(await scrape(node.url));
    const chat = (body: Record<string, unknown>) =>
      fetch(`${node.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          messages: [{ role: "user", content: "Hello there" }],
          max_tokens: 8,
          ...body,
        }),
      });

    const plain = await chat({ model: MODEL });
    expect(plain.status).toBe(200);
    const usage1 = (await plain.json()).usage as { prompt_tokens: number; completion_tokens: number };
    const streamed = await chat({ model: MODEL, stream: true });
    expect(streamed.status).toBe(200);
    const sse = await streamed.text();
    const usage2 = sse.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)))
      .map((c) => c.usage).filter(Boolean).at(-1) as { prompt_tokens: number; completion_tokens: number };
    expect(usage2.completion_tokens).toBeGreaterThan(0);
    const missing = await chat({ model: "nobody/never-placed" });
    expect(missing.status).toBe(404);
    await missing.body?.cancel();

    const text = await scrape(node.url);
    const check = await promtool(text);
    expect(check.out).toBe("");
    expect(check.code).toBe(0);

    const after = parse(text);
    const delta = (s: string) => (after.get(s) ?? 0) - (before.get(s) ?? 0);
    const chatOk = series("skulk_requests_total", {
      route: "/v1/chat/completions",
      method: "POST",
      code: "200",
      model: MODEL,
      instance: instanceId,
    });
    expect(delta(chatOk)).toBe(2);
    // The unknown model is a client's text: counted, under `other`, never named.
    expect(delta(series("skulk_requests_total", {
      route: "/v1/chat/completions",
      method: "POST",
      code: "404",
      model: "other",
      instance: "",
    }))).toBe(1);
    expect(text).not.toContain("never-placed");
    // The first scrape is counted once it answered, so the second sees exactly it.
    expect(delta(series("skulk_requests_total", {
      route: "/metrics",
      method: "GET",
      code: "200",
      model: "",
      instance: "",
    }))).toBe(1);
    const tokens = (kind: string) => series("skulk_tokens_total", { kind, model: MODEL });
    expect(delta(tokens("generated"))).toBe(usage1.completion_tokens + usage2.completion_tokens);
    expect(delta(tokens("prompt"))).toBe(usage1.prompt_tokens + usage2.prompt_tokens);
    expect(delta(series("skulk_time_to_first_token_seconds_count", { model: MODEL }))).toBe(2);
    expect(delta(series("skulk_time_per_output_token_seconds_count", { model: MODEL }))).toBe(2);
    expect(after.get(series("skulk_time_to_first_token_seconds_bucket", { le: "+Inf", model: MODEL })))
      .toBe(after.get(series("skulk_time_to_first_token_seconds_count", { model: MODEL })));

    // Gauges and control-plane counters of this node.
    expect(after.get(series("skulk_runners", { phase: "ready" }))).toBe(1);
    expect(after.get(series("skulk_placements_total", { reason: "request" }))).toBe(1);
    expect(after.get("skulk_engine_starts_total")).toBe(1);
    expect(after.get("skulk_engine_failures_total")).toBe(0);
    expect(after.get("skulk_is_master")).toBe(1);
    // The node elected itself at start, after its metrics were made.
    expect(after.get("skulk_elections_total")).toBe(1);
    expect(after.get(series("skulk_stream_slots_used", { kind: "streams" }))).toBe(0);
    expect(after.get("skulk_command_queue_depth")).toBe(0);
    expect(after.get(series("skulk_in_flight_requests", { instance: instanceId }))).toBeUndefined();
    const total = after.get(series("skulk_memory_bytes", { kind: "total" }))!;
    expect(total).toBeGreaterThan(0);
    expect(after.get(series("skulk_memory_bytes", { kind: "available" }))).toBeLessThanOrEqual(total);
  }, 120_000);

  it("counts a placement the planner refuses", async () => {
    const huge = {
      ...localCardWire("skulk-test/metrics-huge", await tinyModel()),
      storageSize: { inBytes: 2 ** 50 },
    };
    await registerCard([node], huge);
    const refusals = series("skulk_placement_refusals_total", { source: "request" });
    const before = parse(await scrape(node.url)).get(refusals) ?? 0;
    const res = await fetch(`${node.url}/place_instance`, {
      method: "POST",
      body: JSON.stringify({ model_id: huge.modelId }),
    });
    expect(res.status).toBe(400);
    await res.body?.cancel();
    const after = parse(await scrape(node.url));
    expect(after.get(refusals)).toBe(before + 1);
    expect(after.get(series("skulk_placements_total", { reason: "request" }))).toBe(1);
  }, 60_000);
});

describe("a real Prometheus scraping every node of a key-protected cluster on loopback", () => {
  let node: Daemon;
  let peer: Daemon;
  let prom: Deno.ChildProcess | undefined;
  const dir = tempDir("skulk-prom-");

  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_API_KEY: KEY }, args: ["--no-worker", "--no-mdns"] });
    // A second node joins with the cluster's token; both are scrape targets, as an operator lists every node.
    const token = await skulk(["cluster", "token", "--data-dir", node.dataDir]);
    if (token.code !== 0) throw new Error(`skulk cluster token: ${token.stderr}`);
    peer = await startDaemon({
      env: { SKULK_API_KEY: KEY },
      args: ["--no-worker", "--no-mdns", "--join", token.stdout.trim()],
    });
  }, 120_000);
  afterAll(async () => {
    if (prom) {
      try {
        prom.kill("SIGTERM");
      } catch { /* already gone */ }
      await prom.status;
    }
    await Promise.all([node?.stop(), peer?.stop()]);
    await Deno.remove(dir, { recursive: true }).catch(() => undefined);
  });

  it("refuses /metrics without the key", async () => {
    const res = await fetch(`${node.url}/metrics`);
    expect(res.status).toBe(401);
    await res.body?.cancel();
    expect(parse(await scrape(node.url, { authorization: `Bearer ${KEY}` })).get("skulk_is_master")).toBe(1);
  });

  it("is scraped: up == 1 and skulk series in its store", async () => {
    const port = freePort();
    const config = `${dir}/prometheus.yml`;
    await Deno.writeTextFile(
      config,
      [
        "global:",
        "  scrape_interval: 1s",
        "  scrape_timeout: 1s",
        "scrape_configs:",
        "  - job_name: skulk",
        "    authorization:",
        `      credentials: ${KEY}`,
        "    static_configs:",
        `      - targets: ["127.0.0.1:${node.port}", "127.0.0.1:${peer.port}"]`,
        "",
      ].join("\n"),
    );
    prom = new Deno.Command("prometheus", {
      args: [
        `--config.file=${config}`,
        `--storage.tsdb.path=${dir}/tsdb`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const query = async (q: string) => {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
      const body = await res.json() as {
        data: { result: { metric: Record<string, string>; value: [number, string] }[] };
      };
      return body.data.result;
    };
    await waitFor("Prometheus to scrape both nodes (up == 1)", async () => {
      const r = await query('up{job="skulk"}');
      return r.length === 2 && r.every((x) => x.value[1] === "1");
    }, 60_000);
    // One cluster, one master: the two nodes' skulk_is_master add up to 1 once they agree.
    await waitFor("one master among the scraped nodes", async () => {
      const r = await query("sum(skulk_is_master)");
      return r.length === 1 && r[0].value[1] === "1";
    }, 60_000);
    const got = await waitFor("a skulk series in Prometheus", async () => {
      const r = await query('skulk_requests_total{route="/metrics"}');
      return r.length > 0 ? r : null;
    }, 60_000);
    expect(got[0].metric.job).toBe("skulk");
    expect(Number(got[0].value[1])).toBeGreaterThan(0);
    prom.kill("SIGTERM");
    expect((await prom.status).code).toBe(0);
    prom = undefined;
  }, 120_000);
});
