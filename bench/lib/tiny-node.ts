/**
 * The node the serving benchmarks measure: one daemon with a wide tiny model placed and ready (wide enough
 * that it decodes at a pace closer to real models, so per-token work in the node is weighed fairly).
 */
import { type Daemon, startDaemon } from "../../tests/helpers/daemon.ts";
import { localCardWire, placeOnNode } from "../../tests/helpers/cluster.ts";
import { engineBinary, tinyModel } from "../../tests/helpers/models.ts";

export const arg = (name: string, dflt: number): number => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};

export const BENCH_MODEL = "bench/tiny";

/** Reads `--width`, `--layers` and `--threads`; the model is placed as `bench/tiny`. */
export async function benchNode(): Promise<{ node: Daemon; modelFile: string }> {
  const width = arg("width", 512);
  const layers = arg("layers", 8);
  const modelFile = await tinyModel({ width, layers, heads: 8, kvHeads: 4, ffn: 1024 });
  const node = await startDaemon({
    env: {
      SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
      SKULK_LOG_LEVEL: "warning",
      // One engine thread leaves a core for the node and the client: on 2 cores a spinning engine on both
      // would turn any work in the node into lost decode time and measure contention instead.
      SKULK_LLAMA_THREADS: String(arg("threads", 1)),
    },
  });
  try {
    const card = localCardWire(BENCH_MODEL, modelFile, { nLayers: layers, hiddenSize: width });
    // Registers the card first: POST /instance serves catalogue models only.
    await placeOnNode(node, card, 4096, 180_000);
  } catch (e) {
    console.error(node.log().slice(-3000));
    await node.stop();
    throw e;
  }
  return { node, modelFile };
}
