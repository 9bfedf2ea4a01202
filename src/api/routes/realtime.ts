/**
 * The realtime transcription WebSocket, `GET /v1/realtime?model=`: a RealtimeSession (src/serving/realtime.ts)
 * on a socket here, or a socket piped to the node that drives the model; idle and engine-death closes.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { logger } from "../../log/mod.ts";
import { EnergyVad } from "../../audio/vad.ts";
import { findSherpaOnnx } from "../../engines/sherpa/engine.ts";
import { findSileroModel, SileroVad } from "../../engines/sherpa/vad.ts";
import type { NodeContext } from "../../node/context.ts";
import { type ForwardDeadlines, forwardDeadlines, NodePulse } from "../../serving/deadlines.ts";
import { CLOSE, errorEvent, RealtimeSession, type VadFactory } from "../../serving/realtime.ts";
import { peerSignedForwardHeaders } from "../../serving/forward.ts";
import { transcribeLocal } from "../../serving/speech.ts";
import type { LocalRunner } from "../../worker/runner.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError } from "../errors.ts";
import { describe } from "../openapi.ts";
import { slotsOf } from "../slots.ts";
import { queryModel } from "./audio.ts";
import { engineSettings } from "../../engines/settings.ts";

const log = logger("realtime");

describe({
  method: "get",
  path: "/v1/realtime",
  summary: "Realtime transcription WebSocket (OpenAI realtime events, 24 kHz PCM16)",
  tag: "audio",
  query: { model: "a placed speech-to-text model" },
});

export const realtimeRoutes = new Hono<ApiEnv>();

/** Energy here, or Silero in the node's sherpa-onnx child; the node's `speech.vad` when a session names none. */
function vadFactory(ctx: NodeContext): VadFactory {
  return {
    defaultDetector: ctx.config.speechVad,
    make: (turn, rate) => {
      if (turn.detector === "energy") return new EnergyVad(turn, rate);
      if (!ctx.worker) throw new Error("silero needs this node's worker, and it runs with --no-worker");
      const engines = engineSettings(ctx.config);
      if (!findSherpaOnnx(engines)) {
        throw new Error("silero needs sherpa-onnx, which is not installed on this node");
      }
      const model = findSileroModel(engines);
      if ("error" in model) throw new Error(model.error);
      return new SileroVad(ctx.worker.vad(), turn, rate);
    },
  };
}

realtimeRoutes.get("/v1/realtime", (c) => {
  const { model, route } = queryModel(c, "stt");
  if ((c.req.header("upgrade") ?? "").toLowerCase() !== "websocket") {
    throw new ApiError(426, "this route is a WebSocket: connect with an Upgrade: websocket request");
  }
  // A session holds a slot from the upgrade until its socket closes, here or proxied to another node.
  const release = slotsOf(c.var.node).realtime.take();
  try {
    return "remote" in route
      ? proxyRealtime(c, route.remote, model, release)
      : localSession(c, route.local, model, release);
  } catch (e) {
    release();
    throw e;
  }
});

function localSession(
  c: Context<ApiEnv>,
  runner: LocalRunner,
  model: string,
  release: () => void,
): Response {
  const { socket, response } = Deno.upgradeWebSocket(c.req.raw, { idleTimeout: 0 });
  // Idle means no event either way: a session waiting on a long transcription is not idle.
  const idleMs = c.var.node.config.realtimeIdleMs;
  let idle: ReturnType<typeof setTimeout> | undefined;
  const touch = () => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      if (socket.readyState !== WebSocket.OPEN) return;
      if (session.pending > 0) return touch(); // waiting on the engine is not idleness
      socket.send(JSON.stringify({
        type: "error",
        error: {
          type: "invalid_request_error",
          code: "session_idle",
          message: `no event for ${idleMs} ms; closing`,
          param: null,
          event_id: null,
        },
      }));
      socket.close(CLOSE.idle, "idle timeout");
    }, idleMs);
  };
  const session = new RealtimeSession(
    model,
    (event) => {
      if (socket.readyState !== WebSocket.OPEN) return;
      touch();
      socket.send(JSON.stringify(event));
    },
    async (samples, sampleRate, o, onDelta) => {
      try {
        return await transcribeLocal(runner, { samples, sampleRate }, {
          task: "transcribe",
          maxQueued: c.var.node.config.speechMaxQueued,
          ...o,
        }, onDelta);
      } catch (e) {
        // A dead engine ends the session once the session has reported the failure (it does so first).
        if (runner.phase !== "ready") {
          setTimeout(() =>
            socket.readyState === WebSocket.OPEN &&
            socket.close(CLOSE.engineFailed, "the transcription engine failed"), 0);
        }
        throw e;
      }
    },
    (code, reason) => socket.readyState === WebSocket.OPEN && socket.close(code, reason),
    vadFactory(c.var.node),
  );
  socket.onopen = () => {
    session.start();
    touch();
  };
  socket.onmessage = (e) => {
    touch();
    if (typeof e.data !== "string") {
      return session.error("invalid_event", "send JSON text events; binary frames are not accepted");
    }
    session.handle(e.data);
  };
  socket.onclose = () => {
    release();
    clearTimeout(idle);
    session.shutdown();
  };
  socket.onerror = (e) =>
    log.debug("realtime socket error: {e}", { e: String((e as ErrorEvent).message ?? e) });
  return response;
}

