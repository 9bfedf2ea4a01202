/**
 * The sherpa-onnx child process: loads the native addon and a TTS model and/or Silero VAD, and serves them
 * on 127.0.0.1 (health, streamed PCM synthesis, voice-activity sockets) so a native crash kills only it.
 */
import {
  HostConfigSchema,
  SAMPLE_RATE_HEADER,
  SHERPA_PATHS,
  SynthesisRequestSchema,
  type TtsModel,
  VAD_RATE,
  type VadOptions,
  VadOptionsSchema,
  type VadReply,
  type VadWireEvent,
} from "./protocol.ts";

/** What this module uses of sherpa-onnx-node (its JS has no type declarations). */
interface GeneratedAudio {
  samples: Float32Array;
  sampleRate: number;
}
interface OfflineTts {
  readonly sampleRate: number;
  readonly numSpeakers: number;
  generateAsync(o: {
    text: string;
    sid: number;
    speed: number;
    onProgress?: (info: { samples: Float32Array; progress: number }) => number;
  }): Promise<GeneratedAudio>;
}
interface Vad {
  acceptWaveform(samples: Float32Array): void;
  isDetected(): boolean;
  isEmpty(): boolean;
  front(enableExternalBuffer?: boolean): { start: number; samples: Float32Array };
  pop(): void;
  reset(): void;
}
interface Sherpa {
  OfflineTts: { createAsync(config: Record<string, unknown>): Promise<OfflineTts> };
  Vad: new (config: Record<string, unknown>, bufferSeconds: number) => Vad;
}

/** Waiting syntheses beyond this are refused (503): the node's route says the engine is busy. */
const MAX_WAITING = 16;
/** Silero's window at 16 kHz (sherpa-onnx's own examples use 512). */
const WINDOW = 512;

function log(message: string) {
  console.error(`[sherpa-onnx host] ${message}`);
}

async function loadSherpa(): Promise<Sherpa> {
  // Loaded here only, in the child: the daemon never maps the native addon into its own process.
  const mod = await import("sherpa-onnx-node");
  return (mod.default ?? mod) as unknown as Sherpa;
}

export function ttsConfig(m: TtsModel, threads: number): Record<string, unknown> {
  const model = m.kind === "vits"
    ? { vits: { model: m.model, tokens: m.tokens, dataDir: m.dataDir ?? "", lexicon: m.lexicon ?? "" } }
    : {
      kokoro: {
        model: m.model,
        voices: m.voices,
        tokens: m.tokens,
        dataDir: m.dataDir,
        lexicon: m.lexicon ?? "",
      },
    };
  // One sentence per batch: the progress callback then hands over audio sentence by sentence (streaming).
  return { model: { ...model, numThreads: threads, provider: "cpu", debug: false }, maxNumSentences: 1 };
}

