/**
 * bench/speculation: decode tokens/s of n-gram speculative decoding on vs off, two nodes side by side in one
 * run (the same model, one engine thread each), requests interleaved so load drifts hit both alike. The
 * prompt is repetitive and random weights decode greedily into loops: the case n-gram drafting is for.
 * Prints the ratio of median decode tokens/s (on / off) and the acceptance the engine reported.
 *   deno run -A bench/speculation.ts [--mode ngram-mod] [--requests N] [--tokens N] [--width W] [--layers L]
 */
import { startDaemon } from "../tests/helpers/daemon.ts";
import { localCardWire, placeOnNode } from "../tests/helpers/cluster.ts";
import { engineBinary, tinyModel } from "../tests/helpers/models.ts";
import { median } from "./lib/stream.ts";

const flag = (name: string) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Deno.args[i + 1] : undefined;
};
const num = (name: string, dflt: number) => Number(flag(name) ?? dflt);
const MODE = flag("mode") ?? "ngram-mod";
const REQUESTS = num("requests", 8);
const TOKENS = num("tokens", 256);
const WIDTH = num("width", 1024);
const LAYERS = num("layers", 12);
// Wide enough that decoding is bound by reading the weights, as on real models: verifying a draft of k
// tokens then costs about one step, which is where speculation pays.
const model = await tinyModel({ width: WIDTH, layers: LAYERS, heads: 16, kvHeads: 4, ffn: 2816 });
const bin = await engineBinary("llama-server");

const start = (ngram: string) =>
  startDaemon({
    args: ["--no-mdns"],
    env: {
      SKULK_LLAMA_SERVER_BIN: bin,
      SKULK_LOG_LEVEL: "warning",
      SKULK_LLAMA_THREADS: "1",
      SKULK_SPECULATION_NGRAM: ngram,
    },
  });
const [off, on] = await Promise.all([start("off"), start(MODE)]);
try {
  for (const node of [off, on]) {
    const card = localCardWire("bench/spec", model, { nLayers: LAYERS, hiddenSize: WIDTH });
    await placeOnNode(node, card, 4096, 300_000);
  }
  const chat = async (url: string, i: number) => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: "bench/spec",
        messages: [{
          role: "user",
          content: `Repeat after me, ${i}: ${"the cat sat on the mat. ".repeat(12)}`,
        }],
        max_tokens: TOKENS,
        temperature: 0,
        ignore_eos: true,
      }),
    });
    if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
    const b = await res.json() as {
      timings: { predicted_per_second: number; draft_n?: number; draft_n_accepted?: number };
    };
    return b.timings;
  };
  await Promise.all([chat(off.url, -1), chat(on.url, -1)]); // warm both engines
  const tpsOff: number[] = [], tpsOn: number[] = [];
  let drafted = 0, accepted = 0;
  for (let i = 0; i < REQUESTS; i++) {
    // Alternate which goes first, so neither always runs right after the other's cache-warming.
    const order = i % 2 === 0 ? [off, on] : [on, off];
    for (const node of order) {
      const t = await chat(node.url, i);
      if (node === off) tpsOff.push(t.predicted_per_second);
      else {
        tpsOn.push(t.predicted_per_second);
        drafted += t.draft_n ?? 0;
        accepted += t.draft_n_accepted ?? 0;
      }
    }
  }
  const mOff = median(tpsOff), mOn = median(tpsOn);
  console.log(
    `model: tiny ${LAYERS} layers x ${WIDTH}, ${TOKENS} tokens a request, ${REQUESTS} requests each`,
  );
  console.log(`decode tokens/s median: off ${mOff.toFixed(1)}, ${MODE} ${mOn.toFixed(1)}`);
  console.log(
    `drafted ${drafted}, accepted ${accepted} (${drafted ? (100 * accepted / drafted).toFixed(0) : 0}%)`,
  );
  console.log(`ratio ${MODE} / off: ${(mOn / mOff).toFixed(2)}`);
} catch (e) {
  // A node that died says why in its log's last lines.
  for (const n of [off, on]) console.error(`--- ${n.url}\n${n.log().split("\n").slice(-15).join("\n")}`);
  throw e;
} finally {
  await Promise.all([off.stop(), on.stop()]);
}
