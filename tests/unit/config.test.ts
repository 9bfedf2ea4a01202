import { describe, expect, it } from "vitest";
import { ConfigError, resolveConfig } from "../../src/config/load.ts";

const base = { flags: {}, env: {} };

describe("config resolution", () => {
  it("uses defaults when nothing is given", () => {
    const { config, sources } = resolveConfig({ ...base, env: { HOME: "/home/u" } });
    expect(config.apiPort).toBe(52415);
    expect(sources.apiPort).toBe("default");
    expect(config.worker).toBe(true);
  });

  it("orders flags over env over skulk.yaml over defaults", () => {
    const yaml = { api: { port: 1111 }, node: { friendly_name: "from-yaml", data_dir: "/y" } };
    const { config, sources } = resolveConfig({
      flags: { apiPort: "3333" },
      env: { SKULK_API_PORT: "2222", SKULK_FRIENDLY_NAME: "from-env" },
      yaml,
    });
    expect(config.apiPort).toBe(3333);
    expect(sources.apiPort).toBe("flag");
    expect(config.friendlyName).toBe("from-env");
    expect(config.dataDir).toBe("/y");
    expect(sources.dataDir).toBe("skulk.yaml");
  });

  it("names the key, its source and why for a bad value", () => {
    expect(() => resolveConfig({ ...base, env: { SKULK_API_PORT: "http" } })).toThrowError(ConfigError);
    try {
      resolveConfig({ ...base, env: { SKULK_API_PORT: "99999" }, yaml: { logging: { level: "loud" } } });
    } catch (e) {
      const msg = (e as Error).message;
      expect(msg).toContain("api.port (from SKULK_API_PORT");
      expect(msg).toContain("65535");
      expect(msg).toContain("logging.level (from skulk.yaml");
    }
  });

  it("rejects unknown skulk.yaml sections and accepts upstream ones", () => {
    expect(() => resolveConfig({ ...base, yaml: { model_store: { enabled: false }, tracing: {} } })).not
      .toThrow();
    expect(() => resolveConfig({ ...base, yaml: { apii: { port: 1 } } })).toThrowError(
      /apii.*unknown section/,
    );
  });

  it("parses peers and booleans from the environment", () => {
    const { config } = resolveConfig({
      ...base,
      env: { SKULK_PEERS: "10.0.0.2:52415, b:1", SKULK_WORKER: "false" },
    });
    expect(config.peers).toEqual(["10.0.0.2:52415", "b:1"]);
    expect(config.worker).toBe(false);
    expect(() => resolveConfig({ ...base, env: { SKULK_PEERS: "nohost" } })).toThrowError(/cluster.peers/);
  });
});
