/**
 * A client that goes away stops its generation at the engine, for non-streamed requests too: on one real node
 * with a real llama-server, a whole-answer request through each client API is dropped mid-generation and the
 * engine's own `/slots` must show the slot idle far short of the tokens it was asked for. Polling `/slots` keeps
 * the engine answering other tasks meanwhile, as a shared node's other clients do: llama-server checks a
 * non-streamed request's connection only after a second with no result from any task, so then it never did.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, enginePorts, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, slowTinyModel } from "../helpers/models.ts";
import { json, waitFor } from "../helpers/multinode.ts";
import { placeReady } from "../helpers/cluster.ts";

const MODEL = "skulk-test/disconnect-tiny";
const CONTEXT = 32768;
/** Far more tokens than the engine decodes in the time a test waits: uncancelled, it would still be busy. */
const MAX_TOKENS = 30000;
const LONG = 600_000;

interface Slot {
  id: number;
  is_processing: boolean;
  next_token?: { n_decoded?: number }[] | { n_decoded?: number };
}

/** Each slot of the engine: whether it generates and how many tokens its current (or last) task decoded. */
async function slots(port: number): Promise<{ id: number; busy: boolean; decoded: number }[]> {
  return (await json<Slot[]>(`http://127.0.0.1:${port}/slots`)).map((s) => {
    const n = Array.isArray(s.next_token) ? s.next_token[0] : s.next_token;
    return { id: s.id, busy: s.is_processing, decoded: n?.n_decoded ?? 0 };
  });
}

/** One request per client API, asking for a whole (non-streamed) answer of MAX_TOKENS tokens. */
const CASES: { api: string; path: string; body: Record<string, unknown> }[] = [
  {
    api: "Chat Completions",
    path: "/v1/chat/completions",
    body: { max_tokens: MAX_TOKENS, ignore_eos: true, messages: [{ role: "user", content: "Go on" }] },
  },
  {
    api: "Messages",
    path: "/v1/messages",
    body: { max_tokens: MAX_TOKENS, messages: [{ role: "user", content: "Go on" }] },
  },
  {
    api: "Responses",
    path: "/v1/responses",
    body: { max_output_tokens: MAX_TOKENS, input: "Go on" },
  },
  {
    api: "Ollama chat",
    path: "/ollama/api/chat",
    body: {
      stream: false,
      options: { num_predict: MAX_TOKENS },
      messages: [{ role: "user", content: "Go on" }],
    },
  },
];

describe("a non-streamed request whose client goes away", () => {
  let node: Daemon;
  let port: number;

  beforeAll(async () => {
    node = await startDaemon({
      env: {
        SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
        // One thread keeps decoding slow enough that MAX_TOKENS is far off when the client goes.
        SKULK_LLAMA_THREADS: "1",
      },
    });
    const gguf = await slowTinyModel(CONTEXT);
    await placeReady(node, MODEL, gguf, CONTEXT);
    [port] = await enginePorts(node.dataDir, "llama-server");
    expect(port).toBeGreaterThan(0);
  }, LONG);
  afterAll(async () => {
    await node?.stop();
  }, LONG);

  for (const { api, path, body } of CASES) {
    it(`${api}: the engine stops generating`, async () => {
      await waitFor(
        "the engine to be idle before the request",
        async () => (await slots(port)).every((s) => !s.busy),
        120_000,
      );
      const abort = new AbortController();
      const answer = fetch(`${node.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, ...body }),
        signal: abort.signal,
      }).then(async (r) => ({ status: r.status, text: await r.text() }), (e: Error) => e);
      // The engine has started this request's generation: a slot is decoding.
      const slot = await waitFor(
        "a slot to be decoding",
        async () => {
          const s = (await slots(port)).find((s) => s.busy && s.decoded > 0);
          if (!s) {
            // An answer before the client went means the request never ran long; say what it was.
            const settled = await Promise.race([answer, Promise.resolve(null)]);
            if (settled) {
              throw new Error(`the request ended before the client went: ${JSON.stringify(settled)}`);
            }
          }
          return s;
        },
        120_000,
        50,
      );
      expect(slot.decoded).toBeLessThan(MAX_TOKENS);
      abort.abort();
      expect(await answer).toBeInstanceOf(Error);
      // Uncancelled, the slot would stay busy until it decoded all MAX_TOKENS (minutes with one thread).
      const after = await waitFor("the slot to go idle", async () => {
        const s = (await slots(port)).find((s) => s.id === slot.id)!;
        return s.busy ? null : s;
      }, 60_000);
      expect(after.decoded).toBeLessThan(MAX_TOKENS / 2);
    }, LONG);
  }
});
