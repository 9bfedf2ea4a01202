/**
 * Finding llama.cpp engines (src/engines/discovery.ts), the apt packages' system directory included: real
 * executables in temporary directories stand in for the builds.
 */
import { describe, expect, it } from "vitest";
import { findEngines, SYSTEM_ENGINES_DIR } from "../../src/engines/discovery.ts";
import { tempDir } from "../helpers/daemon.ts";

/** A build directory as scripts/build-engine and the engine packages lay it out. */
function build(dir: string, backend: string): string {
  Deno.mkdirSync(`${dir}/bin`, { recursive: true });
  for (const name of ["llama-server", "ggml-rpc-server"]) {
    Deno.writeTextFileSync(`${dir}/bin/${name}`, `#!/bin/sh\necho "version: 1 (${backend})"\n`, {
      mode: 0o755,
    });
  }
  Deno.writeTextFileSync(
    `${dir}/build.json`,
    JSON.stringify({ llamaCppCommit: "80fb11ac73e6", backend, rpcProtocol: "6.0.0" }),
  );
  return `${dir}/bin`;
}

const settings = (cacheDir: string) => ({ llamaServerBin: null, rpcServerBin: null, cacheDir, path: "" });

describe("engine discovery", () => {
  it("the system directory is the one the packages install into", () => {
    expect(SYSTEM_ENGINES_DIR).toBe("/usr/lib/skulk/engines");
  });

  it("finds an engine package's build with nothing built or on PATH, and its rpc server beside it", async () => {
    const system = tempDir("engines-");
    const bin = build(`${system}/llama.cpp-cpu`, "cpu");
    const found = await findEngines(settings(tempDir("cache-")), system);
    expect(found).toMatchObject({
      llamaServer: `${bin}/llama-server`,
      rpcServer: `${bin}/ggml-rpc-server`,
      source: "system",
      backend: "cpu",
      rpcProtocol: "6.0.0",
      build: "1 (cpu)",
    });
  });

  it("prefers an accelerator's package to the CPU one", async () => {
    const system = tempDir("engines-");
    build(`${system}/llama.cpp-cpu`, "cpu");
    const vulkan = build(`${system}/llama.cpp-vulkan`, "vulkan");
    const found = await findEngines(settings(tempDir("cache-")), system);
    expect(found.llamaServer).toBe(`${vulkan}/llama-server`);
    expect(found.backend).toBe("vulkan");
  });

  it("a source build in the cache goes before the packages; no build anywhere finds nothing", async () => {
    const system = tempDir("engines-");
    build(`${system}/llama.cpp-cpu`, "cpu");
    const cache = tempDir("cache-");
    const own = build(`${cache}/engines/llama.cpp-80fb11ac73e6-cpu`, "cpu");
    expect((await findEngines(settings(cache), system)).llamaServer).toBe(`${own}/llama-server`);
    const none = await findEngines(settings(tempDir("cache-")), tempDir("engines-"));
    expect(none).toMatchObject({ llamaServer: null, rpcServer: null, source: null });
  });
});
