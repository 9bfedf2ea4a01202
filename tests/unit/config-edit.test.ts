import { describe, expect, it } from "vitest";
import {
  changesSettings,
  mergeWithFile,
  proposedConfig,
  readProblem,
  redact,
  settingViews,
  splitByScope,
  validateConfigYaml,
  withClusterConfig,
} from "../../src/config/edit.ts";
import { makeEvent } from "../../src/cluster/events.ts";
import { applyEvent, emptyState } from "../../src/cluster/state.ts";
import { resolveConfig } from "../../src/config/load.ts";

describe("PUT /config body", () => {
  it.each([
    [{ config: { api: { port: 1 } } }, { api: { port: 1 } }],
    [{ api: { port: 1 } }, { api: { port: 1 } }],
    [{ config: { api: {} }, node: {} }, { config: { api: {} }, node: {} }],
    [{ config: "x" }, null],
    [[1, 2], null],
    ["text", null],
    [null, null],
  ])("%j is read as %j", (body, want) => {
    expect(proposedConfig(body)).toEqual(want);
  });

  it("keeps hf_token and logging from the file when the body leaves them out", () => {
    const onDisk = { hf_token: "hf_secret", logging: { level: "debug" }, api: { port: 1 } };
    expect(mergeWithFile({ api: { port: 2 } }, onDisk)).toEqual({
      api: { port: 2 },
      hf_token: "hf_secret",
      logging: { level: "debug" },
    });
    expect(mergeWithFile({ logging: { level: "info" } }, onDisk)).toEqual({
      logging: { level: "info" },
      hf_token: "hf_secret",
    });
  });

  it("never shows hf_token", () => {
    expect(redact({ hf_token: "hf_secret", node: { friendly_name: "a" } })).toEqual({
      node: { friendly_name: "a" },
    });
  });
});

describe("validating a proposed skulk.yaml", () => {
  it.each([
    [{ api: { port: 70000 } }, "api.port", /between 0/],
    [{ api: { port: "http" } }, "api.port", /expected number|between/],
    [{ cluster: { namespace: "has space" } }, "cluster.namespace", /letters/],
    [{ cluster: { peers: ["nohostport"] } }, "cluster.peers", /host:port/],
    [{ logging: { level: "loud" } }, "logging.level", /.+/],
    [{ node: { friendly_name: "" } }, "node.friendly_name", /empty/],
    [{ bogus: { x: 1 } }, "bogus", /unknown section/],
  ])("%j is refused on %s", (yaml, param, why) => {
    const problems = validateConfigYaml(yaml, "skulk.yaml");
    expect(problems.map((p) => p.param)).toEqual([param]);
    expect(problems[0].message).toMatch(why);
    expect(problems[0].message.startsWith(param)).toBe(true);
  });

  it("accepts a good file, including upstream sections it only carries", () => {
    expect(
      validateConfigYaml({
        api: { port: 8080 },
        node: { friendly_name: "a" },
        model_store: { enabled: false },
        hf_token: "x",
      }, "f"),
    ).toEqual([]);
  });

  it("names every wrong key when several are wrong", () => {
    const params = validateConfigYaml({ api: { port: -1 }, cluster: { node_timeout_seconds: 0 } }, "f").map((
      p,
    ) => p.param);
    expect(params).toEqual(["api.port", "cluster.node_timeout_seconds"]);
  });

  it("says whether the new file changes what the node would run with", () => {
    expect(changesSettings({ api: { port: 1 } }, { api: { port: 1 }, connectivity: { relay: true } }, "f"))
      .toBe(
        false,
      );
    // The hub token is a setting the downloads read (hf_token, as upstream's skulk.yaml has it).
    expect(changesSettings({ api: { port: 1 } }, { api: { port: 1 }, hf_token: "t" }, "f")).toBe(true);
    expect(changesSettings({ api: { port: 1 } }, { api: { port: 2 } }, "f")).toBe(true);
  });
});

describe("the settings form's view of the running config", () => {
  it("lists every setting with its kind, hiding the API key's value", () => {
    const { config } = resolveConfig({
      flags: {},
      env: { SKULK_API_KEY: "0123456789abcdef-hidden", SKULK_CLUSTER_SECRET: "cluster-key-hidden" },
      yaml: { api: { port: 1234 } },
    });
    const views = settingViews(config);
    const by = Object.fromEntries(views.map((v) => [v.key, v]));
    expect(by["api.port"]).toMatchObject({
      kind: "number",
      running: 1234,
      env: "SKULK_API_PORT",
      flag: "--api-port",
    });
    expect(by["node.worker"].kind).toBe("boolean");
    expect(by["cluster.peers"].kind).toBe("list");
    expect(by["api.key"].running).toBe("(set)");
    expect(by["cluster.secret"].running).toBe("(set)");
    expect(JSON.stringify(views)).not.toContain("hidden");
  });
});

