/**
 * What a node's death or freeze does to its engines and to requests through other nodes, with real
 * daemons and the real llama-server: engines die with a daemon killed by kill -9; a forward to a stopped
 * node fails with a 503 naming it within its deadline; a stream cut by the serving node's death ends
 * with one error event.
 */
import { afterEach, describe, expect, it } from "vitest";
import { childrenOf } from "../../src/engines/registry.ts";
import { queryReadOnly } from "../../src/store/readonly.ts";
import {
  localCardWire,
  pidAlive,
  postInstance,
  runnerTag,
  singleNodeInstance,
  waitForState,
} from "../helpers/cluster.ts";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { oneMaster, waitFor } from "../helpers/multinode.ts";
import { tinyWhisperModel, whisperCardWire, whisperServerBinary } from "../helpers/speech.ts";

const MODEL = "skulk-test/death-tiny";
const running: Daemon[] = [];
const stopped = new Set<number>();
afterEach(async () => {
  for (const pid of stopped) {
    try {
      Deno.kill(pid, "SIGCONT");
    } catch { /* gone */ }
  }
  stopped.clear();
  await Promise.all(running.splice(0).map((d) => d.kill()));
});

async function node(args: string[] = [], env: Record<string, string> = {}): Promise<Daemon> {
  const d = await startDaemon({
    args: ["--no-mdns", ...args],
    env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), SKULK_LLAMA_THREADS: "1", ...env },
    timeoutMs: 60_000,
  });
  running.push(d);
  return d;
}

/** Places the tiny model on `on` through `via`, and waits until `via` sees it ready. */
async function place(via: Daemon, on: Daemon, ctx = 2048): Promise<void> {
  const instance = singleNodeInstance(on.nodeId, localCardWire(MODEL, await tinyModel()), ctx);
  const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
  // POST /instance serves catalogue models only: postInstance registers the card on both nodes first.
  const res = await postInstance(via, instance, [via, on]);
  expect(res.status, await res.text()).toBe(200);
  await waitForState(via.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the runner to be ready");
}

async function recorded(d: Daemon, kind: string): Promise<{ pid: number; command: string[] }[]> {
  const { rows } = await queryReadOnly(
    `${d.dataDir}/skulk.db`,
    "SELECT pid, command FROM engine_processes WHERE kind = ?",
    [kind],
  );
  return rows.map((r) => ({ pid: Number(r.pid), command: JSON.parse(String(r.command)) }));
}

/** The engine's own pid: the recorded one, or the watchdog's child. */
function enginePid(rec: { pid: number; command: string[] }): number {
  if (!rec.command.includes("supervise")) return rec.pid;
  return childrenOf(rec.pid)[0];
}

describe.each(["auto", "supervise"])("a daemon killed with kill -9 (engine_lifeline %s)", (lifeline) => {
  it("takes its llama-server with it within seconds", async () => {
    const a = await node(["--force-master"], { SKULK_ENGINE_LIFELINE: lifeline });
    await place(a, a);
    const [rec] = await recorded(a, "llama-server");
    expect(rec.command.join(" ")).toMatch(
      lifeline === "auto" ? /setpriv --pdeathsig KILL --/ : /engine supervise/,
    );
    const engine = enginePid(rec);
    expect(Deno.readTextFileSync(`/proc/${engine}/cmdline`)).toContain("llama-server");
    const killedAt = Date.now();
    // Engines are left to the lifeline: the harness must not clean them up itself.
    await a.kill({ orphanEngines: true });
    await waitFor("the llama-server to die with its daemon", () => !pidAlive(engine), 10_000, 20);
    const ms = Date.now() - killedAt;
    console.log(`lifeline ${lifeline}: llama-server gone ${ms} ms after its daemon's kill -9`);
    expect(ms).toBeLessThan(5000);
  }, 240_000);
});

describe("forwarding to a node that fails", () => {
  const deadlines = { SKULK_FORWARD_CONNECT_TIMEOUT: "1", SKULK_FORWARD_SILENCE_TIMEOUT: "3" };

  async function pair(): Promise<{ a: Daemon; b: Daemon }> {
    const a = await node(["--force-master"], deadlines);
    const b = await node(["--peer", `127.0.0.1:${a.port}`]);
    expect(await oneMaster([a.url, b.url])).toBe(a.nodeId);
    await place(a, b);
    return { a, b };
  }

  it("answers 503 naming a stopped serving node within the deadline", async () => {
    const { a, b } = await pair();
    Deno.kill(b.pid, "SIGSTOP");
    stopped.add(b.pid);
    const started = Date.now();
    const res = await fetch(`${a.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }),
      signal: AbortSignal.timeout(60_000),
    });
    const ms = Date.now() - started;
    expect(res.status).toBe(503);
    const message = (await res.json()).error.message as string;
    expect(message).toContain(`node ${b.nodeId} (127.0.0.1:${b.port})`);
    expect(message).toMatch(/did not answer/);
    console.log(`503 after ${ms} ms: ${message}`);
    expect(ms).toBeLessThan(10_000);
  }, 240_000);

  it.each(["SIGKILL", "SIGSTOP"] as const)(
    "ends a stream whose serving node gets %s mid-way with exactly one error event",
    async (signal) => {
      const { a, b } = await pair();
      const res = await fetch(`${a.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 2000,
          ignore_eos: true,
          stream: true,
        }),
        signal: AbortSignal.timeout(120_000),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = "";
      let failedAt = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += value;
        if (!failedAt && text.includes('"content"')) {
          failedAt = Date.now();
          if (signal === "SIGSTOP") stopped.add(b.pid);
          Deno.kill(b.pid, signal);
        }
      }
      const ms = Date.now() - failedAt;
      expect(failedAt).toBeGreaterThan(0);
      const events = text.split("\n\n").filter((e) => e.startsWith("data: "));
      const errors = events.filter((e) => e.startsWith('data: {"error"'));
      expect(errors).toHaveLength(1);
      const error = JSON.parse(errors[0].slice(6)).error;
      expect(error.message).toContain(`node ${b.nodeId} (127.0.0.1:${b.port})`);
      console.log(`stream, serving node ${signal}: error event after ${ms} ms: ${error.message}`);
      // The error is the last event before [DONE]: no chunk claims the answer finished.
      expect(events.at(-2)).toBe(errors[0]);
      expect(events.at(-1)).toBe("data: [DONE]");
      expect(text).not.toMatch(/"finish_reason":"(stop|length)"/);
      // Killed: at once; frozen: after the 3 s silence deadline set above.
      expect(ms).toBeLessThan(signal === "SIGKILL" ? 3000 : 10_000);
    },
    240_000,
  );
});

