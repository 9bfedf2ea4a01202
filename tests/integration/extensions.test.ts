/**
 * Extensions on real nodes with the tiny model and a real llama-server: real modules loaded from skulk.yaml and
 * SKULK_EXTENSIONS, a rewrite visible in usage on every chat-shaped API, onChatResponse once per request with the
 * client's text and usage, throwing, slow and wrong-version extensions contained, the example extensions, a
 * forwarded request transformed once on the node the client called, and the kill switch.
 */
import { NodeDiagnosticsSchema } from "../../src/diagnostics/shapes.ts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { launchBrowser } from "../helpers/browser.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import {
  llamaNodes,
  localCardWire,
  placeOnNode,
  placeReady,
  runnerTag,
  waitForState,
} from "../helpers/cluster.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import type { ExtensionsStatus } from "../../src/extensions/api.ts";
import { waitFor } from "../helpers/multinode.ts";

const MODEL = "skulk-test/ext-tiny";
const EMBED = "skulk-test/ext-embed";
const LONG = 300_000;
const ROOT = new URL("../..", import.meta.url).pathname;
const FIX = `${ROOT}tests/fixtures/extensions`;
const EXAMPLES = `${ROOT}examples/extensions`;
/** What the client asks for; the cap extension lowers it. `ignore_eos` makes the engine use every token. */
const ASKED = 12;
const CAP = 3;
const SYSTEM = "You are a terse assistant.";
/** onChatRequest's budget on node a: generous, since the retrieval example embeds within it on a busy machine. */
const BUDGET = 5000;
/** A chat that mentions this makes the slow extension take two minutes. */
const SLOWLY = "slowly";
const DOCS = ["Foxes are small canids.", "Skulk gossips telemetry every two seconds.", "Tea is a drink."];

interface Record_ {
  node: string;
  requestId: string;
  api: string;
  req: { model: string; max_tokens: number; messages: { role: string; content: unknown }[] };
  res: {
    api: string;
    stream: boolean;
    status: number;
    text: string;
    finishReason: string | null;
    usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
    error: string | null;
  };
}

const readLines = <T>(path: string): T[] => {
  try {
    return Deno.readTextFileSync(path).split("\n").filter(Boolean).map((l) => JSON.parse(l) as T);
  } catch {
    return [];
  }
};

/** The single record for a request id, once onChatResponse wrote it (it runs after the answer). */
async function recordOf(path: string, requestId: string): Promise<Record_> {
  let found: Record_[] = [];
  await waitFor(`onChatResponse for ${requestId}`, () => {
    found = readLines<Record_>(path).filter((r) => r.requestId === requestId);
    return Promise.resolve(found.length > 0);
  }, 30_000);
  return found[0];
}

let seq = 0;
const rid = () => `ext-test-${Date.now()}-${++seq}`;

async function post(url: string, path: string, body: unknown, requestId: string): Promise<Response> {
  return await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": requestId },
    body: JSON.stringify(body),
  });
}

/** SSE data payloads (JSON) of a stream's text. */
const sseData = (text: string) =>
  text.split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]").map((l) =>
    JSON.parse(l.slice(6))
  );

interface Answer {
  text: string;
  completion: number;
  prompt: number;
}

