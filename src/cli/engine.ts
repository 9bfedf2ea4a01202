/**
 * `skulk engine status|build`: what engines this node would run (llama.cpp's, and whisper-server and
 * espeak-ng for speech), and building llama.cpp or whisper.cpp from source.
 */
import type { Command } from "commander";
import { backendTags, findEngines } from "../engines/discovery.ts";
import { speechBackendTags } from "../engines/dispatch.ts";
import { findEspeak } from "../engines/espeak.ts";
import { findSherpaOnnx, HOST_SUBCOMMAND } from "../engines/sherpa/engine.ts";
import { loadConfig } from "../config/load.ts";
import {
  configureLifeline,
  currentLifeline,
  type Lifeline,
  SUPERVISE_SUBCOMMAND,
} from "../engines/lifeline.ts";
import { runSherpaHost } from "../engines/sherpa/host.ts";
import { runSupervisor } from "../engines/supervise.ts";
import { findWhisperServer } from "../engines/whisper-server.ts";
import { engineSettings } from "../engines/settings.ts";
import { BUILD_ENGINE_SCRIPT, BUILD_WHISPER_SCRIPT } from "../generated/scripts.gen.ts";
import { CliError } from "./common.ts";

/** How this node's engines are tied to its life (docs/architecture.md, process lifecycle). */
function describeLifeline(l: Lifeline): string {
  if (l.kind === "pdeathsig") return `parent-death signal (${l.setpriv} --pdeathsig KILL)`;
  if (l.kind === "supervise") return "watchdog (skulk engine supervise)";
  return "none: engines outlive a killed node until its next start";
}

export function registerEngine(program: Command): void {
  const engine = program.command("engine").description(
    "the llama.cpp engines (llama-server, ggml-rpc-server)",
  );
  engine.command("status")
    .description("show which engines were found, their llama.cpp build and RPC protocol version")
    .option("--json", "as JSON")
    .option("--config <file>", "skulk.yaml to read node.engine_lifeline from")
    .action(async (flags) => {
      const { config } = loadConfig({ config: flags.config });
      configureLifeline(config.engineLifeline);
      const settings = engineSettings(config);
      const found = await findEngines(settings);
      const speech = {
        whisperServer: findWhisperServer(settings),
        espeak: findEspeak(settings),
        sherpaOnnx: findSherpaOnnx(settings),
      };
      const info = {
        ...found,
        ...speech,
        backends: [...backendTags(found), ...speechBackendTags(settings)],
        lifeline: currentLifeline(),
      };
      if (flags.json) {
        console.log(JSON.stringify(info, null, 2));
        return;
      }
      console.log(
        `llama-server:    ${
          found.llamaServer ??
            "not found (install skulk-llama-cpu, set SKULK_LLAMA_SERVER_BIN or run `skulk engine build`)"
        }${found.source ? ` [from ${found.source}]` : ""}`,
      );
      console.log(
        `ggml-rpc-server: ${
          found.rpcServer ?? "not found (needed only to lend memory to a pooled instance)"
        }`,
      );
      console.log(`llama.cpp build: ${found.build ?? "unknown"}`);
      console.log(`compute backend: ${found.backend ?? "unknown"}`);
      console.log(`RPC protocol:    ${found.rpcProtocol ?? "unknown (a driver and its donors must match)"}`);
      console.log(
        `whisper-server:  ${
          speech.whisperServer ??
            "not found (speech-to-text; set SKULK_WHISPER_SERVER_BIN or run `skulk engine build --whisper`)"
        }`,
      );
      console.log(
        `espeak-ng:       ${
          speech.espeak ?? "not found (text-to-speech; install the Debian package espeak-ng)"
        }`,
      );
      console.log(
        `sherpa-onnx:     ${
          speech.sherpaOnnx ??
            "not found (neural voices; the npm package sherpa-onnx-node has no build for this platform)"
        }`,
      );
      console.log(`advertised:      ${info.backends.join(", ") || "none"}`);
      console.log(`lifeline:        ${describeLifeline(info.lifeline)}`);
      if (!found.llamaServer) throw new CliError("no llama-server found", 1);
    });
  // The node's sherpa-onnx child (src/engines/sherpa/host.ts): the same executable, so a compiled binary
  // needs no separate file. Hidden: the worker starts it, people do not.
  engine.command(HOST_SUBCOMMAND[1], { hidden: true })
    .description("serve a sherpa-onnx model on 127.0.0.1 (started by the node)")
    .requiredOption("--config <json>", "the child's config (src/engines/sherpa/protocol.ts)")
    .action(async (flags) => {
      let config: unknown;
      try {
        config = JSON.parse(flags.config);
      } catch (e) {
        throw new CliError(`--config is not JSON: ${(e as Error).message}`, 2);
      }
      await runSherpaHost(config);
    });
  // The engine watchdog (src/engines/lifeline.ts) where no parent-death signal exists (macOS): the same
  // executable, so a compiled binary needs nothing else. Hidden: the node starts it around an engine.
  engine.command(SUPERVISE_SUBCOMMAND[1], { hidden: true })
    .description("run an engine and kill it when the node that started it dies (started by the node)")
    .option("--grace-ms <ms>", "how long the engine gets between SIGTERM and SIGKILL", "5000")
    .argument("<engine...>", "the engine's command line, after --")
    .action(async (argv: string[], flags: { graceMs: string }) => {
      const graceMs = Number(flags.graceMs);
      if (!Number.isFinite(graceMs) || graceMs < 0) {
        throw new CliError("--grace-ms must be a number of ms", 2);
      }
      const code = await runSupervisor(argv, graceMs);
      // The watchdog's stdin reader would keep the program alive; the engine's status is the answer.
      Deno.exit(code);
    });
  engine.command("build")
    .description(
      "build llama-server and ggml-rpc-server from the llama.cpp source node-llama-cpp ships (about 13 minutes on 2 cores)",
    )
    .option("--backend <name>", "cpu, cuda, vulkan, rocm or metal", "cpu")
    .option("--jobs <n>", "parallel compile jobs (default: all cores)")
    .option(
      "--whisper",
      "build whisper.cpp's whisper-server instead (from nodejs-whisper's source; about 2 minutes on 2 cores)",
    )
    .action(async (flags) => {
      // The scripts are embedded so a compiled binary can build engines without the source tree.
      const script = await Deno.makeTempFile({ prefix: "skulk-build-engine-" });
      await Deno.writeTextFile(script, flags.whisper ? BUILD_WHISPER_SCRIPT : BUILD_ENGINE_SCRIPT);
      const args = [script, "--backend", flags.backend];
      if (flags.jobs) args.push("--jobs", flags.jobs);
      const status = await new Deno.Command("bash", {
        args,
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn().status;
      await Deno.remove(script).catch(() => undefined);
      if (!status.success) throw new CliError(`engine build failed (exit ${status.code})`, status.code || 1);
    });
}
