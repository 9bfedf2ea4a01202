/**
 * The foundation end to end: a real daemon process on a free port with a temporary data dir, talked to
 * over HTTP and through the CLI; restarts, refusals and error envelopes included.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";

describe("a one-node daemon", () => {
  let node: Daemon;
  const dataDir = tempDir();

  beforeAll(async () => {
    node = await startDaemon({ dataDir });
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("serves its id, identity, health and an OpenAPI document", async () => {
    const id = await (await fetch(`${node.url}/node_id`)).json();
    expect(id).toBe(node.nodeId);
    expect(id).toMatch(/^12D3KooW[1-9A-HJ-NP-Za-km-z]{44}$/);
    const ident = await (await fetch(`${node.url}/node/identity`)).json();
    expect(ident.nodeId).toBe(id);
    expect(typeof ident.hostname).toBe("string");
    const health = await fetch(`${node.url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.headers.get("x-request-id")).toBeTruthy();
    const doc = await (await fetch(`${node.url}/api/openapi.json`)).json();
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/state", "/models", "/v1/models", "/node_id", "/v1/chat/completions"]),
    );
  });

  it("echoes a caller's request id", async () => {
    const res = await fetch(`${node.url}/healthz`, { headers: { "x-request-id": "trace-42" } });
    await res.body?.cancel();
    expect(res.headers.get("x-request-id")).toBe("trace-42");
  });

  it("serves /state in upstream's wire shape with this node's telemetry", async () => {
    const state = await (await fetch(`${node.url}/state`)).json();
    for (
      const key of [
        "instances",
        "runners",
        "downloads",
        "tasks",
        "lastSeen",
        "nodeIdentities",
        "nodeMemory",
        "nodeHealth",
        "lastEventAppliedIdx",
      ]
    ) {
      expect(state).toHaveProperty(key);
    }
    expect(Object.keys(state.lastSeen)).toEqual([node.nodeId]);
    expect(state.masterNodeId).toBe(node.nodeId); // alone, a node is its own master
    const mem = state.nodeMemory[node.nodeId];
    expect(mem.ramTotal.inBytes).toBeGreaterThan(0);
    expect(mem.ramAvailable.inBytes).toBeLessThanOrEqual(mem.ramTotal.inBytes);
    expect(state.nodeIdentities[node.nodeId].skulkVersion).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("lists the bundled model cards on /models and /v1/models", async () => {
    const list = await (await fetch(`${node.url}/v1/models`)).json();
    expect(list.object).toBe("list");
    expect(list.data.length).toBeGreaterThan(100);
    const llama = list.data.find((m: { id: string }) => m.id === "unsloth/Llama-3.2-1B-Instruct-GGUF");
    expect(llama).toMatchObject({
      object: "model",
      owned_by: "skulk",
      context_length: 131072,
      quantization: "Q4_K_M",
    });
    expect(llama.resolved_capabilities.family).toBe("llama");
    const bad = await fetch(`${node.url}/models?status=everything`);
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.param).toBe("status");
  });

  it("answers unknown routes and malformed JSON with the error envelope", async () => {
    const missing = await fetch(`${node.url}/no/such/route`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({
      error: {
        message: expect.stringContaining("/no/such/route"),
        type: "Not Found",
        param: null,
        code: 404,
      },
    });
    const malformed = await fetch(`${node.url}/instance`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(malformed.status).toBe(400);
    const env = await malformed.json();
    expect(env.error.message).toMatch(/not valid JSON/);
    expect(env.error.code).toBe(400);
    const wrongShape = await fetch(`${node.url}/instance`, {
      method: "POST",
      body: JSON.stringify({ instance: { Nope: {} } }),
    });
    expect(wrongShape.status).toBe(400);
    expect((await wrongShape.json()).error.message).toMatch(/instance/);
  });

  it("refuses a second daemon on the same data dir and keeps the first serving", async () => {
    const second = await skulk(["run", "--api-port", "0", "--api-host", "127.0.0.1", "--data-dir", dataDir]);
    expect(second.code).toBe(3);
    expect(second.stderr).toContain(`in use by another skulk daemon (pid ${node.pid}`);
    expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
  });

  it("skulk sql reads the live database and refuses every write, leaving it unchanged", async () => {
    const sel = await skulk(["sql", "--data-dir", dataDir, "--json", "SELECT id, friendly_name FROM nodes"]);
    expect(sel.code).toBe(0);
    expect(JSON.parse(sel.stdout)).toEqual([{ id: node.nodeId, friendly_name: expect.any(String) }]);
    const table = await skulk(["sql", "--data-dir", dataDir, "SELECT count(*) AS n FROM nodes"]);
    expect(table.stdout).toMatch(/^n\s*\n-+\n1\s*\n\(1 row\)/m);
    const before = await skulk([
      "sql",
      "--data-dir",
      dataDir,
      "--json",
      "SELECT name, sql FROM sqlite_master ORDER BY name",
    ]);
    for (
      const stmt of [
        "INSERT INTO nodes (id, friendly_name, version, first_seen, last_seen) VALUES ('x','x','x','x','x')",
        "UPDATE nodes SET friendly_name = 'hacked'",
        "DROP TABLE nodes",
        "ATTACH DATABASE '/tmp/skulk-attach-test.db' AS other",
        "WITH x AS (SELECT 1) DELETE FROM nodes",
        "SELECT 1; DELETE FROM nodes",
        "PRAGMA query_only = 0",
      ]
    ) {
      const r = await skulk(["sql", "--data-dir", dataDir, stmt]);
      expect(r.code, stmt).toBe(2);
      expect(r.stderr, stmt).toMatch(/skulk: sql: /);
    }
    const after = await skulk([
      "sql",
      "--data-dir",
      dataDir,
      "--json",
      "SELECT id, friendly_name FROM nodes",
    ]);
    expect(JSON.parse(after.stdout)).toEqual(JSON.parse(sel.stdout));
    const schemaAfter = await skulk([
      "sql",
      "--data-dir",
      dataDir,
      "--json",
      "SELECT name, sql FROM sqlite_master ORDER BY name",
    ]);
    expect(schemaAfter.stdout).toBe(before.stdout);
    await expect(Deno.stat("/tmp/skulk-attach-test.db")).rejects.toThrow();
  });
});

describe("restarts and configuration", () => {
  it("keeps the node id and the rows across a restart, and shuts down cleanly on SIGTERM", async () => {
    const dataDir = tempDir();
    const first = await startDaemon({ dataDir });
    const firstSeen = JSON.parse(
      (await skulk(["sql", "--data-dir", dataDir, "--json", "SELECT first_seen FROM nodes"])).stdout,
    )[0].first_seen;
    expect(await first.stop()).toBe(0);
    await expect(Deno.stat(`${dataDir}/daemon.lock`)).rejects.toThrow(); // released on clean shutdown
    const second = await startDaemon({ dataDir });
    try {
      expect(second.nodeId).toBe(first.nodeId);
      const rows = JSON.parse(
        (await skulk(["sql", "--data-dir", dataDir, "--json", "SELECT id, first_seen, last_seen FROM nodes"]))
          .stdout,
      );
      expect(rows).toHaveLength(1);
      expect(rows[0].first_seen).toBe(firstSeen);
      expect(rows[0].last_seen >= firstSeen).toBe(true);
    } finally {
      await second.stop();
    }
  });

  it("takes over the lock a killed daemon left behind", async () => {
    const dataDir = tempDir();
    const first = await startDaemon({ dataDir });
    await first.kill();
    const second = await startDaemon({ dataDir });
    expect(second.nodeId).toBe(first.nodeId);
    await second.stop();
  });

  it("exits non-zero naming the key for a bad flag, env var or skulk.yaml value", async () => {
    const dataDir = tempDir();
    const flag = await skulk(["run", "--data-dir", dataDir, "--api-port", "nope"]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/api\.port \(from --api-port = "nope"\)/);
    const env = await skulk(["run", "--data-dir", dataDir], { SKULK_LOG_LEVEL: "chatty" });
    expect(env.code).toBe(2);
    expect(env.stderr).toMatch(/logging\.level \(from SKULK_LOG_LEVEL/);
    const cwd = tempDir();
    await Deno.writeTextFile(`${cwd}/skulk.yaml`, "api:\n  port: 70000\n");
    const yaml = await skulk(["run", "--data-dir", dataDir], {}, cwd);
    expect(yaml.code).toBe(2);
    expect(yaml.stderr).toMatch(/api\.port \(from skulk\.yaml = 70000\)/);
    await Deno.writeTextFile(`${cwd}/skulk.yaml`, "api: [1, 2\n");
    const broken = await skulk(["run", "--data-dir", dataDir], {}, cwd);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/not valid YAML/);
  });

  it("prints help for every command and a version", async () => {
    for (const cmd of [[], ["run"], ["status"], ["sql"], ["models"], ["version"]]) {
      const r = await skulk([...cmd, "--help"]);
      expect(r.code, cmd.join(" ")).toBe(0);
      expect(r.stdout).toMatch(/Usage: skulk/);
    }
    const v = await skulk(["version", "--json"]);
    expect(JSON.parse(v.stdout).version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("skulk status talks to the running daemon", async () => {
    const node = await startDaemon();
    try {
      const r = await skulk(["status", "--data-dir", node.dataDir]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(node.nodeId);
      expect(r.stdout).toContain("none placed");
    } finally {
      await node.stop();
    }
    const down = await skulk(["status", "--url", `http://127.0.0.1:${node.port}`]);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/no node answers/);
  });
});
