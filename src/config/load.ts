/**
 * Resolves the node's Config from flags, environment, `skulk.yaml` and defaults (in that order) and
 * validates every key with zod. A bad value is a ConfigError naming the key, where it came from and why.
 */
import { parse as parseYaml } from "yaml";
import { type Config, type Env, type Setting, SETTINGS } from "./schema.ts";

export type Source = "flag" | "env" | "skulk.yaml" | "default";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join("\n  ")}`);
    this.name = "ConfigError";
  }
}

export interface ConfigInputs {
  flags: Record<string, unknown>;
  env: Env;
  /** The parsed skulk.yaml (an object), or undefined when there is none. */
  yaml?: unknown;
  yamlPath?: string;
}

function yamlValue(yaml: unknown, key: string): unknown {
  let cur: unknown = yaml;
  for (const part of key.split(".")) {
    if (cur === null || typeof cur !== "object" || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

/** The first of a setting's variables that is set (non-empty), with its name. */
function fromEnvironment(s: Setting<unknown>, env: Env): { name: string; value: string } | undefined {
  for (const name of [s.env, ...(s.envAliases ?? [])]) {
    const value = name === undefined ? undefined : env[name];
    if (name !== undefined && value !== undefined && value !== "") return { name, value };
  }
  return undefined;
}

function describe(
  source: Source,
  setting: Setting<unknown>,
  envName: string | undefined,
  yamlPath?: string,
): string {
  switch (source) {
    case "flag":
      return `--${setting.flag!.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}`;
    case "env":
      return envName!;
    case "skulk.yaml":
      return yamlPath ?? "skulk.yaml";
    case "default":
      return "default";
  }
}

/** Pure: the same inputs always give the same Config (defaults that read the host aside). */
export function resolveConfig(inputs: ConfigInputs): { config: Config; sources: Record<string, Source> } {
  const problems: string[] = [];
  const config: Record<string, unknown> = {};
  const sources: Record<string, Source> = {};
  if (
    inputs.yaml !== undefined && inputs.yaml !== null &&
    (typeof inputs.yaml !== "object" || Array.isArray(inputs.yaml))
  ) {
    throw new ConfigError([
      `${inputs.yamlPath ?? "skulk.yaml"}: must be a mapping of sections (api, node, cluster, logging, ...)`,
    ]);
  }
  for (const [name, s] of Object.entries(SETTINGS) as [string, Setting<unknown>][]) {
    let raw: unknown;
    let source: Source = "default";
    const fromFlag = s.flag === undefined ? undefined : inputs.flags[s.flag];
    const fromEnv = fromEnvironment(s, inputs.env);
    const fromYaml = s.fileless ? undefined : yamlValue(inputs.yaml, s.key);
    if (fromFlag !== undefined && !(Array.isArray(fromFlag) && fromFlag.length === 0)) {
      [raw, source] = [fromFlag, "flag"];
    } else if (fromEnv !== undefined) [raw, source] = [fromEnv.value, "env"];
    else if (fromYaml !== undefined) [raw, source] = [fromYaml, "skulk.yaml"];
    else raw = typeof s.default === "function" ? (s.default as (env: Env) => unknown)(inputs.env) : s.default;
    const parsed = s.schema.safeParse(raw);
    if (!parsed.success) {
      const why = parsed.error.issues.map((i) => i.message).join("; ");
      const shown = s.secret ? '"(hidden)"' : JSON.stringify(raw);
      problems.push(
        `${s.key} (from ${describe(source, s, fromEnv?.name, inputs.yamlPath)} = ${shown}): ${why}`,
      );
      continue;
    }
    config[name] = parsed.data;
    sources[name] = source;
  }
  const known = new Set(
    (Object.values(SETTINGS) as Setting<unknown>[]).filter((s) => !s.fileless).map((s) =>
      s.key.split(".")[0]
    ),
  );
  // Upstream sections we carry but do not act on yet are accepted so a shared skulk.yaml still loads.
  for (const s of ["model_store", "inference", "tracing", "connectivity", "hf_token"]) known.add(s);
  if (inputs.yaml && typeof inputs.yaml === "object") {
    for (const section of Object.keys(inputs.yaml)) {
      if (!known.has(section)) {
        problems.push(`${section} (from ${inputs.yamlPath ?? "skulk.yaml"}): unknown section`);
      }
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { config: config as Config, sources };
}

/** The config file: --config, else SKULK_CONFIG, else ./skulk.yaml (upstream reads it from the CWD). */
export function configPath(flags: Record<string, unknown>, env: Env): { path: string; explicit: boolean } {
  const explicit = (flags.config as string | undefined) ?? env.SKULK_CONFIG;
  return explicit ? { path: explicit, explicit: true } : { path: "skulk.yaml", explicit: false };
}

export function readYaml(path: string, explicit: boolean): unknown {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound && !explicit) return undefined;
    throw new ConfigError([`${path}: cannot be read (${(e as Error).message})`]);
  }
  try {
    return parseYaml(text) ?? undefined;
  } catch (e) {
    throw new ConfigError([`${path}: is not valid YAML (${(e as Error).message.split("\n")[0]})`]);
  }
}

/** The one place the process environment is read: every setting, its variable, skulk.yaml and default. */
export function loadConfig(
  flags: Record<string, unknown>,
  env: Env = Deno.env.toObject(),
): { config: Config; sources: Record<string, Source>; yamlPath: string } {
  const { path, explicit } = configPath(flags, env);
  const yaml = readYaml(path, explicit);
  return { ...resolveConfig({ flags, env, yaml, yamlPath: path }), yamlPath: path };
}
