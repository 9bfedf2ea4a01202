/**
 * bench/extensions: what the extension guards cost a chat request in-process: onChatRequest through the host
 * (copy, guard, shape check, change detection) with a pass-through and a rewriting extension, and the response
 * tap over a streamed answer against the same stream untapped. Run: `$DENO run -A bench/extensions.ts`.
 */
import type { ChatRequest, Extension } from "../src/extensions/api.ts";
import { ExtensionHost, type Running } from "../src/extensions/host.ts";
import { tapResponse } from "../src/extensions/summary.ts";
import { logger } from "../src/log/mod.ts";

const line = (name: string, value: string) => console.log(`${name.padEnd(58)} ${value}`);

function host(...exts: Extension[]): ExtensionHost {
  const running: Running[] = exts.map((ext) => ({
    ext,
    source: "bench",
    ctx: {
      name: ext.name,
      nodeId: "bench",
      skulkVersion: "0",
      config: {},
      logger: logger("bench"),
      embed: () => Promise.resolve([]),
    },
  }));
  return new ExtensionHost(running, [], { enabled: true, requestBudgetMs: 2000, hookBudgetMs: 10_000 });
}

/** A chat of four turns and a tool, about 2.5 KB of JSON: a typical agent request. */
const REQ: ChatRequest = {
  model: "bench/model",
  max_tokens: 512,
  stream: true,
  messages: [
    { role: "system", content: "You are a helpful assistant. ".repeat(20) },
    { role: "user", content: "What is the weather in Paris? ".repeat(10) },
    { role: "assistant", content: "Let me check. ".repeat(10) },
    { role: "user", content: "And in Lyon? ".repeat(10) },
  ],
  tools: [{
    type: "function",
    function: {
      name: "weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  }],
};

/** The fastest of five rounds of `n` requests, in µs per request: the machine is shared, the minimum is the cost. */
async function perRequest(h: ExtensionHost, n: number): Promise<number> {
  for (let i = 0; i < 2000; i++) await h.onChatRequest(REQ, { api: "chat_completions", requestId: "w" });
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await h.onChatRequest(REQ, { api: "chat_completions", requestId: "b" });
    best = Math.min(best, (performance.now() - t0) / n * 1000);
  }
  return best;
}

const N = 2000;
line("request JSON size", `${JSON.stringify(REQ).length} bytes`);
line(
  "onChatRequest, one pass-through extension (returns undefined)",
  `${
    (await perRequest(host({ name: "pass", apiVersion: 1, onChatRequest: () => undefined }), N)).toFixed(1)
  } µs`,
);
line(
  "onChatRequest, one rewriting extension (max_tokens)",
  `${
    (await perRequest(
      host({ name: "cap", apiVersion: 1, onChatRequest: (r) => ({ ...r, max_tokens: 3 }) }),
      N,
    ))
      .toFixed(1)
  } µs`,
);
line(
  "onChatRequest, three rewriting extensions",
  `${
    (await perRequest(
      host(
        ...["a", "b", "c"].map((name): Extension => ({
          name,
          apiVersion: 1,
          onChatRequest: (r) => ({ ...r, max_tokens: 3 }),
        })),
      ),
      N,
    )).toFixed(1)
  } µs`,
);

/** A streamed Chat Completions answer of `tokens` chunks, as bytes in network-sized pieces. */
function stream(tokens: number): Uint8Array[] {
  let text = "";
  for (let i = 0; i < tokens; i++) {
    text += `data: ${
      JSON.stringify({
        id: "x",
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta: { content: ` tok${i}` }, finish_reason: null }],
      })
    }\n\n`;
  }
  text += `data: ${
    JSON.stringify({
      choices: [],
      usage: { prompt_tokens: 10, completion_tokens: tokens, total_tokens: 10 + tokens },
    })
  }\n\ndata: [DONE]\n\n`;
  const bytes = new TextEncoder().encode(text);
  const out: Uint8Array[] = [];
  // One engine chunk per read, roughly: ~150 bytes each.
  for (let i = 0; i < bytes.length; i += 150) out.push(bytes.slice(i, i + 150));
  return out;
}

async function drain(parts: Uint8Array[], tap: boolean): Promise<void> {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(p);
      c.close();
    },
  });
  let res = new Response(body, { headers: { "content-type": "text/event-stream" } });
  if (tap) res = tapResponse(res, "chat_completions", () => {});
  const reader = res.body!.getReader();
  while (!(await reader.read()).done) { /* drain */ }
}

const parts = stream(1000);
const rounds = 30;
for (const tap of [false, true, false, true]) await drain(parts, tap);
/** The fastest of `rounds` drains, in ms. */
const timed = async (tap: boolean) => {
  let best = Infinity;
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    await drain(parts, tap);
    best = Math.min(best, performance.now() - t0);
  }
  return best;
};
const plain = await timed(false);
const tapped = await timed(true);
line(`1000-token stream (${parts.length} reads) passed through, untapped`, `${plain.toFixed(2)} ms`);
line("1000-token stream passed through the response tap", `${tapped.toFixed(2)} ms`);
line("tap cost per streamed token", `${((tapped - plain) / 1000 * 1000).toFixed(2)} µs`);
