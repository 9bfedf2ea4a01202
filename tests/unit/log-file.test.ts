/**
 * The process's log outputs as the daemon configures them: JSON lines in a real file rotated by size (N files
 * kept), and the same lines shipped; every line carries the node's id and, inside a request, its id.
 */
import { dispose } from "@logtape/logtape";
import { afterEach, describe, expect, it } from "vitest";
import { lineFields, logger, setupLogging, shippingStats, withLogContext } from "../../src/log/mod.ts";
import { tempDir } from "../helpers/daemon.ts";
import { waitFor } from "../helpers/multinode.ts";

afterEach(async () => {
  await dispose();
  lineFields.nodeId = null;
});

describe("the log file", () => {
  it("rotates at its size bound and keeps N files, each line JSON with node and request ids", async () => {
    const dir = tempDir("skulk-logfile-");
    const path = `${dir}/logs/skulk.log`;
    await setupLogging("info", "json", { stderr: false, file: { path, maxBytes: 4096, files: 3 } });
    lineFields.nodeId = "node-under-test";
    const log = logger("test");
    await withLogContext({ requestId: "req-42" }, async () => {
      for (let i = 0; i < 200; i++) {
        log.info("line {i} {pad}", { i, pad: "x".repeat(60) });
        if (i % 50 === 0) await Promise.resolve(); // the context survives awaits
      }
    });
    log.info("outside any request");
    await dispose(); // flushes the file sink

    const files = [...Deno.readDirSync(`${dir}/logs`)].map((e) => e.name).sort();
    expect(files).toEqual(["skulk.log", "skulk.log.1", "skulk.log.2"]);
    for (const f of files) expect(Deno.statSync(`${dir}/logs/${f}`).size).toBeLessThanOrEqual(4096);
    const read = (f: string) =>
      Deno.readTextFileSync(`${dir}/logs/${f}`).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const current = read("skulk.log");
    const older = read("skulk.log.1");
    const oldest = read("skulk.log.2");
    const all = [...oldest, ...older, ...current];
    // The newest lines are kept in order across the files; the first ones rotated out.
    const numbers = all.filter((l) => l.requestId).map((l) => l.i);
    expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, k) => 200 - numbers.length + k));
    expect(numbers.length).toBeGreaterThan(20); // three files of 4 KiB hold ~30 lines of ~300 bytes
    expect(numbers[0]).toBeGreaterThan(0);
    for (const l of all) expect(l.nodeId).toBe("node-under-test");
    expect(all.at(-1)).toMatchObject({ msg: "outside any request", level: "info", logger: "skulk.test" });
    expect(all.at(-1).requestId).toBeUndefined();
    expect(current[0].ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    Deno.removeSync(dir, { recursive: true });
  });

  it("writes a quiet node's last line within a second, with no later line and no shutdown to push it out", async () => {
    const dir = tempDir("skulk-logfile-");
    const path = `${dir}/logs/skulk.log`;
    await setupLogging("info", "json", { stderr: false, file: { path, maxBytes: 1024 * 1024, files: 2 } });
    logger("test").info("the only line");
    const t0 = Date.now();
    await waitFor(
      "the line in the file",
      () => Deno.readTextFileSync(path).includes("the only line"),
      5000,
      20,
    );
    console.log(`a lone log line reached the file after ${Date.now() - t0} ms`);
    expect(Date.now() - t0).toBeLessThan(2000);
    Deno.removeSync(dir, { recursive: true });
  });

  it("ships the same lines, with node and request ids, and sends what is buffered on dispose", async () => {
    const got: string[] = [];
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      got.push(...(await req.text()).split("\n").filter(Boolean));
      return new Response(null, { status: 204 });
    });
    try {
      await setupLogging("info", "json", {
        stderr: false,
        ingest: {
          url: `http://127.0.0.1:${server.addr.port}`,
          format: "victorialogs",
          token: "never-in-a-log-line",
          bufferLines: 1000,
          batchLines: 100,
          intervalMs: 60_000, // only dispose sends: what a stopping daemon does with its last lines
        },
      });
      lineFields.nodeId = "node-b";
      withLogContext({ requestId: "req-7" }, () => logger("api").info("GET /x 200"));
      logger("daemon").info("stopped");
      expect(shippingStats()).toMatchObject({ buffered: 2, shipped: 0 });
      await dispose();
      await waitFor("two lines shipped", () => got.length === 2, 5000, 20);
      const lines = got.map((l) => JSON.parse(l));
      expect(lines[0]).toMatchObject({ msg: "GET /x 200", nodeId: "node-b", requestId: "req-7" });
      expect(lines[1]).toMatchObject({ msg: "stopped", nodeId: "node-b" });
      expect(got.join("\n")).not.toContain("never-in-a-log-line");
    } finally {
      await server.shutdown();
    }
  });
});
