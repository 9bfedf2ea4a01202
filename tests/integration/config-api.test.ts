import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";

describe("GET and PUT /config against a real node", () => {
  let node: Daemon;
  let dir: string;
  let file: string;
  beforeAll(async () => {
    dir = tempDir("skulk-config-api-");
    file = `${dir}/skulk.yaml`;
    Deno.writeTextFileSync(
      file,
      "node:\n  friendly_name: alpha\nhf_token: hf_do_not_leak\nlogging:\n  level: debug\n",
    );
    node = await startDaemon({ args: ["--config", file], dataDir: `${dir}/data` });
  });
  afterAll(async () => {
    await node?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => undefined);
  });

  it("shows the file without hf_token, says a token is set, and lists the running settings", async () => {
    const res = await fetch(`${node.url}/config`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("hf_do_not_leak");
    const body = JSON.parse(text);
    expect(body.config).toEqual({ node: { friendly_name: "alpha" }, logging: { level: "debug" } });
    expect(body.configPath).toBe(file);
    expect(body.fileExists).toBe(true);
    expect(body.effective.has_hf_token).toBe(true);
    const port = body.effective.settings.find((s: { key: string }) => s.key === "api.port");
    // The node was started with --api-port 0 (any free port): the setting, not the port it bound.
    expect(port).toMatchObject({ running: 0, kind: "number", env: "SKULK_API_PORT" });
  });

  it("refuses a bad value with 422, naming the key, and leaves the file alone", async () => {
    const before = Deno.readTextFileSync(file);
    const res = await fetch(`${node.url}/config`, {
      method: "PUT",
      body: JSON.stringify({ config: { api: { port: 99999 } } }),
    });
    expect(res.status).toBe(422);
    const body = await res.json();
    expect(body.error).toMatchObject({ param: "api.port", code: 422 });
    expect(body.error.message).toMatch(/api\.port.*65535/);
    expect(Deno.readTextFileSync(file)).toBe(before);
  });

  it("refuses a body that is not an object", async () => {
    for (const body of ["[1,2]", '"x"', "{not json"]) {
      const res = await fetch(`${node.url}/config`, { method: "PUT", body });
      expect(res.status).toBe(422);
      expect((await res.json()).error.message).toBeTruthy();
    }
  });

  it("writes a good file, keeping hf_token and logging it was not sent; a cluster key becomes an event", async () => {
    const res = await fetch(`${node.url}/config`, {
      method: "PUT",
      body: JSON.stringify({
        config: { node: { friendly_name: "beta" }, cluster: { node_timeout_seconds: 45 } },
      }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      success: true,
      requiresRestart: true,
      cluster: { "cluster.node_timeout_seconds": 45 },
    });
    // The node-scope key is in the file; the cluster-scope one is in the cluster's log, not the file.
    expect(parse(Deno.readTextFileSync(file))).toEqual({
      node: { friendly_name: "beta" },
      hf_token: "hf_do_not_leak",
      logging: { level: "debug" },
    });
    const again = await (await fetch(`${node.url}/config`)).json();
    expect(again.config.node.friendly_name).toBe("beta");
    expect(again.effective.cluster).toEqual({ "cluster.node_timeout_seconds": 45 });
    const timeout = again.effective.settings.find((s: { key: string }) =>
      s.key === "cluster.node_timeout_seconds"
    );
    expect(timeout).toMatchObject({ scope: "cluster", running: 45 });
    const name = again.effective.settings.find((s: { key: string }) => s.key === "node.friendly_name");
    expect(name).toMatchObject({ scope: "node", running: "alpha" });
  });
});
