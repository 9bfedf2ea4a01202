/**
 * Log shipping to a real HTTP receiver on loopback, in VictoriaLogs' JSON-lines and Loki's push format:
 * batches arrive in order with the token; while the receiver is down the buffer stays bounded, drops the
 * oldest lines and counts them; once it is back the newest lines arrive.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type IngestFormat, ingestUrl, type ShipLine, Shipper } from "../../src/log/ship.ts";
import { waitFor } from "../helpers/multinode.ts";

interface Received {
  path: string;
  auth: string | null;
  contentType: string | null;
  body: string;
}

/** A receiver on `port` (0: any) that records every request and answers 204 (or `status`). */
function receiver(port = 0, status = 204) {
  const got: Received[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {} }, async (req) => {
    const u = new URL(req.url);
    got.push({
      path: u.pathname + u.search,
      auth: req.headers.get("authorization"),
      contentType: req.headers.get("content-type"),
      body: await req.text(),
    });
    return new Response(null, { status });
  });
  return { got, server, port: server.addr.port };
}

/** The JSON lines a receiver got, in arrival order, whatever the format. */
function linesOf(format: IngestFormat, got: Received[]): Record<string, unknown>[] {
  if (format === "victorialogs") {
    return got.flatMap((r) => r.body.split("\n").filter(Boolean).map((l) => JSON.parse(l)));
  }
  return got.flatMap((r) => {
    const { streams } = JSON.parse(r.body) as {
      streams: { stream: Record<string, string>; values: [string, string][] }[];
    };
    return streams.flatMap((s) =>
      s.values.map(([ns, line]) => ({ ...JSON.parse(line), _ns: ns, _labels: s.stream }))
    );
  }).sort((a, b) => Number(a.n) - Number(b.n));
}

const line = (n: number, level = "info"): ShipLine => {
  const ts = Date.parse("2026-12-03T10:00:00Z") + n;
  return {
    json: JSON.stringify({
      ts: new Date(ts).toISOString(),
      level,
      logger: "skulk.test",
      msg: `line ${n}`,
      nodeId: "node-a",
      n,
    }),
    timeNs: `${ts}000000`,
    level,
  };
};

const open: { shipper: Shipper; servers: Deno.HttpServer[] }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.shipper.close(100);
    for (const s of o.servers) await s.shutdown().catch(() => {});
  }
});

for (const format of ["victorialogs", "loki"] as const) {
  describe(`shipping in the ${format} format`, () => {
    it("sends batches in order, to the format's path, with the bearer token and the node's labels", async () => {
      const r = receiver();
      const shipper = new Shipper({
        url: `http://127.0.0.1:${r.port}`,
        format,
        token: "secret-token-1234",
        bufferLines: 1000,
        batchLines: 50,
        intervalMs: 50,
        labels: () => ({ nodeId: "node-a" }),
      });
      open.push({ shipper, servers: [r.server] });
      for (let i = 0; i < 120; i++) shipper.push(line(i, i % 3 ? "info" : "warning"));
      await waitFor("120 lines shipped", () => shipper.stats().shipped === 120, 10_000, 20);
      const lines = linesOf(format, r.got);
      expect(lines.map((l) => l.n)).toEqual(Array.from({ length: 120 }, (_, i) => i));
      expect(r.got.length).toBeGreaterThanOrEqual(3); // 50 + 50 + 20: batched, not one request per line
      expect(r.got.every((g) => g.auth === "Bearer secret-token-1234")).toBe(true);
      if (format === "victorialogs") {
        expect(r.got[0].path).toBe(
          "/insert/jsonline?_stream_fields=nodeId,logger&_msg_field=msg&_time_field=ts",
        );
        expect(r.got[0].contentType).toBe("application/stream+json");
        expect(lines.every((l) => l.nodeId === "node-a")).toBe(true);
      } else {
        expect(r.got[0].path).toBe("/loki/api/v1/push");
        expect(lines[0]._labels).toEqual({ job: "skulk", nodeId: "node-a", level: "warning" });
        expect(lines[1]._labels).toEqual({ job: "skulk", nodeId: "node-a", level: "info" });
        expect(lines[5]._ns).toBe(`${Date.parse("2026-12-03T10:00:00Z") + 5}000000`);
      }
      const stats = shipper.stats();
      expect(JSON.stringify(stats)).not.toContain("secret-token");
      expect(stats).toMatchObject({ shipped: 120, dropped: 0, buffered: 0, failuresInARow: 0 });
    });

    it("holds at most the buffer while the receiver is down, drops the oldest and counts them, then delivers after it returns", async () => {
      const first = receiver();
      const port = first.port;
      const states: string[] = [];
      const shipper = new Shipper({
        url: `http://127.0.0.1:${port}`,
        format,
        token: null,
        bufferLines: 200,
        batchLines: 50,
        intervalMs: 20,
        backoffBaseMs: 20,
        backoffMaxMs: 200,
        timeoutMs: 1000,
        labels: () => ({ nodeId: "node-a" }),
        onStateChange: (ok, error) => states.push(ok ? "ok" : `down: ${error}`),
      });
      open.push({ shipper, servers: [first.server] });
      for (let i = 0; i < 10; i++) shipper.push(line(i));
      await waitFor("the first lines", () => shipper.stats().shipped === 10, 10_000, 20);

      await first.server.shutdown(); // the outage
      for (let i = 10; i < 1010; i++) shipper.push(line(i));
      await waitFor("a failed attempt", () => shipper.stats().failuresInARow >= 2, 10_000, 20);
      const during = shipper.stats();
      // At most the buffer, plus one batch while it is being sent.
      expect(during.buffered).toBeLessThanOrEqual(200 + 50);
      expect(during.buffered + during.dropped).toBe(1000);
      expect(during.dropped).toBeGreaterThanOrEqual(800);
      expect(during.lastError).toMatch(/unreachable/);
      expect(states[0]).toMatch(/^down: /);
      console.log(
        `${format}: outage with 1000 lines pushed into a 200-line buffer: ${during.dropped} dropped, ${during.buffered} held, ${during.failuresInARow} failed attempts`,
      );

      const second = receiver(port); // the store comes back on the same address
      open[open.length - 1].servers.push(second.server);
      await waitFor("the buffered lines after recovery", () => shipper.stats().shipped === 210, 15_000, 20);
      const after = linesOf(format, second.got).map((l) => Number(l.n));
      // The newest 200 survive, in order; the oldest of the outage were the ones dropped.
      expect(after).toEqual(Array.from({ length: 200 }, (_, i) => 810 + i));
      expect(shipper.stats()).toMatchObject({ shipped: 210, dropped: 800, failuresInARow: 0 });
      expect(states.at(-1)).toBe("ok");
    });
  });
}

