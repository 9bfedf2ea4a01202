/** The origin decision of src/api/guards.ts on its own: which requests a browser page may send to a node. */
import { describe, expect, it } from "vitest";
import { isOwnOrigin, refusedOrigin } from "../../src/api/guards.ts";
import { resolveConfig } from "../../src/config/load.ts";

const host = "192.168.1.20:52415";
const write = (origin?: string, fetchSite?: string) =>
  refusedOrigin({ method: "POST", origin, fetchSite, host, websocket: false }, []);

describe("isOwnOrigin", () => {
  it("matches the authority the request was sent to, whatever the scheme and default port", () => {
    expect(isOwnOrigin("http://192.168.1.20:52415", host)).toBe(true);
    expect(isOwnOrigin("https://skulk.lan", "skulk.lan")).toBe(true); // behind a TLS proxy on 443
    expect(isOwnOrigin("http://skulk.lan:80", "skulk.lan")).toBe(true);
    expect(isOwnOrigin("http://[::1]:52415", "[::1]:52415")).toBe(true);
    expect(isOwnOrigin("http://192.168.1.20:8080", host)).toBe(false); // another port is another origin
    expect(isOwnOrigin("http://192.168.1.21:52415", host)).toBe(false);
    expect(isOwnOrigin("null", host)).toBe(false); // sandboxed frames, file:// pages
    expect(isOwnOrigin("http://192.168.1.20:52415", undefined)).toBe(false);
  });
});

describe("refusedOrigin", () => {
  it("lets reads and preflights through, and clients that send no Origin", () => {
    for (const method of ["GET", "HEAD", "OPTIONS"]) {
      expect(refusedOrigin({ method, origin: "http://evil.example", host, websocket: false }, [])).toBeNull();
    }
    expect(write()).toBeNull();
    expect(write(undefined, "none")).toBeNull(); // typed into the address bar, bookmarks
  });

  it("refuses writes and WebSockets from another origin, naming it", () => {
    expect(write("http://evil.example")).toBe("http://evil.example");
    expect(write("null")).toBe("null");
    expect(write(undefined, "cross-site")).toContain("cross-site");
    expect(refusedOrigin({ method: "GET", origin: "http://evil.example", host, websocket: true }, []))
      .toBe("http://evil.example");
  });

  it("accepts the node's own pages and the allowlist; `*` accepts every origin", () => {
    expect(write(`http://${host}`, "same-origin")).toBeNull();
    const listed = { method: "DELETE", origin: "http://localhost:5173", host, websocket: false };
    expect(refusedOrigin(listed, ["http://localhost:5173"])).toBeNull();
    expect(refusedOrigin(listed, ["http://localhost:5174"])).toBe("http://localhost:5173");
    expect(refusedOrigin({ ...listed, origin: "http://anything.example" }, ["*"])).toBeNull();
  });
});

describe("the guards' settings", () => {
  const resolve = (env: Record<string, string>) =>
    resolveConfig({ flags: {}, env: { HOME: "/tmp", ...env } }).config;

  it("reads the origin allowlist, the body limit and the caps, with their defaults", () => {
    const d = resolve({});
    expect([d.corsOrigins, d.maxBodyBytes, d.bodyTimeout]).toEqual([[], 1024 * 1024, 30]);
    expect([d.maxConcurrentStreams, d.maxRealtimeSessions, d.testMode]).toEqual([256, 32, false]);
    const c = resolve({
      SKULK_CORS_ORIGINS: "http://localhost:5173, https://ops.example",
      SKULK_MAX_BODY_BYTES: "4MiB",
      SKULK_MAX_CONCURRENT_STREAMS: "8",
      SKULK_TEST_MODE: "1",
    });
    expect(c.corsOrigins).toEqual(["http://localhost:5173", "https://ops.example"]);
    expect([c.maxBodyBytes, c.maxConcurrentStreams, c.testMode]).toEqual([4 * 1024 * 1024, 8, true]);
    expect(resolve({ SKULK_CORS_ORIGINS: "*" }).corsOrigins).toEqual(["*"]);
  });

  it("refuses an origin that is not scheme://host[:port], naming the key", () => {
    for (const bad of ["http://localhost:5173/", "localhost:5173", "ftp://x", "http://x/app"]) {
      expect(() => resolve({ SKULK_CORS_ORIGINS: bad })).toThrow(/api\.cors_origins/);
    }
    expect(() => resolve({ SKULK_MAX_REALTIME_SESSIONS: "0" })).toThrow(/api\.max_realtime_sessions/);
  });
});