/** Runs `act` on the client's socket once it is open (at once if it is): the node may fail before it opens. */
function whenOpen(socket: WebSocket, act: () => void): void {
  if (socket.readyState === WebSocket.CONNECTING) socket.addEventListener("open", act, { once: true });
  else if (socket.readyState === WebSocket.OPEN) act();
}

/**
 * The driving node's side of a proxied session: its events relayed to the client, the client's messages
 * held in `pending` until it opens, its closes mirrored; when the node fails (refuses the session, goes
 * away, or falls silent past the forward deadlines) the client gets one error event naming it and close 1011.
 */
function relayFromNode(
  socket: WebSocket,
  upstream: WebSocket,
  pending: string[],
  node: { nodeId: string; address: string; model: string },
  deadlines: ForwardDeadlines,
): void {
  const { nodeId, address, model } = node;
  const fail = (message: string) => {
    pulse.stop();
    whenOpen(socket, () => {
      socket.send(JSON.stringify(errorEvent("node_unreachable", message, undefined, "server_error")));
      socket.close(CLOSE.engineFailed, `node ${nodeId} failed`);
    });
    if (upstream.readyState <= WebSocket.OPEN) upstream.close();
  };
  const pulse = new NodePulse(nodeId, address, deadlines, (e) => fail(e.message));
  socket.addEventListener("close", () => pulse.stop());
  let opened = false;
  upstream.onopen = () => {
    opened = true;
    pulse.touch();
    pending.splice(0).forEach((m) => upstream.send(m));
  };
  upstream.onmessage = (e) => {
    pulse.touch();
    if (socket.readyState === WebSocket.OPEN) socket.send(e.data);
  };
  upstream.onclose = (e) => {
    pulse.stop();
    // 1006: the connection ended without a close frame: the node went away (killed, cut off).
    if (e.code === 1006) {
      return fail(`node ${nodeId} (${address}) that drives ${model} went away during the session`);
    }
    whenOpen(socket, () => socket.close(e.code === 1005 ? CLOSE.normal : e.code, e.reason));
  };
  upstream.onerror = () =>
    fail(
      `node ${nodeId} (${address}) that drives ${model} ${
        opened ? "went away during the session" : "did not accept the session"
      }`,
    );
}

/** A realtime session for a model another node drives: both sockets piped, closes mirrored. */
function proxyRealtime(c: Context<ApiEnv>, nodeId: string, model: string, release: () => void): Response {
  if (c.req.query("forwarded_by")) {
    throw new ApiError(
      503,
      `realtime request was forwarded here by ${
        c.req.query("forwarded_by")
      }, but this node does not drive ${model}`,
    );
  }
  const address = c.var.node.telemetry.get(nodeId)?.reading.apiAddress;
  if (!address) throw new ApiError(503, `node ${nodeId} drives ${model} but its address is unknown`);
  // The request's headers cannot be read once it is upgraded.
  const client = new Headers(c.req.raw.headers);
  const { socket, response } = Deno.upgradeWebSocket(c.req.raw, { idleTimeout: 0 });
  const path = `/v1/realtime?model=${encodeURIComponent(model)}&forwarded_by=${
    encodeURIComponent(c.var.node.nodeId)
  }`;
  const pending: string[] = [];
  // Set once the signed upgrade is on its way; messages wait in `pending` until it opens.
  let upstream: WebSocket | null = null;
  // Signed as a peer request like every forward: the client's key stays on this node (docs/cluster.md).
  peerSignedForwardHeaders(c.var.node, "GET", path, client, new Uint8Array()).then((headers) => {
    if (socket.readyState > WebSocket.OPEN) return;
    // Deno's WebSocket takes headers for the upgrade request (an extension of the web API).
    const ws = new WebSocket(`ws://${address}${path}`, { headers: Object.fromEntries(headers) });
    upstream = ws;
    relayFromNode(socket, ws, pending, { nodeId, address, model }, forwardDeadlines(c.var.node));
  }).catch((e) =>
    whenOpen(
      socket,
      () => socket.close(CLOSE.engineFailed, `could not sign the forwarded session: ${(e as Error).message}`),
    )
  );
  socket.onmessage = (
    e,
  ) => (upstream?.readyState === WebSocket.OPEN ? upstream.send(e.data) : pending.push(e.data));
  socket.onclose = () => {
    release();
    if (upstream && upstream.readyState <= WebSocket.OPEN) upstream.close();
  };
  return response;
}
