/**
 * bench/replicas: replicas, prefix affinity and admission measured in one run on real daemons and real
 * llama-servers (one thread each). Prints three ratios:
 *   1. aggregate decode tokens/s of 8 concurrent streams over two instances vs one (target >= 1.7);
 *   2. time to first token of a conversation's next turn (a ~2,000-token prompt repeated) with prefix
 *      affinity vs without (target <= 0.5);
 *   3. p99 time to first token of a burst with admission (a bounded queue, the rest refused) vs without.
 *   deno run -A bench/replicas.ts [--rounds N] [--tokens N] [--conversations N] [--burst N]
 */
import { median, timeChatStream } from "./lib/stream.ts";
import { type Daemon, enginePorts, startDaemon } from "../tests/helpers/daemon.ts";
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
const ROUNDS = arg("rounds", 3);
const TOKENS = arg("tokens", 128);
const CONVERSATIONS = arg("conversations", 5);
const BURST = arg("burst", 24);
const STREAMS = 8;
const QUEUE = 4;
const WIDTH = 512;
const LAYERS = 8;
// A wider model decodes at a pace closer to real models, so the engines' work dominates the proxy's.
const gguf = await tinyModel({ width: WIDTH, layers: LAYERS, heads: 8, kvHeads: 4, ffn: 1024 });
const card = (id: string) => localCardWire(id, gguf, { nLayers: LAYERS, hiddenSize: WIDTH });

async function node(env: Record<string, string>): Promise<Daemon> {
  return await startDaemon({
    args: ["--no-mdns"],
    env: {
      SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
      SKULK_LOG_LEVEL: "warning",
      SKULK_LLAMA_THREADS: "1",
      ...env,
    },
    timeoutMs: 60_000,
  });
}

/** `count` single-node instances of `id` on the node, all ready. */
async function place(d: Daemon, id: string, count: number): Promise<void> {
  const runners: string[] = [];
  for (let i = 0; i < count; i++) {
    const instance = singleNodeInstance(d.nodeId, card(id), 4096);
    const res = await postInstance(d, instance);
    if (!res.ok) throw new Error(`placing ${id}: ${res.status} ${await res.text()}`);
    runners.push(Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0]);
  }
  await waitForState(d.url, (s) => runners.every((r) => runnerTag(s, r) === "RunnerReady"), id, 180_000);
}

const nodes: Daemon[] = [];
const phase = (what: string) =>
  console.error(`[bench/replicas ${new Date().toISOString().slice(11, 19)}] ${what}`);
