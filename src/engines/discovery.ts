/**
 * Finds the llama.cpp engines this node can run: `SKULK_LLAMA_SERVER_BIN`, else PATH, else the build
 * cache, else an engine package under /usr/lib/skulk/engines; `ggml-rpc-server` from `SKULK_RPC_SERVER_BIN`,
 * else next to llama-server. Reports their build.
 */
import { z } from "zod";
import type { EngineSettings } from "./settings.ts";

export const BuildInfoSchema = z.object({
  llamaCppCommit: z.string(),
  backend: z.string(),
  rpcProtocol: z.string().optional(),
}).loose();

export interface EngineFound {
  llamaServer: string | null;
  rpcServer: string | null;
  /** How llama-server was found: env, path, cache (`skulk engine build`) or system (an engine package). */
  source: "env" | "path" | "cache" | "system" | null;
  /** `llama-server --version`'s build line, e.g. "0.4.0-dev (build 1, commit 80fb11a)". */
  build: string | null;
  backend: string | null;
  rpcProtocol: string | null;
}

export function isExecutable(path: string): boolean {
  try {
    const st = Deno.statSync(path);
    return st.isFile && ((st.mode ?? 0o111) & 0o111) !== 0;
  } catch {
    return false;
  }
}

export function onPath(name: string, path: string): string | null {
  for (const dir of path.split(":")) {
    if (dir && isExecutable(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return null;
}

/** Where the engine packages (skulk-llama-cpu, -vulkan, -cuda, -rocm) put their builds, one directory each. */
export const SYSTEM_ENGINES_DIR = "/usr/lib/skulk/engines";

/** With several engine packages installed, an accelerator's build goes before the CPU one. */
const BACKEND_PREFERENCE = ["cuda", "rocm", "vulkan", "metal", "cpu"];

function fromSystem(dir: string): string | null {
  try {
    const builds = [...Deno.readDirSync(dir)].filter((e) => e.isDirectory).map((e) => e.name)
      .filter((name) => isExecutable(`${dir}/${name}/bin/llama-server`));
    const rank = (name: string) => {
      const backend = readBuildInfo(`${dir}/${name}/bin/llama-server`)?.backend ?? "";
      const i = BACKEND_PREFERENCE.indexOf(backend);
      return i < 0 ? BACKEND_PREFERENCE.length : i;
    };
    builds.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    return builds.length ? `${dir}/${builds[0]}/bin/llama-server` : null;
  } catch {
    return null;
  }
}

function fromCache(cacheDir: string): string | null {
  const dir = `${cacheDir}/engines`;
  try {
    const builds = [...Deno.readDirSync(dir)].filter((e) => e.isDirectory).map((e) => `${dir}/${e.name}`)
      .filter((d) => isExecutable(`${d}/bin/llama-server`))
      .sort((a, b) => Deno.statSync(b).mtime!.getTime() - Deno.statSync(a).mtime!.getTime());
    return builds.length ? `${builds[0]}/bin/llama-server` : null;
  } catch {
    return null;
  }
}

function readBuildInfo(llamaServer: string): z.infer<typeof BuildInfoSchema> | null {
  const dir = llamaServer.replace(/\/[^/]+$/, "");
  for (const p of [`${dir}/build.json`, `${dir}/../build.json`]) {
    try {
      const parsed = BuildInfoSchema.safeParse(JSON.parse(Deno.readTextFileSync(p)));
      if (parsed.success) return parsed.data;
    } catch { /* not there */ }
  }
  return null;
}

async function versionLine(bin: string): Promise<string | null> {
  try {
    const out = await new Deno.Command(bin, { args: ["--version"], stdout: "piped", stderr: "piped" })
      .output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    return text.match(/version:\s*(.+)/)?.[1]?.trim() ?? null;
  } catch {
    return null;
  }
}

export class EngineNotFound extends Error {
  constructor() {
    super(
      "llama-server was not found: install the skulk-llama-cpu package, set SKULK_LLAMA_SERVER_BIN, put it on PATH, or run `skulk engine build` (scripts/build-engine)",
    );
    this.name = "EngineNotFound";
  }
}

export async function findEngines(
  s: Pick<EngineSettings, "llamaServerBin" | "rpcServerBin" | "cacheDir" | "path">,
  systemDir: string = SYSTEM_ENGINES_DIR,
): Promise<EngineFound> {
  let source: EngineFound["source"] = null;
  let llamaServer: string | null = null;
  if (s.llamaServerBin) {
    llamaServer = isExecutable(s.llamaServerBin) ? s.llamaServerBin : null;
    source = llamaServer ? "env" : null;
  } else if ((llamaServer = onPath("llama-server", s.path))) source = "path";
  else if ((llamaServer = fromCache(s.cacheDir))) source = "cache";
  else if ((llamaServer = fromSystem(systemDir))) source = "system";
  let rpcServer: string | null = null;
  if (s.rpcServerBin) {
    rpcServer = isExecutable(s.rpcServerBin) ? s.rpcServerBin : null;
  } else if (llamaServer) {
    const dir = llamaServer.replace(/\/[^/]+$/, "");
    rpcServer = [`${dir}/ggml-rpc-server`, `${dir}/rpc-server`].find(isExecutable) ?? null;
  }
  const info = llamaServer ? readBuildInfo(llamaServer) : null;
  return {
    llamaServer,
    rpcServer,
    source,
    build: llamaServer ? await versionLine(llamaServer) : null,
    backend: info?.backend ?? null,
    rpcProtocol: info?.rpcProtocol ?? null,
  };
}

/** The backend tags this node advertises to placement (`llama_cpp-cpu`, `llama_cpp-cuda`, ...). */
export function backendTags(found: EngineFound): string[] {
  if (!found.llamaServer) return [];
  const compute = found.backend ?? "cpu";
  const tags = new Set(["llama_cpp", `llama_cpp-${compute}`, "llama_cpp-cpu"]);
  return [...tags].sort();
}
