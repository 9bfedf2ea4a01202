/** The tiny generated models are served by the real llama-server: chat, streamed completion, RPC split, embeddings. */
import { afterAll, describe, expect, it } from "vitest";
import { skulk, tempDir } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";

const children: Deno.ChildProcess[] = [];
const dir = tempDir("tiny-model-");
afterAll(async () => {
  for (const c of children) {
    try {
      c.kill("SIGKILL");
    } catch { /* already gone */ }
    await c.status;
  }
  Deno.removeSync(dir, { recursive: true });
});

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function spawn(bin: string, args: string[]): { child: Deno.ChildProcess; output: () => string } {
  const child = new Deno.Command(bin, { args, stdout: "piped", stderr: "piped" }).spawn();
  children.push(child);
  let text = "";
  const dec = new TextDecoder();
  for (const s of [child.stdout, child.stderr]) {
    void (async () => {
      for await (const chunk of s) text += dec.decode(chunk, { stream: true });
    })();
  }
  return { child, output: () => text };
}

async function stop(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGTERM");
  } catch { /* already gone */ }
  await child.status;
}

/** Starts llama-server on the model and waits for /health; returns its base URL. */
async function llamaServer(
  model: string,
  extra: string[] = [],
): Promise<{ url: string; child: Deno.ChildProcess; output: () => string }> {
  const port = freePort();
  const s = spawn(await engineBinary("llama-server"), [
    "-m",
    model,
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "-t",
    "1",
    "-c",
    "2048",
    ...extra,
  ]);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    const res = await fetch(`${url}/health`).catch(() => null);
    if (res?.ok) return { url, ...s };
    await res?.body?.cancel();
    const exited = await Promise.race([s.child.status, new Promise((r) => setTimeout(r, 100, null))]);
    if (exited) throw new Error(`llama-server exited before serving:\n${s.output()}`);
  }
  throw new Error(`llama-server did not serve:\n${s.output()}`);
}

const post = async (url: string, body: unknown) => {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  return res;
};

describe("tiny model under llama-server", () => {
  it("answers chat completions with text (--jinja) and streams /completion tokens", async () => {
    const srv = await llamaServer(await tinyModel(), ["--jinja"]);
    try {
      const chat = await (await post(`${srv.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "Hello! Who are you?" }],
        max_tokens: 16,
      })).json();
      expect(chat.choices[0].message.content.length).toBeGreaterThan(0);
      expect(chat.choices[0].finish_reason).toBe("length");
      expect(chat.usage.completion_tokens).toBe(16);

      const res = await post(`${srv.url}/completion`, {
        prompt: "Once upon a time",
        n_predict: 8,
        stream: true,
      });
      const events = (await res.text()).split("\n").filter((l) => l.startsWith("data: ")).map((l) =>
        JSON.parse(l.slice(6))
      );
      const pieces = events.filter((e) => !e.stop).map((e) => e.content as string);
      expect(pieces).toHaveLength(8);
      expect(pieces.join("").length).toBeGreaterThan(0);
      expect(events.at(-1).stop).toBe(true);
    } finally {
      await stop(srv.child);
    }
  });

  it("greedy output depends on the seed the model was made with", async () => {
    const texts: string[] = [];
    for (const seed of [1, 2]) {
      const srv = await llamaServer(await tinyModel({ seed }));
      try {
        const out = await (await post(`${srv.url}/completion`, {
          prompt: "The capital of France is",
          n_predict: 8,
          temperature: 0,
        })).json();
        expect(out.tokens_predicted).toBe(8);
        texts.push(out.content);
      } finally {
        await stop(srv.child);
      }
    }
    expect(texts[0]).not.toBe(texts[1]);
  });

  it("splits its layers onto an RPC donor (ggml-rpc-server) with -ngl 99", async () => {
    const port = freePort();
    const rpc = spawn(await engineBinary("ggml-rpc-server"), ["-H", "127.0.0.1", "-p", String(port)]);
    try {
      for (let i = 0; i < 200; i++) {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port }).catch(() => null);
        if (conn) {
          conn.close();
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      const srv = await llamaServer(await tinyModel(), [
        "--rpc",
        `127.0.0.1:${port}`,
        "-ngl",
        "99",
        "-lv",
        "4",
      ]);
      try {
        const out = await (await post(`${srv.url}/completion`, { prompt: "Hello", n_predict: 6 })).json();
        expect(out.tokens_predicted).toBe(6);
        expect(srv.output()).toMatch(/RPC0\[127\.0\.0\.1:\d+\] model buffer size/);
        expect(rpc.output()).toContain("Accepted client connection");
      } finally {
        await stop(srv.child);
      }
    } finally {
      await stop(rpc.child);
    }
  });

  it("serves /v1/embeddings when made with pooling", async () => {
    const srv = await llamaServer(await tinyModel({ pooling: "mean" }), ["--embeddings"]);
    try {
      const out = await (await post(`${srv.url}/v1/embeddings`, { input: ["hello world", "goodbye"] }))
        .json();
      expect(out.data).toHaveLength(2);
      expect(out.data[0].embedding).toHaveLength(64);
      expect(out.data[0].embedding).not.toEqual(out.data[1].embedding);
    } finally {
      await stop(srv.child);
    }
  });

  it("is made by `skulk dev make-model`", async () => {
    const out = `${dir}/cli.gguf`;
    const r = await skulk(["dev", "make-model", "--out", out, "--layers", "2", "--seed", "5", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const info = JSON.parse(r.stdout);
    expect(info.bytes).toBe(Deno.statSync(out).size);
    expect(info.options.layers).toBe(2);
    expect(info.options.thinking).toBe(false);
    const thinking = await skulk(["dev", "make-model", "--out", `${dir}/think.gguf`, "--thinking", "--json"]);
    expect(thinking.code, thinking.stderr).toBe(0);
    expect(JSON.parse(thinking.stdout).options.thinking).toBe(true);
    const bad = await skulk(["dev", "make-model", "--out", out, "--vocab", "no-such-vocab"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("ggml-vocab-no-such-vocab.gguf not found");
  });
});
