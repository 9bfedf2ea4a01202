/**
 * Silero VAD for realtime sessions: the model file (SKULK_SILERO_VAD_MODEL or the engine cache), the
 * node's one sherpa-onnx child that runs it (started on first use, again after it dies), and a detector
 * per session that streams its audio to that child over a WebSocket.
 */
import { Resampler } from "../../audio/resample.ts";
import type { TurnDetection, VadEvent, VoiceActivityDetector } from "../../audio/vad.ts";
import type { EngineProcess } from "../process.ts";
import type { EngineSettings } from "../settings.ts";
import { SHERPA_PATHS, VAD_RATE, type VadOptions, VadReplySchema } from "./protocol.ts";

/** Where scripts/fetch-silero-vad puts the model. */
export function sileroModelPath(s: Pick<EngineSettings, "sileroVadModel" | "cacheDir">): string {
  return s.sileroVadModel ?? `${s.cacheDir}/models/silero_vad_v5.onnx`;
}

/** The model file, or why there is none. */
export function findSileroModel(
  s: Pick<EngineSettings, "sileroVadModel" | "cacheDir">,
): { path: string } | { error: string } {
  const path = sileroModelPath(s);
  try {
    if (Deno.statSync(path).isFile) return { path };
  } catch { /* missing */ }
  return {
    error: `the Silero VAD model is not on this node (looked for ${path}): run scripts/fetch-silero-vad ` +
      `or set SKULK_SILERO_VAD_MODEL`,
  };
}

/** Silero's speech probability threshold for each aggressiveness (0.5 is Silero's own default). */
const THRESHOLDS = [0.3, 0.4, 0.5, 0.7];

/** A session's turn detection as Silero's settings (pure). */
export function sileroOptions(turn: TurnDetection): VadOptions {
  return {
    threshold: turn.threshold ?? THRESHOLDS[turn.aggressiveness],
    minSilence: turn.silence_duration_ms / 1000,
    minSpeech: turn.minimum_speech_ms / 1000,
    maxSpeech: turn.maximum_utterance_ms / 1000,
  };
}

/** Makes the child on a port; the caller (the worker) owns ports (released once the child is gone) and the pid registry. */
export type StartVadChild = (model: string) => { engine: EngineProcess; port: number; release: () => void };

/** A serving Silero child, and when the supervisor noticed it die. */
export interface VadChild {
  url: string;
  engine: EngineProcess;
  died: Promise<void>;
}

/** The node's Silero child: one for all sessions, started on first use and again after it died. */
export class VadHost {
  #running: Promise<VadChild & { release: () => void }> | null = null;
  #stopped = false;

  constructor(
    readonly start: StartVadChild,
    readonly settings: Pick<EngineSettings, "sileroVadModel" | "cacheDir">,
  ) {}

  /** ws://127.0.0.1:<port> of a serving child; throws with the reason when it cannot start. */
  async url(): Promise<VadChild> {
    if (this.#stopped) throw new Error("the node is stopping");
    if (!this.#running) {
      const model = findSileroModel(this.settings);
      if ("error" in model) throw new Error(model.error);
      const { engine, port, release } = this.start(model.path);
      const died = Promise.withResolvers<void>();
      const running = engine.start().then(() => ({
        url: `ws://127.0.0.1:${port}`,
        engine,
        release,
        died: died.promise,
      }));
      this.#running = running;
      const gone = () => {
        release();
        if (this.#running === running) this.#running = null;
        died.resolve();
      };
      engine.onDeath(gone);
      running.catch(gone);
    }
    return await this.#running;
  }

  /**
   * A serving child after a session could not reach `child`: a child that has just died may not be noticed yet
   * (its sockets close before its exit is reaped), so this waits for that, at most 5 s, then asks again.
   */
  async replacing(child: VadChild): Promise<VadChild> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([child.died, new Promise<void>((r) => (timer = setTimeout(r, 5000)))]);
    clearTimeout(timer);
    return await this.url();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const running = await this.#running?.catch(() => null);
    this.#running = null;
    await running?.engine.stop(1000);
    running?.release();
  }
}

/**
 * One session's Silero detector: 24 kHz session audio resampled to 16 kHz and sent to the child, one
 * reply per message, in order. Positions come back at 16 kHz and are mapped to the session's clock.
 */
export class SileroVad implements VoiceActivityDetector {
  readonly #socket: Promise<WebSocket>;
  readonly #replies: { resolve: (v: unknown) => void; reject: (e: Error) => void }[] = [];
  readonly #ratio: number;
  readonly #padding: number;
  /**
   * One resampler for the session's whole stream (kept across resets, whose sample clock runs on): chunk
   * edges neither click nor drift, at the cost of holding back about 3 ms until the next push.
   */
  readonly #down: Resampler;
  #inSpeech = false;
  #lastStop = 0;
  #closedWhy: string | null = null;