try {
  // x: affinity on and a bounded queue; y: affinity off and a queue too deep to ever refuse (the "without").
  const x = await node({ SKULK_QUEUE_DEPTH: String(QUEUE) });
  const y = await node({ SKULK_QUEUE_DEPTH: "100000", SKULK_PREFIX_AFFINITY: "0" });
  nodes.push(x, y);
  const loadBefore = Deno.readTextFileSync("/proc/loadavg").split(" ")[0];
  await Promise.all([place(x, "bench/one", 1), place(y, "bench/one", 1)]);
  const onePort = await enginePorts(x.dataDir);
  await Promise.all([place(x, "bench/two", 2), place(y, "bench/two", 2)]);
  const twoPorts = (await enginePorts(x.dataDir)).filter((p) => !onePort.includes(p));
  phase("placed; 8 concurrent streams over one instance and over two");

  // 1. Eight concurrent streams: tokens of all of them over the wall time of the whole batch. `direct`
  // sends them straight to the engines (half to each of two), the machine's own ceiling without Skulk.
  const batch = async (model: string, round: number, direct = false): Promise<number> => {
    const t0 = performance.now();
    const ports = model === "bench/one" ? onePort : twoPorts;
    const runs = await Promise.all(
      Array.from(
        { length: STREAMS },
        (_, i) =>
          timeChatStream(direct ? `http://127.0.0.1:${ports[i % ports.length]}` : x.url, {
            ...(direct ? {} : { model }),
            messages: [{ role: "user", content: `Write about the sea, round ${round} stream ${i}` }],
            max_tokens: TOKENS,
            temperature: 0,
            ignore_eos: true,
          }),
      ),
    );
    const wall = (performance.now() - t0) / 1000;
    if (runs.some((r) => r.tps === 0)) throw new Error(`${model}: a stream generated nothing`);
    return (STREAMS * TOKENS) / wall;
  };
  await batch("bench/one", -1);
  await batch("bench/two", -1);
  const one: number[] = [];
  const two: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate the order so neither setup always runs on a warmer machine.
    if (r % 2 === 0) (one.push(await batch("bench/one", r)), two.push(await batch("bench/two", r)));
    else (two.push(await batch("bench/two", r)), one.push(await batch("bench/one", r)));
  }
  const decodeRatio = median(two) / median(one);
  const directOne: number[] = [];
  const directTwo: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    directOne.push(await batch("bench/one", r, true));
    directTwo.push(await batch("bench/two", r, true));
  }
  const directRatio = median(directTwo) / median(directOne);
  phase(`decode: one ${one.map(Math.round)}, two ${two.map(Math.round)}; next, conversations`);

  // 2. A conversation's second turn: its ~2,000-token first turn repeated, plus the reply and a question.
  const turn2 = async (url: string, k: number, tag: string): Promise<number> => {
    const system = `${tag} conversation ${k}: ` +
      Array.from({ length: 680 }, (_, i) => `w${(i * 7 + k) % 97}`).join(" ");
    const first = [{ role: "system", content: system }, { role: "user", content: "first question" }];
    const r1 = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "bench/two", messages: first, max_tokens: 8, temperature: 0 }),
    });
    const j1 = await r1.json();
    if (!r1.ok) throw new Error(`turn 1: ${JSON.stringify(j1)}`);
    const t = await timeChatStream(url, {
      model: "bench/two",
      messages: [
        ...first,
        { role: "assistant", content: j1.choices[0].message.content ?? "" },
        { role: "user", content: "second question" },
      ],
      max_tokens: 8,
      temperature: 0,
      ignore_eos: true,
    });
    return t.ttftMs;
  };
  const withAff: number[] = [];
  const withoutAff: number[] = [];
  for (let k = 0; k < CONVERSATIONS; k++) {
    if (k % 2 === 0) (withAff.push(await turn2(x.url, k, "x")), withoutAff.push(await turn2(y.url, k, "y")));
    else (withoutAff.push(await turn2(y.url, k, "y")), withAff.push(await turn2(x.url, k, "x")));
  }
  const affinityRatio = median(withAff) / median(withoutAff);
  phase(`turn 2 TTFT: with ${withAff.map(Math.round)}, without ${withoutAff.map(Math.round)}; next, bursts`);

  // 3. A burst at one instance: p99 time to first token of the requests served, and how many were refused.
  const burst = async (d: Daemon) => {
    const runs = await Promise.all(Array.from({ length: BURST }, async (_, i) => {
      try {
        return await timeChatStream(d.url, {
          model: "bench/one",
          messages: [{ role: "user", content: `burst ${i}` }],
          max_tokens: 64,
          temperature: 0,
          ignore_eos: true,
        });
      } catch (e) {
        if (/: 429 /.test((e as Error).message)) return null;
        throw e;
      }
    }));
    const served = runs.filter((r) => r !== null).map((r) => r!.ttftMs).sort((a, b) => a - b);
    return {
      p99: served[Math.min(served.length - 1, Math.ceil(0.99 * served.length) - 1)],
      refused: BURST - served.length,
    };
  };
  const bx = await burst(x);
  const by = await burst(y);

  const f = (n: number) => n.toFixed(1);
  const loadAfter = Deno.readTextFileSync("/proc/loadavg").split(" ")[0];
  console.log(
    `model: tiny ${LAYERS}-layer ${WIDTH}-wide, one engine thread, ${Deno.args.join(" ") || "defaults"}; ` +
      `${navigator.hardwareConcurrency} cores, load average ${loadBefore} at the start, ${loadAfter} at the end`,
  );
  console.log(
    `1. ${STREAMS} streams x ${TOKENS} tokens: one instance ${f(median(one))} tok/s [${one.map(f)}], ` +
      `two ${f(median(two))} tok/s [${two.map(f)}]; ratio ${decodeRatio.toFixed(2)} (target >= 1.7: ${
        decodeRatio >= 1.7 ? "met" : "NOT met"
      })`,
  );
  console.log(
    `   the engines alone (no Skulk, 4 streams to each): one ${f(median(directOne))} tok/s [${
      directOne.map(f)
    }], two ${f(median(directTwo))} tok/s [${directTwo.map(f)}]; ratio ${directRatio.toFixed(2)}`,
  );
  console.log(
    `2. turn-2 TTFT of a ~2,000-token prompt: with affinity ${f(median(withAff))} ms [${withAff.map(f)}], ` +
      `without ${f(median(withoutAff))} ms [${withoutAff.map(f)}]; ratio ${
        affinityRatio.toFixed(2)
      } (target <= 0.5: ${affinityRatio <= 0.5 ? "met" : "NOT met"})`,
  );
  console.log(
    `3. burst of ${BURST} at one instance (4 slots): with admission (queue ${QUEUE}) p99 TTFT ${
      f(bx.p99)
    } ms, ` +
      `${bx.refused} refused with 429; without ${f(by.p99)} ms, ${by.refused} refused; ratio ${
        (bx.p99 / by.p99).toFixed(2)
      }`,
  );
} catch (e) {
  for (const d of nodes) console.error(`--- ${d.url} log tail:\n${d.log().slice(-3000)}`);
  throw e;
} finally {
  await Promise.all(nodes.map((d) => d.kill()));
}