/** float32 samples as little-endian 16-bit PCM. */
function pcm16(samples: Float32Array): Uint8Array {
  const out = new Uint8Array(samples.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    dv.setInt16(i * 2, Math.round(s * 32767), true);
  }
  return out;
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** Serialises syntheses: one OfflineTts handle generates one text at a time. */
class Queue {
  #tail: Promise<unknown> = Promise.resolve();
  waiting = 0;
  run<T>(job: () => Promise<T>): Promise<T> {
    this.waiting++;
    const result = this.#tail.then(job);
    this.#tail = result.catch(() => {}).finally(() => this.waiting--);
    return result;
  }
}

function synthesize(tts: OfflineTts, queue: Queue, req: Request): Promise<Response> | Response {
  if (queue.waiting >= MAX_WAITING) {
    return json(503, { error: `the voice is busy (${queue.waiting} syntheses waiting)` });
  }
  return req.json().then((body) => {
    const p = SynthesisRequestSchema.safeParse(body);
    if (!p.success) return json(400, { error: p.error.issues.map((i) => i.message).join("; ") });
    let cancelled = false;
    let sent = false;
    const body$ = new ReadableStream<Uint8Array>({
      start(controller) {
        void queue.run(async () => {
          if (cancelled) return;
          try {
            const audio = await tts.generateAsync({
              ...p.data,
              onProgress: ({ samples }) => {
                // The buffer is the engine's and freed after this returns: pcm16 copies it.
                if (!cancelled && samples.length) {
                  controller.enqueue(pcm16(samples));
                  sent = true;
                }
                return cancelled ? 0 : 1;
              },
            });
            if (!sent && !cancelled && audio.samples.length) controller.enqueue(pcm16(audio.samples));
            if (!cancelled) controller.close();
          } catch (e) {
            log(`synthesis failed: ${(e as Error).message}`);
            if (!cancelled) controller.error(e);
          }
        });
      },
      cancel() {
        cancelled = true;
      },
    });
    return new Response(body$, {
      headers: { "content-type": "application/octet-stream", [SAMPLE_RATE_HEADER]: String(tts.sampleRate) },
    });
  }, () => json(400, { error: "the body is not JSON" }));
}

/**
 * One voice-activity session: float32 16 kHz audio in, start/end events out. Starts are reported when
 * Silero first holds speech (back-dated as sherpa-onnx does: two windows and the minimum speech before),
 * ends when sherpa-onnx closes the segment after the minimum silence.
 */
export class VadSession {
  #pending = new Float32Array(0);
  /** Samples fed to the detector since the last reset, and before it. */
  #fed = 0;
  #base = 0;
  #inSpeech = false;
  #lastEnd = 0;

  constructor(readonly vad: Vad, readonly options: VadOptions) {}

  push(samples: Float32Array): VadWireEvent[] {
    const all = new Float32Array(this.#pending.length + samples.length);
    all.set(this.#pending);
    all.set(samples, this.#pending.length);
    const events: VadWireEvent[] = [];
    let at = 0;
    for (; at + WINDOW <= all.length; at += WINDOW) {
      this.vad.acceptWaveform(all.slice(at, at + WINDOW));
      this.#fed += WINDOW;
      const detected = this.vad.isDetected();
      if (detected && !this.#inSpeech) {
        const back = 2 * WINDOW + Math.round(this.options.minSpeech * VAD_RATE);
        events.push({ type: "start", sample: this.#base + Math.max(this.#lastEnd, this.#fed - back) });
      }
      this.#inSpeech = detected;
      while (!this.vad.isEmpty()) {
        const seg = this.vad.front(false);
        const start = this.#base + seg.start;
        const end = start + seg.samples.length;
        this.vad.pop();
        this.#lastEnd = end - this.#base;
        events.push({ type: "end", start, end });
      }
    }
    this.#pending = all.slice(at);
    return events;
  }

  reset(): void {
    this.vad.reset();
    this.#base += this.#fed + this.#pending.length;
    this.#fed = 0;
    this.#lastEnd = 0;
    this.#pending = new Float32Array(0);
    this.#inSpeech = false;
  }
}

function vadSocket(sherpa: Sherpa, model: string, threads: number, req: Request): Response {
  const url = new URL(req.url);
  const p = VadOptionsSchema.safeParse(Object.fromEntries(url.searchParams));
  if (!p.success) {
    return json(400, { error: p.error.issues.map((i) => `${i.path}: ${i.message}`).join("; ") });
  }
  if ((req.headers.get("upgrade") ?? "").toLowerCase() !== "websocket") {
    return json(426, { error: "connect with a WebSocket" });
  }
  const o = p.data;
  const vad = new sherpa.Vad({
    sileroVad: {
      model,
      threshold: o.threshold,
      minSilenceDuration: o.minSilence,
      minSpeechDuration: o.minSpeech,
      maxSpeechDuration: o.maxSpeech,
      windowSize: WINDOW,
    },
    sampleRate: VAD_RATE,
    numThreads: threads,
    debug: false,
  }, Math.max(60, o.maxSpeech + 10));
  const session = new VadSession(vad, o);
  const { socket, response } = Deno.upgradeWebSocket(req);
  socket.binaryType = "arraybuffer";
  socket.onmessage = (e) => {
    let reply: VadReply;
    try {
      if (typeof e.data === "string") {
        if (e.data !== "reset") throw new Error(`unknown command ${JSON.stringify(e.data)}`);
        session.reset();
        reply = { events: [] };
      } else {
        reply = { events: session.push(new Float32Array(e.data as ArrayBuffer)) };
      }
    } catch (err) {
      reply = { error: (err as Error).message };
    }
    socket.send(JSON.stringify(reply));
  };
  return response;
}

/** Runs the child until it is killed; throws (the process exits non-zero) when a model cannot be loaded. */
export async function runSherpaHost(input: unknown): Promise<void> {
  const parsed = HostConfigSchema.safeParse(input);
  if (!parsed.success) {
    throw new Error(
      `bad sherpa-onnx host config: ${
        parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")
      }`,
    );
  }
  const config = parsed.data;
  const sherpa = await loadSherpa();
  let tts: OfflineTts | null = null;
  if (config.tts) {
    const started = performance.now();
    tts = await sherpa.OfflineTts.createAsync(ttsConfig(config.tts, config.threads));
    log(
      `loaded ${config.tts.kind} model ${config.tts.model} in ${
        Math.round(performance.now() - started)
      } ms: ` +
        `${tts.sampleRate} Hz, ${tts.numSpeakers} speaker(s)`,
    );
  }
  if (config.vad) {
    // Loaded once here so a bad file fails the start, not the first session.
    new sherpa.Vad({
      sileroVad: { model: config.vad.model, windowSize: WINDOW },
      sampleRate: VAD_RATE,
      numThreads: 1,
      debug: false,
    }, 1);
    log(`loaded Silero VAD ${config.vad.model}`);
  }
  const queue = new Queue();
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: config.port,
    onListen: ({ port }) => log(`serving on 127.0.0.1:${port}`),
  }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === SHERPA_PATHS.health) {
      return json(200, {
        ok: true,
        tts: tts ? { sampleRate: tts.sampleRate, speakers: tts.numSpeakers } : null,
        vad: !!config.vad,
      });
    }
    if (path === SHERPA_PATHS.synthesize && req.method === "POST") {
      return tts ? synthesize(tts, queue, req) : json(404, { error: "this child holds no speech model" });
    }
    if (path === SHERPA_PATHS.vad && config.vad) {
      return vadSocket(sherpa, config.vad.model, config.threads, req);
    }
    return json(404, { error: `no route ${req.method} ${path}` });
  });
  await server.finished;
}
