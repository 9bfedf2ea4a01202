/**
 * Cluster-wide settings on two real daemons: `PUT /config` through the follower sets cluster-scope keys on
 * every node (read back at once where it was asked, kept across a restart) and node-scope keys only there.
 */
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { waitForState } from "../helpers/cluster.ts";

const running: Daemon[] = [];
afterAll(async () => {
  await Promise.all(running.map((d) => d.kill()));
});

async function node(dir: string, args: string[], dataDir = `${dir}/data`): Promise<Daemon> {
  const d = await startDaemon({ dataDir, args: ["--no-mdns", "--config", `${dir}/skulk.yaml`, ...args] });
  running.push(d);
  return d;
}

interface ConfigView {
  effective: {
    cluster: Record<string, unknown>;
    settings: { key: string; scope: string; running: unknown }[];
  };
}

async function setting(url: string, key: string) {
  const c = await json<ConfigView>(`${url}/config`);
  return c.effective.settings.find((s) => s.key === key)!;
}

const ORIGIN = "http://localhost:5173";

describe("cluster-wide settings", () => {
  it("PUT through a follower sets cluster keys on every node and node keys on that node only", async () => {
    const [da, db] = [tempDir("skulk-cfg-a-"), tempDir("skulk-cfg-b-")];
    Deno.writeTextFileSync(`${da}/skulk.yaml`, "node:\n  friendly_name: alpha\n");
    Deno.writeTextFileSync(`${db}/skulk.yaml`, "node:\n  friendly_name: beta\n");
    const a = await node(da, ["--force-master"]);
    const b = await node(db, ["--peer", `127.0.0.1:${a.port}`]);
    expect(await oneMaster([a.url, b.url])).toBe(a.nodeId);
    await waitFor(
      "b following a",
      async () => (await json<{ masterNodeId: string }>(`${b.url}/state`)).masterNodeId === a.nodeId,
    );
    expect(await setting(a.url, "cluster.node_timeout_seconds")).toMatchObject({
      scope: "cluster",
      running: 30,
    });
    expect(await setting(a.url, "api.max_concurrent_streams")).toMatchObject({ scope: "node", running: 256 });
    // Before: A allows no foreign origin.
    const before = await fetch(`${a.url}/node_id`, { headers: { origin: ORIGIN } });
    await before.body?.cancel();
    expect(before.headers.get("access-control-allow-origin")).toBeNull();

    const res = await fetch(`${b.url}/config`, {
      method: "PUT",
      body: JSON.stringify({
        config: {
          node: { friendly_name: "beta" },
          api: { max_concurrent_streams: 7, cors_origins: [ORIGIN] },
          cluster: { node_timeout_seconds: 41 },
        },
      }),
    });
    expect(res.status).toBe(200);
    expect((await res.json()).cluster).toEqual({
      "api.cors_origins": [ORIGIN],
      "cluster.node_timeout_seconds": 41,
    });

    // Read back at once on the node that was asked.
    expect(await setting(b.url, "cluster.node_timeout_seconds")).toMatchObject({
      scope: "cluster",
      running: 41,
    });
    expect(await setting(b.url, "api.cors_origins")).toMatchObject({ scope: "cluster", running: [ORIGIN] });
    // The node-scope key went to B's file only (it applies at B's next start); the cluster keys to no file.
    expect(parse(Deno.readTextFileSync(`${db}/skulk.yaml`))).toEqual({
      node: { friendly_name: "beta" },
      api: { max_concurrent_streams: 7 },
    });
    expect(parse(Deno.readTextFileSync(`${da}/skulk.yaml`))).toEqual({ node: { friendly_name: "alpha" } });

    // Every node runs with the cluster values; A's own node-scope value is untouched.
    await waitFor(
      "A running the cluster's node timeout",
      async () => (await setting(a.url, "cluster.node_timeout_seconds")).running === 41,
    );
    expect(await setting(a.url, "api.max_concurrent_streams")).toMatchObject({ running: 256 });
    // A change applies while running: A now answers the origin's CORS request.
    const after = await fetch(`${a.url}/node_id`, { headers: { origin: ORIGIN } });
    await after.body?.cancel();
    expect(after.headers.get("access-control-allow-origin")).toBe(ORIGIN);

    // A bad cluster value is refused, named, and changes nothing anywhere.
    const bad = await fetch(`${a.url}/config`, {
      method: "PUT",
      body: JSON.stringify({ cluster: { node_timeout_seconds: -1 } }),
    });
    expect(bad.status).toBe(422);
    expect((await bad.json()).error.param).toBe("cluster.node_timeout_seconds");
    expect(await setting(b.url, "cluster.node_timeout_seconds")).toMatchObject({ running: 41 });

    // A restarted B keeps the cluster's values (its own log) and now runs its own node-scope value.
    await b.stop();
    running.splice(running.indexOf(b), 1);
    const b2 = await node(db, ["--peer", `127.0.0.1:${a.port}`], b.dataDir);
    expect(await setting(b2.url, "cluster.node_timeout_seconds")).toMatchObject({ running: 41 });
    expect(await setting(b2.url, "api.max_concurrent_streams")).toMatchObject({ running: 7 });
  }, 180_000);

  it("a cluster default model set through PUT /config is placed when the node starts again", async () => {
    const dir = tempDir("skulk-cfg-default-");
    Deno.writeTextFileSync(`${dir}/skulk.yaml`, "node:\n  friendly_name: solo\n");
    const gguf = await tinyModel();
    const env = { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server") };
    const args = ["--no-mdns", "--config", `${dir}/skulk.yaml`];
    const first = await startDaemon({ dataDir: `${dir}/data`, args, env });
    running.push(first);
    const res = await fetch(`${first.url}/config`, {
      method: "PUT",
      body: JSON.stringify({ node: { friendly_name: "solo" }, inference: { default_model: gguf } }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      requiresRestart: true,
      cluster: { "inference.default_model": gguf },
    });
    expect(Object.keys((await json<{ instances: object }>(`${first.url}/state`)).instances)).toEqual([]);
    await first.stop();
    running.splice(running.indexOf(first), 1);

    // Not in the file: the node's own log brings it back, and the default-model plane places it.
    expect(Deno.readTextFileSync(`${dir}/skulk.yaml`)).not.toContain("default_model");
    const again = await startDaemon({ dataDir: `${dir}/data`, args, env });
    running.push(again);
    expect(await setting(again.url, "inference.default_model")).toMatchObject({
      scope: "cluster",
      running: gguf,
    });
    await waitForState(
      again.url,
      (s) => Object.keys(s.instances).length === 1,
      "the default model placed",
      90_000,
    );
  }, 180_000);
});
