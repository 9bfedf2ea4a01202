/**
 * bench/proxy-overhead: the same streamed chat requests sent straight to llama-server and through Skulk,
 * interleaved against the same engine in one run. Prints the decode tokens/s ratio (target >= 0.98) and
 * the extra time to first token at the median (target <= 5 ms).
 *   deno run -A bench/proxy-overhead.ts [--requests N] [--tokens N] [--width W] [--layers L]
 */
import { median, timeChatStream } from "./lib/stream.ts";
import { arg, BENCH_MODEL, benchNode } from "./lib/tiny-node.ts";
import { enginePorts } from "../tests/helpers/daemon.ts";

const REQUESTS = arg("requests", 20);
const TOKENS = arg("tokens", 128);
const { node, modelFile: model } = await benchNode();
try {
  const [enginePort] = await enginePorts(node.dataDir);

  const run = async (
    url: string,
    modelId: string | undefined,
    i: number,
  ): Promise<{ ttft: number; tps: number }> => {
    const t = await timeChatStream(url, {
      ...(modelId ? { model: modelId } : {}),
      messages: [{ role: "user", content: `Write about the sea, variation ${i}` }],
      max_tokens: TOKENS,
      temperature: 0,
      seed: 1,
      ignore_eos: true,
    });
    return { ttft: t.ttftMs, tps: t.tps };
  };

  const direct: { ttft: number; tps: number }[] = [];
  const proxied: { ttft: number; tps: number }[] = [];
  await run(`http://127.0.0.1:${enginePort}`, undefined, -1); // warm-up
  await run(node.url, BENCH_MODEL, -1);
  for (let i = 0; i < REQUESTS; i++) {
    // Alternate the order so neither path always runs on a warmer engine.
    if (i % 2 === 0) {
      direct.push(await run(`http://127.0.0.1:${enginePort}`, undefined, i));
      proxied.push(await run(node.url, BENCH_MODEL, i));
    } else {
      proxied.push(await run(node.url, BENCH_MODEL, i));
      direct.push(await run(`http://127.0.0.1:${enginePort}`, undefined, i));
    }
  }
  const dT = median(direct.map((r) => r.tps));
  const pT = median(proxied.map((r) => r.tps));
  const dF = median(direct.map((r) => r.ttft));
  const pF = median(proxied.map((r) => r.ttft));
  console.log(
    `bench/proxy-overhead: ${REQUESTS} streamed requests each way, ${TOKENS} tokens, model ${
      model.split("/").at(-1)
    }`,
  );
  console.log(
    `decode tokens/s  direct ${dT.toFixed(1)}  via skulk ${pT.toFixed(1)}  ratio ${
      (pT / dT).toFixed(3)
    } (target >= 0.98)`,
  );
  console.log(
    `time to first token (median)  direct ${dF.toFixed(1)} ms  via skulk ${pF.toFixed(1)} ms  added ${
      (pF - dF).toFixed(1)
    } ms (target <= 5 ms)`,
  );
} finally {
  await node.stop();
}
