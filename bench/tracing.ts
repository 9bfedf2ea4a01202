/**
 * bench/tracing: what request tracing costs decode. The same streamed chats through one node, tracing on
 * and off in turn (toggled cluster-wide with PUT /v1/tracing between requests), interleaved in one run
 * against the same engine. Prints the decode tokens/s ratio on/off (target >= 0.98: on costs < 2%).
 *   deno run -A bench/tracing.ts [--requests N] [--tokens N] [--width W] [--layers L] [--threads T]
 */
import { median, timeChatStream } from "./lib/stream.ts";
import { arg, BENCH_MODEL, benchNode } from "./lib/tiny-node.ts";
import { untilDone } from "../src/api/routes/openai.ts";
import { beginTrace, endTrace, markTrace, traceEngine, traceTarget } from "../src/tracing/recorder.ts";
import { SpanWriter } from "../src/tracing/store.ts";
import { openStore } from "../src/store/db.ts";
import { tempDir } from "../tests/helpers/daemon.ts";

/**
 * The same work measured in this process, where no other load blurs it: recording one request's trace
 * (begin, marks, spans, queued and written in batches to a real SQLite file), and the pass-through a traced
 * stream adds per chunk. Returns microseconds.
 */
async function inProcess(): Promise<{ perRequestUs: number; perChunkUs: number }> {
  const dir = tempDir("skulk-bench-tracing-");
  const store = await openStore(dir);
  try {
    const writer = new SpanWriter(store.db);
    const N = 5000;
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      const req = {};
      beginTrace(req, {
        taskId: crypto.randomUUID(),
        nodeId: "n",
        path: "/v1/chat/completions",
        arrivedUs: 0,
      });
      markTrace(req, "routeStart");
      traceTarget(req, "m", "i", "c");
      markTrace(req, "engineCall");
      markTrace(req, "engineAnswered");
      traceEngine(req, () => ({ prompt_ms: 5, prompt_n: 9, predicted_ms: 100, predicted_n: 128 }));
      writer.add(endTrace(req, 200, true) ?? []);
    }
    await writer.flush();
    const perRequestUs = ((performance.now() - t0) * 1000) / N;

    const CHUNKS = 20_000;
    const chunk = new TextEncoder().encode('data: {"choices":[{"delta":{"content":"tok"}}]}\n\n');
    const source = () =>
      new ReadableStream<Uint8Array>({
        start(c) {
          for (let i = 0; i < CHUNKS; i++) c.enqueue(chunk);
          c.close();
        },
      });
    const drain = async (body: ReadableStream<Uint8Array>) => {
      const r = body.getReader();
      while (!(await r.read()).done);
    };
    const tPlain = performance.now();
    await drain(source());
    const plain = performance.now() - tPlain;
    const tWrapped = performance.now();
    await drain(untilDone(new Response(source()), () => {}).body!);
    const wrapped = performance.now() - tWrapped;
    return { perRequestUs, perChunkUs: ((wrapped - plain) * 1000) / CHUNKS };
  } finally {
    store.close();
    Deno.removeSync(dir, { recursive: true });
  }
}

const REQUESTS = arg("requests", 20);
const TOKENS = arg("tokens", 128);
const { node, modelFile: model } = await benchNode();
try {
  const tracing = async (enabled: boolean) => {
    const r = await fetch(`${node.url}/v1/tracing`, { method: "PUT", body: JSON.stringify({ enabled }) });
    if (!r.ok) throw new Error(`PUT /v1/tracing answered ${r.status}: ${await r.text()}`);
    await r.body?.cancel();
  };
  const run = async (traced: boolean, i: number): Promise<{ ttft: number; tps: number }> => {
    await tracing(traced);
    const t = await timeChatStream(node.url, {
      model: BENCH_MODEL,
      messages: [{ role: "user", content: `Write about the sea, variation ${i}` }],
      max_tokens: TOKENS,
      temperature: 0,
      seed: 1,
      ignore_eos: true,
    });
    return { ttft: t.ttftMs, tps: t.tps };
  };

  const on: { ttft: number; tps: number }[] = [];
  const off: { ttft: number; tps: number }[] = [];
  await run(false, -1); // warm-up
  await run(true, -1);
  for (let i = 0; i < REQUESTS; i++) {
    // Alternate the order so neither setting always runs on a warmer engine.
    if (i % 2 === 0) {
      off.push(await run(false, i));
      on.push(await run(true, i));
    } else {
      on.push(await run(true, i));
      off.push(await run(false, i));
    }
  }
  const cost = await inProcess();
  const traces = await (await fetch(`${node.url}/v1/traces?limit=500`)).json() as { traces: unknown[] };
  const onT = median(on.map((r) => r.tps));
  const offT = median(off.map((r) => r.tps));
  const onF = median(on.map((r) => r.ttft));
  const offF = median(off.map((r) => r.ttft));
  console.log(
    `bench/tracing: ${REQUESTS} streamed requests each way, ${TOKENS} tokens, model ${
      model.split("/").at(-1)
    }; ${traces.traces.length} traces stored`,
  );
  console.log(
    `decode tokens/s (median)  tracing off ${offT.toFixed(1)}  on ${onT.toFixed(1)}  ratio ${
      (onT / offT).toFixed(3)
    } (target >= 0.98)`,
  );
  console.log(
    `time to first token (median)  off ${offF.toFixed(1)} ms  on ${onF.toFixed(1)} ms  added ${
      (onF - offF).toFixed(1)
    } ms`,
  );
  // One chunk per token: the pass-through's share of a token's time, plus the request's recording spread
  // over its tokens.
  const tokenUs = 1e6 / offT;
  const share = (cost.perChunkUs + cost.perRequestUs / TOKENS) / tokenUs;
  console.log(
    `in-process: recording one request's trace ${cost.perRequestUs.toFixed(1)} µs, traced stream ${
      cost.perChunkUs.toFixed(2)
    } µs a chunk; at ${offT.toFixed(1)} tokens/s that is ${(share * 100).toFixed(3)}% of decode time`,
  );
} catch (e) {
  console.error(`the node's log ends:\n${node.log().slice(-4000)}`);
  throw e;
} finally {
  await node.stop();
}
