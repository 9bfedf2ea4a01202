/**
 * The extension guards and loader without a node: real modules written to disk and imported, hooks that throw,
 * reject, hang, mutate and return junk, the version gate, the compiled-binary fallback import, the response
 * folds of every chat API, and the tap's once-only report after the last byte.
 */
import { afterAll, describe, expect, it } from "vitest";
import { resolveConfig } from "../../src/config/load.ts";
import { settingViews } from "../../src/config/edit.ts";
import type { ChatRequest, ChatResponse } from "../../src/extensions/api.ts";
import { errorText, guarded } from "../../src/extensions/guard.ts";
import { checkExport, importModule, loadExtensions, moduleUrl } from "../../src/extensions/load.ts";
import { foldChunk, foldReply, newFold, summaryOf, tapResponse } from "../../src/extensions/summary.ts";

const dir = Deno.makeTempDirSync({ prefix: "skulk-ext-unit-" });
afterAll(() => Deno.removeSync(dir, { recursive: true }));
let n = 0;
/** Writes a real module file and returns its path. */
const mod = (source: string) => {
  const path = `${dir}/m${++n}.js`;
  Deno.writeTextFileSync(path, source);
  return path;
};
const REQ: ChatRequest = { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 10 };
const CHAT = { api: "chat_completions" as const, requestId: "r1" };
const noEmbed = () => Promise.reject(new Error("no embeddings here"));
const load = (specs: string[], extra: Partial<Parameters<typeof loadExtensions>[0]> = {}) =>
  loadExtensions({
    specs,
    configs: {},
    enabled: true,
    requestBudgetMs: 200,
    hookBudgetMs: 500,
    nodeId: "node-1",
    embed: noEmbed,
    ...extra,
  });

describe("guarded", () => {
  it("passes a value, catches a sync throw and a rejection, abandons a hang at the budget", async () => {
    expect(await guarded(() => 7, 100)).toMatchObject({ kind: "ok", value: 7 });
    expect(await guarded(() => Promise.resolve(8), 100)).toMatchObject({ kind: "ok", value: 8 });
    const thrown = await guarded(() => {
      throw new TypeError("bad");
    }, 100);
    expect(thrown.kind).toBe("error");
    expect(errorText((thrown as { error: unknown }).error)).toBe("TypeError: bad");
    expect((await guarded(() => Promise.reject("no"), 100)).kind).toBe("error");
    const t0 = performance.now();
    const hung = await guarded(() => new Promise(() => {}), 50);
    expect(hung.kind).toBe("timeout");
    expect(performance.now() - t0).toBeLessThan(1000);
    // A late rejection after the budget is swallowed (an unhandled rejection would fail the run).
    expect(
      (await guarded(() => new Promise((_, rej) => setTimeout(() => rej(new Error("late")), 80)), 20)).kind,
    ).toBe("timeout");
    await new Promise((r) => setTimeout(r, 100));
  });
});

