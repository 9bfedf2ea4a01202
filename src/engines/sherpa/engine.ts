/**
 * sherpa-onnx as a supervised engine: whether this node has the native addon (its backend tag), and the
 * child process (this same program's hidden `engine sherpa-host`) bound to a band port, ready on /health.
 */
import { createRequire } from "node:module";
import { selfProgram } from "../../node/self.ts";
import { answersOk, EngineProcess, type ProcessRegistry } from "../process.ts";
import type { EngineSettings } from "../settings.ts";
import { type HostConfig, SHERPA_PATHS } from "./protocol.ts";

/** The hidden subcommand the child runs (src/cli/engine.ts). */
export const HOST_SUBCOMMAND = ["engine", "sherpa-host"] as const;

/** npm's name for this platform's sherpa-onnx binaries (sherpa-onnx-node's optional dependencies). */
export function nativePackage(os: string = Deno.build.os, arch: string = Deno.build.arch): string | null {
  const platform = os === "windows" ? "win" : os;
  const cpu = arch === "x86_64" ? "x64" : arch === "aarch64" ? "arm64" : null;
  return cpu && ["linux", "darwin", "win"].includes(platform) ? `sherpa-onnx-${platform}-${cpu}` : null;
}

/**
 * The native addon this node would load, or null (also when engines.sherpa_onnx turns the engine off).
 * Found through the package manager's layout, without loading it: the daemon never maps native code.
 */
export function findSherpaOnnx(s: Pick<EngineSettings, "sherpaOnnx">): string | null {
  if (!s.sherpaOnnx) return null;
  const pkg = nativePackage();
  if (!pkg) return null;
  try {
    const main = createRequire(import.meta.url).resolve("sherpa-onnx-node/package.json");
    // npm and Deno install the platform package next to sherpa-onnx-node, where its loader looks first.
    const addon = `${main.replace(/\/sherpa-onnx-node\/package\.json$/, "")}/${pkg}/sherpa-onnx.node`;
    return Deno.statSync(addon).isFile ? addon : null;
  } catch {
    return null;
  }
}

export interface SherpaProcessOptions {
  port: number;
  config: Omit<HostConfig, "port">;
  readyDeadlineMs?: number;
}

/** The supervised child: this program with the hidden subcommand and its config as JSON. */
export function sherpaProcess(o: SherpaProcessOptions, registry?: ProcessRegistry): EngineProcess {
  const [bin, ...args] = [
    ...selfProgram(),
    ...HOST_SUBCOMMAND,
    "--config",
    JSON.stringify({ ...o.config, port: o.port }),
  ];
  const base = `http://127.0.0.1:${o.port}`;
  return new EngineProcess({
    kind: o.config.tts ? "sherpa-onnx" : "sherpa-onnx-vad",
    bin,
    args,
    probe: () => answersOk(`${base}${SHERPA_PATHS.health}`),
    readyDeadlineMs: o.readyDeadlineMs ?? 120_000,
    // Synthesis runs on the addon's own thread, so /health answers during it; a silent child is wedged.
    livenessIntervalMs: 2000,
    livenessFailures: 5,
  }, registry);
}
