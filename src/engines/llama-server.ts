/**
 * llama-server as a supervised engine: the command line a placement implies (model, context, GPU layers,
 * RPC donors, embedding mode, speculative decoding), bound to 127.0.0.1 on a port from the band, ready when GET /health is 200.
 */
import { answersOk, EngineProcess, type ProcessRegistry } from "./process.ts";
import { type Speculation, speculationArgs } from "./speculation.ts";

export interface LlamaServerOptions {
  bin: string;
  model: string;
  port: number;
  contextTokens: number;
  /** Layers to offload to accelerators (99 = all); on CPU-only builds this is harmless. */
  gpuLayers?: number;
  /** host:port of each ggml-rpc-server donor, for a pooled instance. */
  rpc?: string[];
  embedding?: boolean;
  parallel?: number;
  threads?: number;
  mmproj?: string;
  readyDeadlineMs?: number;
  /** Speculative decoding, and the local path of its draft model when it has one. */
  speculation?: { spec: Speculation; draftPath: string | null };
  /** `-lv`: 4 makes llama.cpp log each device's buffers (how a pool split the model). */
  verbosity?: number;
}

export function llamaServerArgs(o: LlamaServerOptions): string[] {
  const args = [
    "-m",
    o.model,
    "-c",
    String(o.contextTokens),
    "-ngl",
    String(o.gpuLayers ?? 99),
    "--host",
    "127.0.0.1",
    "--port",
    String(o.port),
    "--jinja",
    "--no-webui",
    "-np",
    String(o.parallel ?? 4),
    "--kv-unified",
  ];
  if (o.threads) args.push("-t", String(o.threads));
  if (o.verbosity !== undefined) args.push("-lv", String(o.verbosity));
  if (o.rpc?.length) args.push("--rpc", o.rpc.join(","));
  if (o.embedding) args.push("--embedding");
  if (o.mmproj) args.push("--mmproj", o.mmproj);
  if (o.speculation) {
    // --metrics exposes the acceptance counters the runner's status reads (loopback only, like the engine).
    args.push(...speculationArgs(o.speculation.spec, o.speculation.draftPath), "--metrics");
  }
  return args;
}

export function healthy(baseUrl: string, timeoutMs = 1500): Promise<boolean> {
  return answersOk(`${baseUrl}/health`, timeoutMs);
}

export function llamaServerProcess(o: LlamaServerOptions, registry?: ProcessRegistry): EngineProcess {
  const base = `http://127.0.0.1:${o.port}`;
  return new EngineProcess({
    kind: "llama-server",
    bin: o.bin,
    args: llamaServerArgs(o),
    probe: () => healthy(base),
    readyDeadlineMs: o.readyDeadlineMs ?? 120_000,
    livenessIntervalMs: 2000,
    livenessFailures: 3,
  }, registry);
}
