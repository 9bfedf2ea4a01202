/** `skulk engine status|build`: what llama.cpp engines this node would run, and building them from source. */
import type { Command } from "commander";
import { backendTags, findEngines } from "../engines/discovery.ts";
import { BUILD_ENGINE_SCRIPT } from "../generated/scripts.gen.ts";
import { CliError } from "./common.ts";

export function registerEngine(program: Command): void {
  const engine = program.command("engine").description("the llama.cpp engines (llama-server, ggml-rpc-server)");
  engine.command("status")
    .description("show which engines were found, their llama.cpp build and RPC protocol version")
    .option("--json", "as JSON")
    .action(async (flags) => {
      const found = await findEngines();
      const info = { ...found, backends: backendTags(found) };
      if (flags.json) {
        console.log(JSON.stringify(info, null, 2));
        return;
      }
      console.log(`llama-server:    ${found.llamaServer ?? "not found (set SKULK_LLAMA_SERVER_BIN or run `skulk engine build`)"}${found.source ? ` [from ${found.source}]` : ""}`);
      console.log(`ggml-rpc-server: ${found.rpcServer ?? "not found (needed only to lend memory to a pooled instance)"}`);
      console.log(`llama.cpp build: ${found.build ?? "unknown"}`);
      console.log(`compute backend: ${found.backend ?? "unknown"}`);
      console.log(`RPC protocol:    ${found.rpcProtocol ?? "unknown (a driver and its donors must match)"}`);
      console.log(`advertised:      ${info.backends.join(", ") || "none"}`);
      if (!found.llamaServer) throw new CliError("no llama-server found", 1);
    });
  engine.command("build")
    .description("build llama-server and ggml-rpc-server from the llama.cpp source node-llama-cpp ships (about 13 minutes on 2 cores)")
    .option("--backend <name>", "cpu, cuda, vulkan, rocm or metal", "cpu")
    .option("--jobs <n>", "parallel compile jobs (default: all cores)")
    .action(async (flags) => {
      // The script is embedded so a compiled binary can build engines without the source tree.
      const script = await Deno.makeTempFile({ prefix: "skulk-build-engine-" });
      await Deno.writeTextFile(script, BUILD_ENGINE_SCRIPT);
      const args = [script, "--backend", flags.backend];
      if (flags.jobs) args.push("--jobs", flags.jobs);
      const status = await new Deno.Command("bash", { args, stdin: "null", stdout: "inherit", stderr: "inherit" }).spawn().status;
      await Deno.remove(script).catch(() => undefined);
      if (!status.success) throw new CliError(`engine build failed (exit ${status.code})`, status.code || 1);
    });
}
