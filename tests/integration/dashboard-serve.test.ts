import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DASHBOARD_ASSETS } from "../../src/generated/dashboard.gen.ts";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";

describe("the dashboard served by a real node", () => {
  let node: Daemon;
  beforeAll(async () => {
    node = await startDaemon();
  });
  afterAll(async () => {
    await node?.stop();
    await Deno.remove(node.dataDir, { recursive: true }).catch(() => undefined);
  });

  it.each(["/", "/cluster", "/model-store", "/chat", "/operator", "/settings"])(
    "%s answers the single page",
    async (path) => {
      const res = await fetch(`${node.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(res.headers.get("cache-control")).toBe("no-cache");
      const html = await res.text();
      expect(html).toMatch(/<script type="module" src="\/assets\/app-[A-Z0-9]+\.js"><\/script>/);
    },
  );

  it("serves every embedded asset with its type, hashed ones cached for good", async () => {
    const html = await (await fetch(`${node.url}/`)).text();
    const refs = [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]).filter((r) =>
      !r.startsWith("/api/")
    );
    expect(refs.length).toBeGreaterThanOrEqual(3);
    for (const ref of refs) expect(DASHBOARD_ASSETS.some((a) => a.path === ref)).toBe(true);
    for (const a of DASHBOARD_ASSETS) {
      const res = await fetch(`${node.url}${a.path}`);
      expect(res.status).toBe(200);
      const body = new Uint8Array(await res.arrayBuffer());
      expect(body.length).toBe(atob(a.base64).length);
      const ext = a.path.split(".").at(-1);
      expect(res.headers.get("content-type")).toMatch(
        { js: /^text\/javascript/, css: /^text\/css/, html: /^text\/html/, svg: /^image\/svg/ }[ext!]!,
      );
      if (a.path.startsWith("/assets/")) {
        expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      }
    }
  });

  it("shadows no API route: API paths keep answering JSON, unknown paths the 404 envelope", async () => {
    const state = await fetch(`${node.url}/state`);
    expect(state.headers.get("content-type")).toMatch(/application\/json/);
    expect(await state.json()).toHaveProperty("nodeIdentities");
    for (const path of ["/cluster/peer/anything", "/chat/x", "/nope", "/assets/missing.js"]) {
      const res = await fetch(`${node.url}${path}`);
      expect(res.status).toBe(404);
      expect((await res.json()).error.code).toBe(404);
    }
  });
});