/** One request per API, streamed or not, with what the client read: text and token counts. */
const apis: Record<string, (url: string, stream: boolean, id: string, model?: string) => Promise<Answer>> = {
  async chat_completions(url, stream, id, model = MODEL) {
    const r = await post(url, "/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: "Tell me about foxes" }],
      max_tokens: ASKED,
      ignore_eos: true,
      temperature: 0,
      stream,
    }, id);
    expect(r.status, await r.clone().text()).toBe(200);
    if (!stream) {
      const j = await r.json();
      return {
        text: j.choices[0].message.content,
        completion: j.usage.completion_tokens,
        prompt: j.usage.prompt_tokens,
      };
    }
    const chunks = sseData(await r.text());
    const usage = chunks.at(-1).usage;
    return {
      text: chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join(""),
      completion: usage.completion_tokens,
      prompt: usage.prompt_tokens,
    };
  },
  async messages(url, stream, id) {
    const r = await post(url, "/v1/messages", {
      model: MODEL,
      messages: [{ role: "user", content: "Tell me about foxes" }],
      max_tokens: ASKED,
      stream,
    }, id);
    expect(r.status, await r.clone().text()).toBe(200);
    if (!stream) {
      const j = await r.json();
      return {
        text: j.content.filter((b: { type: string }) => b.type === "text").map((b: { text: string }) =>
          b.text
        )
          .join(""),
        completion: j.usage.output_tokens,
        prompt: j.usage.input_tokens,
      };
    }
    const events = sseData(await r.text());
    return {
      text: events.filter((e) => e.type === "content_block_delta" && e.delta.type === "text_delta")
        .map((e) => e.delta.text).join(""),
      completion: events.find((e) => e.type === "message_delta").usage.output_tokens,
      // The prompt's count comes with the final usage (message_start is sent before the engine counted it).
      prompt: events.find((e) => e.type === "message_delta").usage.input_tokens,
    };
  },
  async responses(url, stream, id) {
    const r = await post(url, "/v1/responses", {
      model: MODEL,
      input: "Tell me about foxes",
      max_output_tokens: ASKED,
      stream,
    }, id);
    expect(r.status, await r.clone().text()).toBe(200);
    const done = stream
      ? sseData(await r.text()).find((e) =>
        e.type === "response.completed" || e.type === "response.incomplete"
      )
        .response
      : await r.json();
    return {
      text: done.output.filter((o: { type: string }) => o.type === "message")
        .flatMap((o: { content: { text: string }[] }) => o.content.map((c) => c.text)).join(""),
      completion: done.usage.output_tokens,
      prompt: done.usage.input_tokens,
    };
  },
  async ollama_chat(url, stream, id) {
    const r = await post(url, "/ollama/api/chat", {
      model: MODEL,
      messages: [{ role: "user", content: "Tell me about foxes" }],
      options: { num_predict: ASKED, temperature: 0 },
      stream,
    }, id);
    expect(r.status, await r.clone().text()).toBe(200);
    const lines = (await r.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const last = lines.at(-1);
    return {
      text: lines.map((l) => l.message?.content ?? "").join(""),
      completion: last.eval_count,
      prompt: last.prompt_eval_count,
    };
  },
};

type Status = ExtensionsStatus;
const status = async (url: string): Promise<Status> => await (await fetch(`${url}/v1/extensions`)).json();