  constructor(host: VadHost, readonly turn: TurnDetection, readonly sampleRate: number) {
    this.#ratio = sampleRate / VAD_RATE;
    this.#down = new Resampler(sampleRate, VAD_RATE);
    this.#padding = Math.round(turn.prefix_padding_ms * sampleRate / 1000);
    const o = sileroOptions(turn);
    const query = new URLSearchParams({
      threshold: String(o.threshold),
      minSilence: String(o.minSilence),
      minSpeech: String(o.minSpeech),
      maxSpeech: String(o.maxSpeech),
    });
    const connect = ({ url, engine }: VadChild) =>
      new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(`${url}${SHERPA_PATHS.vad}?${query}`);
        ws.binaryType = "arraybuffer";
        ws.onerror = () => reject(new Error("the Silero VAD child refused the session"));
        ws.onopen = () => {
          // Only a session that was open fails when its socket closes; a refused connect is tried again.
          ws.onclose = () => {
            const tail = engine.tail().slice(-3).join(" | ");
            this.#fail(`the Silero VAD child closed the session${tail ? ` (${tail})` : ""}`);
          };
          resolve(ws);
        };
        ws.onmessage = (e) => {
          const waiter = this.#replies.shift();
          try {
            waiter?.resolve(JSON.parse(String(e.data)));
          } catch (err) {
            waiter?.reject(err as Error);
          }
        };
      });
    this.#socket = host.url().then(async (child) => {
      try {
        return await connect(child);
      } catch {
        return await connect(await host.replacing(child));
      }
    });
    // A session that never pushes must not leave an unhandled rejection behind.
    this.#socket.catch((e) => this.#fail((e as Error).message));
  }

  get inSpeech(): boolean {
    return this.#inSpeech;
  }

  #fail(why: string) {
    this.#closedWhy ??= why;
    for (const w of this.#replies.splice(0)) w.reject(new Error(this.#closedWhy));
  }

  async #send(data: ArrayBuffer | string): Promise<unknown> {
    const ws = await this.#socket;
    if (this.#closedWhy) throw new Error(this.#closedWhy);
    const reply = new Promise((resolve, reject) => this.#replies.push({ resolve, reject }));
    ws.send(data);
    return await reply;
  }

  async push(samples: Float32Array): Promise<VadEvent[]> {
    const down = this.#down.push(samples);
    const reply = VadReplySchema.parse(await this.#send(down.slice().buffer));
    if ("error" in reply) throw new Error(`Silero VAD failed: ${reply.error}`);
    const events: VadEvent[] = [];
    for (const e of reply.events) {
      if (e.type === "start") {
        this.#inSpeech = true;
        const at = Math.round(e.sample * this.#ratio) - this.#padding;
        events.push({ type: "speech_started", atSample: Math.max(this.#lastStop, at, 0) });
      } else {
        this.#inSpeech = false;
        this.#lastStop = Math.round(e.end * this.#ratio);
        events.push({ type: "speech_stopped", atSample: this.#lastStop });
      }
    }
    return events;
  }

  async reset(): Promise<void> {
    this.#inSpeech = false;
    await this.#send("reset");
  }

  close(): void {
    this.#fail("the session ended");
    void this.#socket.then((ws) => ws.close()).catch(() => {});
  }
}