describe("a realtime session proxied to a node that fails", () => {
  const STT = "skulk-test/death-whisper";

  it.each(["SIGSTOP", "SIGKILL"] as const)(
    "ends with one error event naming the node and close 1011 when it gets %s",
    async (signal) => {
      const env = { SKULK_WHISPER_SERVER_BIN: await whisperServerBinary() };
      const a = await node(["--force-master"], env);
      const b = await node(["--peer", `127.0.0.1:${a.port}`], {
        ...env,
        SKULK_FORWARD_CONNECT_TIMEOUT: "1",
        SKULK_FORWARD_SILENCE_TIMEOUT: "3",
      });
      expect(await oneMaster([a.url, b.url])).toBe(a.nodeId);
      const instance = singleNodeInstance(a.nodeId, whisperCardWire(STT, await tinyWhisperModel()));
      const runnerId = Object.keys(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
      const res = await postInstance(b, instance, [a, b]);
      expect(res.status, await res.text()).toBe(200);
      await waitForState(b.url, (s) => runnerTag(s, runnerId) === "RunnerReady", "the whisper runner ready");
      await waitFor("b to know a's address", async () => {
        const r = await fetch(`${b.url}/v1/audio/voices?model=${STT}`);
        await r.body?.cancel();
        return r.status !== 503;
      });
      const ws = new WebSocket(`${b.url.replace("http", "ws")}/v1/realtime?model=${STT}`);
      const seen: { type: string; code?: string; message?: string }[] = [];
      let failedAt = 0;
      const closed = new Promise<number>((resolve) => (ws.onclose = (e) => resolve(e.code)));
      ws.onmessage = (e) => {
        const ev = JSON.parse(e.data);
        seen.push({ type: ev.type, code: ev.error?.code, message: ev.error?.message });
        if (ev.type === "session.created") {
          failedAt = Date.now();
          if (signal === "SIGSTOP") stopped.add(a.pid);
          Deno.kill(a.pid, signal);
        }
      };
      const code = await closed;
      const ms = Date.now() - failedAt;
      expect(code).toBe(1011);
      const errors = seen.filter((e) => e.type === "error");
      expect(errors).toHaveLength(1);
      expect(errors[0].code).toBe("node_unreachable");
      expect(errors[0].message).toContain(`node ${a.nodeId} (127.0.0.1:${a.port})`);
      expect(errors[0].message).toMatch(
        signal === "SIGSTOP" ? /stopped answering/ : /went away during the session/,
      );
      console.log(`realtime, serving node ${signal}: closed 1011 after ${ms} ms: ${errors[0].message}`);
      expect(ms).toBeLessThan(signal === "SIGSTOP" ? 10_000 : 3_000);
    },
    240_000,
  );
});