describe("shipping", () => {
  it("drops a batch the store refuses (400) and carries on, counting it", async () => {
    const r = receiver(0, 400);
    const shipper = new Shipper({
      url: `http://127.0.0.1:${r.port}`,
      format: "victorialogs",
      token: null,
      bufferLines: 100,
      batchLines: 10,
      intervalMs: 20,
      labels: () => ({}),
    });
    open.push({ shipper, servers: [r.server] });
    for (let i = 0; i < 25; i++) shipper.push(line(i));
    await waitFor("every line refused", () => shipper.stats().rejected === 25, 10_000, 20);
    expect(shipper.stats()).toMatchObject({
      shipped: 0,
      dropped: 25,
      buffered: 0,
      lastError: "the log store answered 400",
    });
  });

  it("does not hold a shutdown longer than its deadline when the store accepts and never answers", async () => {
    // A listener that takes the connection and never answers.
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const held: Deno.Conn[] = [];
    void (async () => {
      for await (const conn of listener) held.push(conn);
    })();
    const shipper = new Shipper({
      url: `http://127.0.0.1:${listener.addr.port}`,
      format: "victorialogs",
      token: null,
      bufferLines: 100,
      batchLines: 1,
      intervalMs: 10,
      labels: () => ({}),
    });
    try {
      shipper.push(line(1)); // a send starts at once (a full batch) and hangs
      await waitFor("the connection", () => held.length > 0, 5000, 10);
      shipper.push(line(2));
      const t0 = performance.now();
      await shipper.close(300);
      const ms = performance.now() - t0;
      expect(ms).toBeLessThan(2000);
      expect(ms).toBeGreaterThanOrEqual(250);
    } finally {
      listener.close();
      for (const c of held) c.close();
    }
  });

  it("keeps a full insert URL as given and adds the default path to a bare one", () => {
    expect(ingestUrl("http://vl:9428", "victorialogs")).toBe(
      "http://vl:9428/insert/jsonline?_stream_fields=nodeId,logger&_msg_field=msg&_time_field=ts",
    );
    expect(ingestUrl("http://vl:9428/insert/jsonline?_msg_field=msg", "victorialogs")).toBe(
      "http://vl:9428/insert/jsonline?_msg_field=msg",
    );
    expect(ingestUrl("http://loki:3100/", "loki")).toBe("http://loki:3100/loki/api/v1/push");
  });

  it("measures throughput to a loopback receiver", async () => {
    const r = receiver();
    const shipper = new Shipper({
      url: `http://127.0.0.1:${r.port}`,
      format: "victorialogs",
      token: null,
      bufferLines: 100_000,
      batchLines: 500,
      intervalMs: 10,
      labels: () => ({}),
    });
    open.push({ shipper, servers: [r.server] });
    const n = 50_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) shipper.push(line(i));
    await waitFor("every line shipped", () => shipper.stats().shipped === n, 60_000, 10);
    const s = (performance.now() - t0) / 1000;
    console.log(
      `shipped ${n} lines in ${s.toFixed(2)} s: ${Math.round(n / s)} lines/s (batches of 500, loopback)`,
    );
    expect(shipper.stats().dropped).toBe(0);
  });
});