describe("reading resolveConfig's problem lines", () => {
  it.each([
    [
      "api.port (from /x/skulk.yaml = 99999): must be between 0 (any free port) and 65535",
      "api.port",
      "api.port must be between 0 (any free port) and 65535 (got 99999)",
    ],
    [
      'cluster.peers (from skulk.yaml = ["x"]): each peer must be host:port',
      "cluster.peers",
      'cluster.peers each peer must be host:port (got ["x"])',
    ],
    ["bogus (from skulk.yaml): unknown section", "bogus", "bogus: unknown section"],
  ])("%s", (line, param, message) => {
    expect(readProblem(line)).toEqual({ param, message });
  });
});

describe("credentials in skulk.yaml", () => {
  it("are never shown back and survive a PUT that leaves them out", async () => {
    const { redact, mergeWithFile } = await import("../../src/config/edit.ts");
    const onDisk = {
      api: { port: 1, key: "0123456789abcdef-hidden" },
      cluster: { secret: "s3cret-hidden", namespace: "x" },
      hf_token: "hf_x",
    };
    const shown = redact(onDisk);
    expect(JSON.stringify(shown)).not.toContain("hidden");
    expect(JSON.stringify(shown)).not.toContain("hf_x");
    expect(shown).toEqual({ api: { port: 1 }, cluster: { namespace: "x" } });
    const merged = mergeWithFile({ api: { port: 2 }, cluster: { namespace: "y" } }, onDisk);
    expect(merged).toEqual({
      api: { port: 2, key: "0123456789abcdef-hidden" },
      cluster: { namespace: "y", secret: "s3cret-hidden" },
      hf_token: "hf_x",
    });
  });
  it("are not echoed in a validation error", async () => {
    const { resolveConfig } = await import("../../src/config/load.ts");
    expect(() => resolveConfig({ flags: {}, env: { SKULK_API_KEY: "short-hidden" } })).toThrowError(
      /api\.key \(from SKULK_API_KEY = "\(hidden\)"\)/,
    );
  });
});

describe("cluster-scope settings", () => {
  it("splits a proposed file into cluster keys (dotted) and this node's file", () => {
    expect(splitByScope({
      api: { port: 1, cors_origins: ["http://x.test"] },
      cluster: { node_timeout_seconds: 9, commit_timeout_seconds: 2 },
      node: { friendly_name: "n" },
    })).toEqual({
      cluster: {
        "api.cors_origins": ["http://x.test"],
        "cluster.node_timeout_seconds": 9,
        "cluster.commit_timeout_seconds": 2,
      },
      node: { api: { port: 1 }, node: { friendly_name: "n" } },
    });
    // A section left empty goes; a node-scope key in the same section stays.
    expect(splitByScope({ inference: { default_model: "m" }, cluster: { peers: ["h:1"] } })).toEqual({
      cluster: { "inference.default_model": "m" },
      node: { cluster: { peers: ["h:1"] } },
    });
  });

  it("lays the cluster's values over the node's own, only for cluster keys that parse", () => {
    const own = resolveConfig({ flags: {}, env: { HOME: "/h" }, yaml: {}, yamlPath: "f" }).config;
    const c = withClusterConfig(own, {
      "cluster.node_timeout_seconds": "12",
      "cluster.commit_timeout_seconds": -1,
      "api.port": 7,
    });
    expect(c.nodeTimeout).toBe(12);
    expect(c.commitTimeout).toBe(own.commitTimeout);
    expect(c.apiPort).toBe(own.apiPort);
  });

  it("every setting view says its scope", () => {
    const own = resolveConfig({ flags: {}, env: { HOME: "/h" }, yaml: {}, yamlPath: "f" }).config;
    const scopes = Object.fromEntries(settingViews(own).map((v) => [v.key, v.scope]));
    expect(scopes["cluster.node_timeout_seconds"]).toBe("cluster");
    expect(scopes["inference.default_model"]).toBe("cluster");
    expect(scopes["api.port"]).toBe("node");
    expect(scopes["api.key"]).toBe("node");
    expect(scopes["node.memory_limit"]).toBe("node");
  });

  it("the reducer merges ClusterConfigChanged and a null clears a key", () => {
    let s = applyEvent(
      emptyState(),
      makeEvent("ClusterConfigChanged", { settings: { "a.b": 1, "c.d": [2] } }),
    );
    s = applyEvent(s, makeEvent("ClusterConfigChanged", { settings: { "a.b": null, "e.f": "x" } }));
    expect(s.clusterConfig).toEqual({ "c.d": [2], "e.f": "x" });
    expect(() => makeEvent("ClusterConfigChanged", { settings: { "not a key": 1 } })).toThrow();
  });
});