describe("loading", () => {
  it("turns paths into file URLs and keeps URLs and npm: specifiers", () => {
    expect(moduleUrl("/opt/x.js", "/tmp")).toBe("file:///opt/x.js");
    expect(moduleUrl("ext/x.js", "/srv")).toBe("file:///srv/ext/x.js");
    for (const s of ["npm:skulk-ext@1", "https://example.invalid/x.js", "file:///a.js", "jsr:@a/b"]) {
      expect(moduleUrl(s, "/")).toBe(s);
    }
  });

  it("gates the API version first, naming both versions, then checks the shape", () => {
    expect(checkExport({ default: { name: "x", apiVersion: 2 } })).toMatchObject({
      ok: false,
      name: "x",
      reason: expect.stringMatching(
        /^x requires extension API version 2, but this Skulk \(.+\) supports extension API version 1$/,
      ),
    });
    expect(checkExport({ default: { name: "x" } })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/requires no extension API version/),
    });
    expect(checkExport({ default: { name: "x y", apiVersion: 1 } })).toMatchObject({ ok: false });
    expect(checkExport({ default: { name: "x", apiVersion: 1, onChatRequest: "no" } })).toMatchObject({
      ok: false,
      reason: "onChatRequest must be a function",
    });
    expect(checkExport({})).toMatchObject({ ok: false, reason: /default export/ });
    expect(checkExport({ default: { name: "x", apiVersion: 1 } }).ok).toBe(true);
  });

  it("loads real modules in order, refuses the broken ones with why, runs setup with its config", async () => {
    const host = await load([
      mod(
        `export default { name: "a", apiVersion: 1, setup(ctx) { if (ctx.config.k !== 1) throw new Error("k"); } };`,
      ),
      mod(`export default { name: "b", apiVersion: 3 };`),
      mod(`throw new Error("evaluation failed");`),
      mod(`export default { name: "c", apiVersion: 1, setup() { throw new Error("no setup for you"); } };`),
      mod(`export default { name: "a", apiVersion: 1 };`),
      mod(`export default { name: "d", apiVersion: 1, setup() { return new Promise(() => {}); } };`),
      `${dir}/nope.js`,
    ], { configs: { a: { k: 1 } } });
    const s = host.status();
    expect(s.loaded.map((l) => l.name)).toEqual(["a"]);
    expect(s.refused.map((r) => r.reason)).toEqual([
      expect.stringMatching(/b requires extension API version 3/),
      expect.stringMatching(/cannot be loaded: evaluation failed/),
      "setup failed: no setup for you",
      "another extension already loaded is named a",
      "setup took longer than 500 ms",
      expect.stringMatching(/cannot be loaded: .*nope\.js/),
    ]);
  });

  it("loads nothing when disabled", async () => {
    const host = await load([mod(`export default { name: "a", apiVersion: 1 };`)], { enabled: false });
    expect(host.status()).toMatchObject({ enabled: false, loaded: [], refused: [] });
  });

  it("falls back to the file's text as a data: URL where the runtime cannot import the file (deno compile)", async () => {
    const path = mod(`export default { name: "compiled", apiVersion: 1 };`);
    const seen: string[] = [];
    // A compiled binary's loader: it knows no file outside the binary, but evaluates data: URLs.
    const compiled = (url: string) => {
      seen.push(url.slice(0, 5));
      return url.startsWith("file:")
        ? Promise.reject(new TypeError(`Module not found: ${url}`))
        : import(url);
    };
    const m = await importModule(moduleUrl(path, "/"), compiled) as { default: { name: string } };
    expect(m.default.name).toBe("compiled");
    expect(seen).toEqual(["file:", "data:"]);
    // Another failure is the module's own, and is not retried.
    await expect(importModule("file:///x.js", () => Promise.reject(new Error("syntax")))).rejects.toThrow(
      "syntax",
    );
  });
});

describe("onChatRequest", () => {
  it("chains in load order; a throw, a hang or junk leaves the request as the previous hook left it", async () => {
    const host = await load([
      mod(
        `export default { name: "cap", apiVersion: 1, onChatRequest(r) { return { ...r, max_tokens: 3 }; } };`,
      ),
      mod(
        `export default { name: "boom", apiVersion: 1, onChatRequest(r) { r.max_tokens = 1; r.messages.length = 0; throw new Error("boom"); } };`,
      ),
      mod(
        `export default { name: "hang", apiVersion: 1, onChatRequest(r) { return new Promise(() => {}); } };`,
      ),
      mod(`export default { name: "junk", apiVersion: 1, onChatRequest() { return { nothing: true }; } };`),
      mod(`export default { name: "inplace", apiVersion: 1, onChatRequest(r) { r.temperature = 0; } };`),
      mod(`export default { name: "same", apiVersion: 1, onChatRequest(r) { return undefined; } };`),
    ]);
    const req = structuredClone(REQ);
    const t0 = performance.now();
    const out = await host.onChatRequest(req, CHAT);
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(out.changed).toBe(true);
    expect(out.req).toEqual({ ...REQ, max_tokens: 3, temperature: 0 });
    expect(req).toEqual(REQ);
    const s = Object.fromEntries(host.status().loaded.map((l) => [l.name, l]));
    expect(s.boom).toMatchObject({
      errors: 1,
      timeouts: 0,
      lastError: { hook: "onChatRequest", message: "boom" },
    });
    expect(s.hang).toMatchObject({ errors: 0, timeouts: 1 });
    expect(s.junk.errors).toBe(1);
    expect(s.junk.lastError?.message).toMatch(/unusable request .*messages/);
    expect(s.cap).toMatchObject({ errors: 0, calls: { onChatRequest: 1 } });
  });

  it("reports no change when the hooks give the request back as it was", async () => {
    const host = await load([
      mod(`export default { name: "echo", apiVersion: 1, onChatRequest(r) { return { ...r }; } };`),
    ]);
    const out = await host.onChatRequest(REQ, CHAT);
    expect(out).toEqual({ req: REQ, changed: false });
  });
});

