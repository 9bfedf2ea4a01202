import { describe, expect, it } from "vitest";
import { skulk } from "../helpers/daemon.ts";

describe("skulk cards audit", () => {
  it("passes on the bundled cards and says how many it checked", async () => {
    const r = await skulk(["cards", "audit"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\d+ cards: 0 with problems, 0 duplicate ids/);
  });

  it("--live reports every hub reference it cannot find, and fails", async () => {
    const present = "/unsloth/Llama-3.2-1B-Instruct-GGUF/resolve/main/Llama-3.2-1B-Instruct-Q4_K_M.gguf";
    const seen: string[] = [];
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
      const path = decodeURIComponent(new URL(req.url).pathname);
      seen.push(path);
      return path === present ? new Response(null, { status: 200 }) : new Response(null, { status: 404 });
    });
    try {
      const r = await skulk(["cards", "audit", "--live"], {
        HF_ENDPOINT: `http://127.0.0.1:${server.addr.port}`,
      });
      expect(r.code).toBe(1);
      expect(r.stdout).not.toContain(`MISSING http://127.0.0.1:${server.addr.port}${present}`);
      expect(r.stdout).toMatch(/MISSING .*bge-small-en-v1\.5-f16\.gguf \(404\)/);
      expect(r.stdout).toMatch(/live: 1\/\d+ hub references found/);
      expect(seen).toContain(present);
    } finally {
      await server.shutdown();
    }
  });
});
