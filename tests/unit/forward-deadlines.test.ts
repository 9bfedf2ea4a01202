/**
 * Deadlines on forwards, against real HTTP servers on loopback: a node that never answers fails within
 * the connect deadline, naming it; a slow node that answers probes is waited for; an event stream that
 * breaks off or goes silent ends with exactly one error event.
 */
import { afterEach, describe, expect, it } from "vitest";
import { fetchWithDeadlines, NodeSilent, sseWithFailureEvent } from "../../src/serving/deadlines.ts";

const servers: Deno.HttpServer[] = [];
/** Answers held back on purpose (a stopped node); released after each test so the servers can shut down. */
const held: ((r: Response) => void)[] = [];
afterEach(async () => {
  held.splice(0).forEach((release) => release(new Response("released")));
  await Promise.all(servers.splice(0).map((s) => s.shutdown()));
});

/** A node stand-in: `/node_id` answers while `alive()` says so; every other path is `handler`. */
function serve(handler: (req: Request) => Promise<Response>, alive: () => boolean): string {
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen: () => {} }, (req) => {
    if (new URL(req.url).pathname === "/node_id") {
      return alive() ? Response.json("n1") : never();
    }
    return handler(req);
  });
  servers.push(server);
  return `127.0.0.1:${server.addr.port}`;
}

function never(): Promise<Response> {
  return new Promise<Response>((r) => held.push(r));
}

async function text(s: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(s).text();
}

describe("fetchWithDeadlines", () => {
  it("fails a node that answers nothing within the connect deadline, naming it", async () => {
    const address = serve(never, () => false);
    const started = Date.now();
    const err = await fetchWithDeadlines(
      { nodeId: "node-b", address },
      `http://${address}/v1/chat/completions`,
      {
        method: "POST",
        body: "{}",
      },
      { connectMs: 600, silenceMs: 2000 },
    ).catch((e) => e);
    expect(err).toBeInstanceOf(NodeSilent);
    expect(err.message).toContain(`node node-b (${address}) did not answer`);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("waits for a slow answer while the node keeps answering probes", async () => {
    const address = serve(async () => {
      await new Promise((r) => setTimeout(r, 2500));
      return new Response("late but fine");
    }, () => true);
    const res = await fetchWithDeadlines({ nodeId: "node-b", address }, `http://${address}/slow`, {}, {
      connectMs: 600,
      silenceMs: 1200,
    });
    expect(await res.text()).toBe("late but fine");
  });

  it("errors the body when the node goes silent mid-stream", async () => {
    let alive = true;
    const address = serve(() => {
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new TextEncoder().encode("data: first\n\n"));
          alive = false; // then nothing more, and no answer to probes: a stopped node
        },
      });
      return Promise.resolve(new Response(body, { headers: { "content-type": "text/event-stream" } }));
    }, () => alive);
    const res = await fetchWithDeadlines({ nodeId: "node-b", address }, `http://${address}/s`, {}, {
      connectMs: 600,
      silenceMs: 1000,
    });
    const out = await text(sseWithFailureEvent(res.body!, (e) => `cut: ${(e as Error).message}`));
    expect(out.startsWith("data: first\n\n")).toBe(true);
    const errors = out.split("\n\n").filter((e) => e.startsWith('data: {"error"'));
    expect(errors).toHaveLength(1);
    expect(JSON.parse(errors[0].slice(6)).error.message).toMatch(
      new RegExp(`cut: node node-b \\(${address}\\) stopped answering for \\d`),
    );
    expect(out.endsWith("data: [DONE]\n\n")).toBe(true);
  });
});

describe("sseWithFailureEvent", () => {
  const enc = new TextEncoder();
  const source = (parts: string[], end: "close" | "error") =>
    new ReadableStream<Uint8Array>({
      pull(c) {
        const p = parts.shift();
        if (p !== undefined) c.enqueue(enc.encode(p));
        else if (end === "close") c.close();
        else c.error(new Error("connection reset"));
      },
    });

  it("passes a complete stream through unchanged", async () => {
    const parts = ['data: {"a":1}\n\n', "data: [DONE]\n\n"];
    const whole = parts.join("");
    expect(await text(sseWithFailureEvent(source(parts, "close"), () => "x"))).toBe(whole);
  });

  it("ends a broken stream with one error event, starting on a fresh line", async () => {
    const out = await text(
      sseWithFailureEvent(
        source(['data: {"a":1}\n\n', 'data: {"b"'], "error"),
        (e) => `lost: ${(e as Error).message}`,
      ),
    );
    expect(out).toBe(
      'data: {"a":1}\n\ndata: {"b"\n\n' +
        'data: {"error":{"message":"lost: connection reset","type":"ServiceUnavailable","param":null,"code":503}}\n\n' +
        "data: [DONE]\n\n",
    );
  });

  it("passes complete Messages and Responses streams (no [DONE]) through unchanged", async () => {
    const messages = [
      'event: message_delta\ndata: {"type":"message_delta"}\n\nevent: message_st',
      'op\ndata: {"type":"message_stop"}\n\n',
    ];
    expect(await text(sseWithFailureEvent(source([...messages], "close"), () => "x"))).toBe(
      messages.join(""),
    );
    for (const status of ["completed", "incomplete"]) {
      const responses = [
        'event: response.output_text.done\ndata: {"text":"hi"}\n\n',
        `event: response.${status}\ndata: {"response":{"output":[${'{"x":1},'.repeat(40)}{"x":2}]}}\n\n`,
      ];
      expect(await text(sseWithFailureEvent(source([...responses], "close"), () => "x"))).toBe(
        responses.join(""),
      );
    }
  });

  it("treats a Responses stream cut before its final event as broken", async () => {
    const out = await text(
      sseWithFailureEvent(
        source(['event: response.output_text.delta\ndata: {"delta":"hi"}\n\n'], "close"),
        () => "lost",
      ),
    );
    expect(out.match(/"error"/g)).toHaveLength(1);
  });

  it("treats a stream that closes before its [DONE] as broken", async () => {
    const out = await text(sseWithFailureEvent(source(['data: {"a":1}\n\n'], "close"), () => "lost"));
    expect(out.match(/"error"/g)).toHaveLength(1);
    expect(out.endsWith("data: [DONE]\n\n")).toBe(true);
  });
});
