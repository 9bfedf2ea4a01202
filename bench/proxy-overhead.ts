/**
 * bench/proxy-overhead: the same streamed chat requests sent straight to llama-server and through Skulk,
 * interleaved against the same engine in one run. Prints the decode tokens/s ratio (target >= 0.98) and
 * the extra time to first token at the median (target <= 5 ms).
 *   deno run -A bench/proxy-overhead.ts [--requests N] [--tokens N] [--width W] [--layers L]
 */
import { median, timeChatStream } from "./lib/stream.ts";
import { enginePorts, startDaemon } from "../tests/helpers/daemon.ts";
import {
  localCardWire,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../tests/helpers/cluster.ts";
import { engineBinary, tinyModel } from "../tests/helpers/models.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const REQUESTS = arg("requests", 20);
const TOKENS = arg("tokens", 128);
// A wider model decodes at a pace closer to real models, so per-token proxy work is weighed fairly.
const model = await tinyModel({
  width: arg("width", 512),
  layers: arg("layers", 8),
  heads: 8,
  kvHeads: 4,
  ffn: 1024,
});

const node = await startDaemon({
  env: {
    SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
    SKULK_LOG_LEVEL: "warning",
    // One engine thread leaves a core for the proxy and the client: on 2 cores a spinning engine on both
    // would turn any proxy work into lost decode time and measure contention instead of the proxy.
    SKULK_LLAMA_THREADS: String(arg("threads", 1)),
  },
});
try {
  const card = localCardWire("bench/tiny", model, {
    nLayers: arg("layers", 8),
    hiddenSize: arg("width", 512),
  });
  const instance = singleNodeInstance(node.nodeId, card, 4096);
  // POST /instance serves catalogue models only: postInstance registers the card first.
  const placed = await postInstance(node, instance);
  if (!placed.ok) throw new Error(`POST /instance: ${placed.status} ${await placed.text()}`);
  const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
  await waitForState(node.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the runner", 120_000);
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
  await run(node.url, "bench/tiny", -1);
  for (let i = 0; i < REQUESTS; i++) {
    // Alternate the order so neither path always runs on a warmer engine.
    if (i % 2 === 0) {
      direct.push(await run(`http://127.0.0.1:${enginePort}`, undefined, i));
      proxied.push(await run(node.url, "bench/tiny", i));
    } else {
      proxied.push(await run(node.url, "bench/tiny", i));
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
