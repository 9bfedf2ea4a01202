/**
 * bench/tracing: what request tracing costs decode. The same streamed chats through one node, tracing on
 * and off in turn (toggled cluster-wide with PUT /v1/tracing between requests), interleaved in one run
 * against the same engine. Prints the decode tokens/s ratio on/off (target >= 0.98: on costs < 2%).
 *   deno run -A bench/tracing.ts [--requests N] [--tokens N] [--width W] [--layers L] [--threads T]
 */
import { median, timeChatStream } from "./lib/stream.ts";
import { arg, BENCH_MODEL, benchNode } from "./lib/tiny-node.ts";

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
} finally {
  await node.stop();
}