describe("extensions on a real node", () => {
  const nodes = llamaNodes();
  let a: Daemon;
  let runnerId: string;
  const dir = tempDir("skulk-ext-");
  const recorded = `${dir}/recorded.jsonl`;
  const logged = `${dir}/request-log.jsonl`;

  beforeAll(async () => {
    Deno.writeTextFileSync(
      `${dir}/skulk.yaml`,
      stringify({
        extensions: {
          modules: [
            `${FIX}/thrower.js`,
            `${FIX}/slow.js`,
            `${FIX}/future.js`,
            `${FIX}/cap.js`,
            `${EXAMPLES}/system-prompt.js`,
            `${EXAMPLES}/retrieval.js`,
            `${FIX}/recorder.js`,
            `${EXAMPLES}/request-log.js`,
            `${dir}/missing.js`,
          ],
          request_budget_ms: BUDGET,
          config: {
            slow: { ms: 120_000, when: SLOWLY },
            cap: { max_tokens: CAP },
            "system-prompt": { prompt: SYSTEM },
            retrieval: { model: EMBED, documents: DOCS, top: 1 },
            recorder: { path: recorded },
            "request-log": { path: logged },
          },
        },
      }),
    );
    a = await nodes.start(["--config", `${dir}/skulk.yaml`, "--force-master"]);
    runnerId = await placeReady(a, MODEL, await tinyModel());
    await placeOnNode(
      a,
      localCardWire(EMBED, await tinyModel({ pooling: "mean" }), {
        tasks: ["TextEmbedding"],
        capabilities: ["embedding"],
      }),
    );
  }, LONG);
  afterAll(async () => {
    await nodes.killAll();
    Deno.removeSync(dir, { recursive: true });
  });

  it("loads what it can in order, refuses a wrong version and a missing file with why, and starts", async () => {
    const s = await status(a.url);
    expect(s.enabled).toBe(true);
    expect(s.requestBudgetMs).toBe(BUDGET);
    expect(s.loaded.map((e) => e.name)).toEqual([
      "thrower",
      "slow",
      "cap",
      "system-prompt",
      "retrieval",
      "recorder",
      "request-log",
    ]);
    expect(s.loaded.find((e) => e.name === "recorder")?.hooks).toEqual(["onChatResponse"]);
    const future = s.refused.find((r) => r.name === "future");
    expect(future?.reason).toMatch(
      /requires extension API version 2, but this Skulk \(\S+\) supports extension API version 1/,
    );
    const missing = s.refused.find((r) => r.source.endsWith("missing.js"));
    expect(missing?.reason).toMatch(/cannot be loaded/);
    expect(a.log()).toMatch(/extension .*future\.js refused: future requires extension API version 2/);
    // Node diagnostics carry the same status, and a refusal is a warning there.
    const diag = NodeDiagnosticsSchema.parse(await (await fetch(`${a.url}/v1/diagnostics/node`)).json());
    expect(diag.extensions.loaded.map((e) => e.name)).toEqual(s.loaded.map((e) => e.name));
    expect(diag.warnings.some((w) => /extension future refused: .*API version 2/.test(w))).toBe(true);
  });

  it("the dashboard's settings list them, and saving the form keeps their config", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.page({ width: 1280, height: 1400 });
      await page.goto(`${a.url}/settings`);
      const panel = page.getByRole("region", { name: "Extensions" });
      await panel.getByText("request-log", { exact: true }).waitFor();
      const text = await panel.textContent() ?? "";
      for (const name of ["thrower", "slow", "cap", "system-prompt", "retrieval", "recorder"]) {
        expect(text).toContain(name);
      }
      expect(text).toMatch(/future\s*refused.*requires extension API version 2/s);
      expect(text).toMatch(/missing\.js\s*refused/);
      // The per-extension config is shown, not edited: a save writes it back as it was.
      await page.getByLabel("friendly name").fill("ext-node");
      await page.getByRole("button", { name: "Save settings" }).click();
      await page.getByText(/saved .*skulk\.yaml/).waitFor();
      const saved = parse(Deno.readTextFileSync(`${dir}/skulk.yaml`)) as {
        node: { friendly_name: string };
        extensions: { modules: string[]; config: Record<string, unknown> };
      };
      expect(saved.node.friendly_name).toBe("ext-node");
      expect(saved.extensions.config.cap).toEqual({ max_tokens: CAP });
      expect(saved.extensions.modules).toHaveLength(9);
    } finally {
      await browser.close();
    }
  }, LONG);

  for (const api of Object.keys(apis)) {
    for (const stream of [false, true]) {
      it(
        `${api}${stream ? ", streamed" : ""}: rewritten once, observed once with the client's text and usage`,
        async () => {
          const id = rid();
          const got = await apis[api](a.url, stream, id);
          // The cap (3) applied, not the thrower's (1), nor the client's 12.
          expect(got.completion).toBe(CAP);
          const r = await recordOf(recorded, id);
          expect(r.api).toBe(api);
          expect(r.res).toMatchObject({ api, stream, status: 200, error: null });
          expect(r.res.text).toBe(got.text);
          expect(r.res.usage).toEqual({
            prompt_tokens: got.prompt,
            completion_tokens: CAP,
            total_tokens: got.prompt + CAP,
          });
          // The request as the engine got it: capped, the injected system prompt, the retrieved document.
          expect(r.req.max_tokens).toBe(CAP);
          const systems = r.req.messages.filter((m) => m.role === "system").map((m) => String(m.content));
          expect(systems).toContain(SYSTEM);
          expect(
            systems.some((s) =>
              s.startsWith("Use this context if it helps:") && DOCS.some((d) => s.includes(d))
            ),
            JSON.stringify((await status(a.url)).loaded.find((e) => e.name === "retrieval")),
          ).toBe(true);
          // The request-log example wrote its line for the same request.
          await waitFor(
            "the request-log line",
            () => Promise.resolve(readLines<{ request_id: string }>(logged).some((l) => l.request_id === id)),
          );
          const line = readLines<{ request_id: string; text: string; usage: unknown; api: string }>(logged)
            .find((l) => l.request_id === id)!;
          expect(line).toMatchObject({ api, text: got.text, usage: r.res.usage });
        },
        LONG,
      );
    }
  }

  it("abandons a slow onChatRequest at its budget: the request goes on without its change", async () => {
    const id = rid();
    const t0 = performance.now();
    const r = await post(a.url, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: `Answer ${SLOWLY}` }],
      max_tokens: ASKED,
      ignore_eos: true,
    }, id);
    const ms = performance.now() - t0;
    expect(r.status).toBe(200);
    // The slow extension's max_tokens of 1 never applied; the cap after it did.
    expect((await r.json()).usage.completion_tokens).toBe(CAP);
    // Waited for at its 5 s budget, not for its two minutes.
    expect(ms).toBeGreaterThanOrEqual(BUDGET);
    expect(ms).toBeLessThan(60_000);
    const slow = (await status(a.url)).loaded.find((e) => e.name === "slow")!;
    expect(slow.timeouts).toBe(1);
    expect(slow.lastError?.message).toBe(`took longer than its ${BUDGET} ms budget and was abandoned`);
    expect(a.log()).toMatch(/extension slow: onChatRequest failed: took longer than its 5000 ms budget/);
  }, LONG);

  it("calls onChatResponse exactly once per request, and counts every contained failure", async () => {
    // onChatResponse runs after the answer: the last one's call may be counted before its line is on disk,
    // so wait for the file to catch up with the count (a second line per request would never match it).
    let s = await status(a.url);
    let byName = Object.fromEntries(s.loaded.map((e) => [e.name, e]));
    let lines = readLines<Record_>(recorded);
    for (let i = 0; i < 100 && byName.recorder.calls.onChatResponse !== lines.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
      s = await status(a.url);
      byName = Object.fromEntries(s.loaded.map((e) => [e.name, e]));
      lines = readLines<Record_>(recorded);
    }
    const requests = byName.cap.calls.onChatRequest;
    expect(requests).toBeGreaterThanOrEqual(8);
    // Every hook saw every request; the recorder wrote one line per request, no more.
    expect(new Set(lines.map((l) => l.requestId)).size).toBe(lines.length);
    expect(byName.recorder.calls.onChatResponse).toBe(lines.length);
    expect(byName.thrower.errors).toBe(
      byName.thrower.calls.onChatRequest + byName.thrower.calls.onChatResponse,
    );
    expect(byName.slow.calls.onChatRequest).toBe(requests);
    expect(byName.cap.errors + byName.cap.timeouts).toBe(0);
    expect(a.log()).toMatch(/extension thrower: onChatRequest failed: thrower refuses every request/);
    expect(a.log()).toMatch(/extension thrower: onChatResponse failed: thrower rejects every answer/);
  });

  it(
    "observes a failed request too: an unknown model is answered 404 and reported with its error",
    async () => {
      const id = rid();
      const r = await post(a.url, "/v1/chat/completions", {
        model: "nobody/nothing",
        messages: [{ role: "user", content: "hi" }],
      }, id);
      expect(r.status).toBe(404);
      const rec = await recordOf(recorded, id);
      expect(rec.res.status).toBe(404);
      expect(rec.res.error).toMatch(/No instance found for model nobody\/nothing/);
    },
    LONG,
  );

  describe("across two nodes", () => {
    let b: Daemon | undefined;
    const bDir = tempDir("skulk-ext-b-");
    const bRecorded = `${bDir}/recorded.jsonl`;
    Deno.writeTextFileSync(
      `${bDir}/skulk.yaml`,
      stringify({ extensions: { config: { cap: { max_tokens: CAP + 2 }, recorder: { path: bRecorded } } } }),
    );
    /** Node b joins a's cluster, its extensions named by SKULK_EXTENSIONS (its skulk.yaml holds their config). */
    const startB = async (env: Record<string, string>) => {
      b = await startDaemon({
        dataDir: `${bDir}/data`,
        args: ["--no-mdns", "--config", `${bDir}/skulk.yaml`, "--peer", `127.0.0.1:${a.port}`],
        env: {
          SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
          SKULK_EXTENSIONS: `${FIX}/cap.js,${FIX}/recorder.js`,
          ...env,
        },
      });
      await waitForState(b.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "b to see the model ready");
      // b forwards to a once a's telemetry (which carries its API address) has reached it.
      await waitFor("b to have a's telemetry", async () => {
        const st = await (await fetch(`${b!.url}/state`)).json() as { lastSeen?: Record<string, string> };
        return st.lastSeen?.[a.nodeId] !== undefined;
      }, 60_000);
      return b;
    };
    afterAll(async () => {
      await b?.kill();
      Deno.removeSync(bDir, { recursive: true });
    });

    it("transforms a request once, on the node the client called, before it is forwarded", async () => {
      const b = await startB({});
      expect((await status(b.url)).loaded.map((e) => e.name)).toEqual(["cap", "recorder"]);
      const capOnA = async () =>
        (await status(a.url)).loaded.find((e) => e.name === "cap")!.calls.onChatRequest;
      const before = await capOnA();
      for (const stream of [false, true]) {
        const id = rid();
        const got = await apis.chat_completions(b.url, stream, id);
        // b's cap (5) applied; a, which drives the model, did not cap it again to 3.
        expect(got.completion).toBe(CAP + 2);
        const rec = await recordOf(bRecorded, id);
        expect(rec.node).toBe(b.nodeId);
        expect(rec.res.text).toBe(got.text);
        expect(rec.res.usage?.completion_tokens).toBe(CAP + 2);
        expect(readLines<Record_>(recorded).some((r) => r.requestId === id)).toBe(false);
      }
      // A translating API: the forward carries the extended request beside the client's body.
      expect((await apis.messages(b.url, true, rid())).completion).toBe(CAP + 2);
      expect((await apis.ollama_chat(b.url, false, rid())).completion).toBe(CAP + 2);
      expect(await capOnA()).toBe(before);
    }, LONG);

    it(
      "SKULK_EXTENSIONS_DISABLE=1 loads none of them, and requests through that node are untouched",
      async () => {
        await b!.stop();
        const off = await startB({ SKULK_EXTENSIONS_DISABLE: "1" });
        const s = await status(off.url);
        expect(s.enabled).toBe(false);
        expect(s.loaded).toEqual([]);
        expect(s.refused).toEqual([]);
        expect(off.log()).toMatch(/extensions disabled .* 2 not loaded/);
        const id = rid();
        expect((await apis.chat_completions(off.url, false, id)).completion).toBe(ASKED);
        expect(readLines<Record_>(bRecorded).some((r) => r.requestId === id)).toBe(false);
      },
      LONG,
    );
  });
});