describe("onChatResponse", () => {
  it("runs each observer in the background, contains a throw and a hang, and counts them", async () => {
    const seen: ChatResponse[] = [];
    (globalThis as Record<string, unknown>).__extSeen = seen;
    const host = await load([
      mod(
        `export default { name: "see", apiVersion: 1, onChatResponse(q, r) { globalThis.__extSeen.push(r); } };`,
      ),
      mod(`export default { name: "bad", apiVersion: 1, onChatResponse() { throw new Error("bad"); } };`),
      mod(
        `export default { name: "slow", apiVersion: 1, onChatResponse() { return new Promise(() => {}); } };`,
      ),
    ], { hookBudgetMs: 100 });
    const res = summaryOf("chat_completions", false, 200, {
      ...newFold(),
      text: "hello",
      completion: 2,
      prompt: 3,
    });
    host.onChatResponse(REQ, res, CHAT);
    // Nothing ran yet: the caller went on at once.
    expect(seen).toEqual([]);
    await host.settled();
    expect(seen).toEqual([res]);
    const s = Object.fromEntries(host.status().loaded.map((l) => [l.name, l]));
    expect(s.bad).toMatchObject({ errors: 1, lastError: { hook: "onChatResponse", message: "bad" } });
    expect(s.slow.timeouts).toBe(1);
    expect(s.see.calls.onChatResponse).toBe(1);
  });
});

describe("response folds", () => {
  const usage = { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 };
  it("reads every API's reply and its stream alike", () => {
    const cases: [Parameters<typeof foldChunk>[0], unknown, unknown[]][] = [
      [
        "chat_completions",
        { choices: [{ message: { content: "Hi you" }, finish_reason: "length" }], usage },
        [
          { choices: [{ delta: { content: "Hi" } }] },
          { choices: [{ delta: { content: " you" }, finish_reason: "length" }] },
          { choices: [], usage },
        ],
      ],
      [
        "messages",
        {
          content: [{ type: "text", text: "Hi you" }],
          stop_reason: "length",
          usage: { input_tokens: 4, output_tokens: 2 },
        },
        [
          { type: "message_start", message: { usage: { input_tokens: 4, output_tokens: 0 } } },
          { type: "content_block_delta", delta: { type: "text_delta", text: "Hi" } },
          { type: "content_block_delta", delta: { type: "text_delta", text: " you" } },
          { type: "message_delta", delta: { stop_reason: "length" }, usage: { output_tokens: 2 } },
        ],
      ],
      [
        "responses",
        {
          status: "incomplete",
          incomplete_details: { reason: "length" },
          output: [{ type: "message", content: [{ type: "output_text", text: "Hi you" }] }],
          usage: { input_tokens: 4, output_tokens: 2, total_tokens: 6 },
        },
        [
          { type: "response.output_text.delta", delta: "Hi" },
          { type: "response.output_text.delta", delta: " you" },
          {
            type: "response.incomplete",
            response: {
              incomplete_details: { reason: "length" },
              usage: { input_tokens: 4, output_tokens: 2 },
            },
          },
        ],
      ],
      [
        "ollama_chat",
        {
          message: { content: "Hi you" },
          done: true,
          done_reason: "length",
          prompt_eval_count: 4,
          eval_count: 2,
        },
        [
          { message: { content: "Hi" }, done: false },
          { message: { content: " you" }, done: false },
          {
            message: { content: "" },
            done: true,
            done_reason: "length",
            prompt_eval_count: 4,
            eval_count: 2,
          },
        ],
      ],
    ];
    for (const [api, reply, chunks] of cases) {
      const whole = newFold();
      foldReply(api, whole, 200, reply);
      const streamed = newFold();
      for (const c of chunks) foldChunk(api, streamed, c);
      for (const f of [whole, streamed]) {
        expect(summaryOf(api, false, 200, f)).toMatchObject({
          text: "Hi you",
          finishReason: "length",
          usage,
          error: null,
        });
      }
    }
  });

  it("reports an error status and an error event", () => {
    const f = newFold();
    foldReply("messages", f, 503, { type: "error", error: { type: "overloaded_error", message: "busy" } });
    expect(summaryOf("messages", false, 503, f).error).toBe("busy");
    const g = newFold();
    foldChunk("ollama_chat", g, { error: "engine died" });
    expect(summaryOf("ollama_chat", true, 200, g).error).toBe("engine died");
  });
});

