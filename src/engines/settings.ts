/**
 * What the engine finders and launchers read: the engine settings of the resolved Config (binaries, cache
 * dir, threads, the Silero model) and the PATH they search, one narrow value so no engine module reads env.
 */
import type { Config } from "../config/schema.ts";

const KEYS = [
  "cacheDir",
  "llamaServerBin",
  "rpcServerBin",
  "whisperServerBin",
  "espeakBin",
  "sherpaOnnx",
  "sherpaThreads",
  "llamaThreads",
  "speculationNgram",
  "llamaParallel",
  "sileroVadModel",
] as const satisfies readonly (keyof Config)[];

export type EngineSettings = Pick<Config, typeof KEYS[number]> & {
  /** The directories searched for engines named by no setting (the process's PATH). */
  path: string;
};

/** The engine settings of `config`; PATH is the process's unless a test names another. */
export function engineSettings(
  config: Omit<EngineSettings, "path">,
  path: string = Deno.env.get("PATH") ?? "",
): EngineSettings {
  return { ...Object.fromEntries(KEYS.map((k) => [k, config[k]])) as Omit<EngineSettings, "path">, path };
}