describe("tapResponse", () => {
  const sse = (payloads: unknown[]) =>
    payloads.map((p) => `data: ${JSON.stringify(p)}\n\n`).join("") + "data: [DONE]\n\n";

  it("passes every byte through unchanged and reports once, after the last one", async () => {
    const text = sse([{ choices: [{ delta: { content: "a" } }] }, {
      choices: [{ delta: { content: "é" } }],
    }]);
    const bytes = new TextEncoder().encode(text);
    // Split mid-character and mid-line, as a network would.
    const parts = [bytes.slice(0, 7), bytes.slice(7, 40), bytes.slice(40)];
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(p);
        c.close();
      },
    });
    const reports: ChatResponse[] = [];
    const res = tapResponse(
      new Response(body, { headers: { "content-type": "text/event-stream" } }),
      "chat_completions",
      (r) => reports.push(r),
    );
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe(text);
    expect(reports).toEqual([]);
    await new Promise((r) => setTimeout(r, 10));
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ text: "aé", stream: true, error: null });
  });

  it("reports a client that went away, once", async () => {
    const reports: ChatResponse[] = [];
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new TextEncoder().encode(`{"message":{"content":"x"},"done":false}\n`));
      },
    });
    const res = tapResponse(
      new Response(body, { headers: { "content-type": "application/x-ndjson" } }),
      "ollama_chat",
      (r) => reports.push(r),
    );
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    await new Promise((r) => setTimeout(r, 10));
    expect(reports).toHaveLength(1);
    expect(reports[0].error).toMatch(/client went away/);
  });
});

describe("settings", () => {
  it("reads modules from skulk.yaml or SKULK_EXTENSIONS, per-extension config, the kill switch", () => {
    const yaml = {
      extensions: {
        modules: ["/a.js", "npm:b@1"],
        config: { a: { path: "/tmp/x", n: 2 } },
        request_budget_ms: 750,
      },
    };
    const { config } = resolveConfig({ flags: {}, env: {}, yaml });
    expect(config.extensions).toEqual(["/a.js", "npm:b@1"]);
    expect(config.extensionsConfig).toEqual({ a: { path: "/tmp/x", n: 2 } });
    expect(config.extensionsRequestBudgetMs).toBe(750);
    expect(config.extensionsDisable).toBe(false);
    const env = resolveConfig({
      flags: {},
      env: { SKULK_EXTENSIONS: " /c.js , https://h.invalid/d.js ", SKULK_EXTENSIONS_DISABLE: "1" },
      yaml,
    }).config;
    expect(env.extensions).toEqual(["/c.js", "https://h.invalid/d.js"]);
    expect(env.extensionsConfig).toEqual({ a: { path: "/tmp/x", n: 2 } });
    expect(env.extensionsDisable).toBe(true);
    expect(() => resolveConfig({ flags: {}, env: {}, yaml: { extensions: { config: { a: 3 } } } })).toThrow(
      /extensions\.config/,
    );
  });

  it("shows each extension's config to the settings form as a mapping it leaves to skulk.yaml", () => {
    const { config } = resolveConfig({
      flags: {},
      env: {},
      yaml: { extensions: { config: { a: { k: 1 } } } },
    });
    const views = Object.fromEntries(settingViews(config).map((v) => [v.key, v]));
    expect(views["extensions.config"]).toMatchObject({ kind: "mapping", running: { a: { k: 1 } } });
    expect(views["extensions.modules"].kind).toBe("list");
    expect(views["extensions.disable"]).toMatchObject({ kind: "boolean", env: "SKULK_EXTENSIONS_DISABLE" });
  });
});
