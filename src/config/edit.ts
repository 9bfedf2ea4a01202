/**
 * Editing skulk.yaml from the API: the pure rules for what GET /config shows (never `hf_token`), how a
 * PUT body merges with the file on disk, and which keys a proposed file gets wrong (named, for the UI).
 */
import { ConfigError, resolveConfig } from "./load.ts";
import { type Config, type Env, type Scope, scopeOf, type Setting, SETTINGS } from "./schema.ts";

export type YamlObject = Record<string, unknown>;

/** Sections a PUT may omit without erasing them from the file (upstream keeps the token and logging). */
const PRESERVED = ["hf_token", "logging"] as const;

export interface ConfigProblem {
  /** The dotted key (`api.port`) or top-level section the problem is about. */
  param: string;
  message: string;
}

export interface SettingView {
  key: string;
  env: string | null;
  flag: string | null;
  /** "mapping": a nested mapping (each extension's config) the form shows but leaves to skulk.yaml. */
  kind: "number" | "boolean" | "list" | "text" | "mapping";
  /** "cluster": set for every node through an event; "node": this node's skulk.yaml only. */
  scope: Scope;
  /** What the running node uses for this key (secrets shown only as set or not). */
  running: unknown;
}

export function isObject(v: unknown): v is YamlObject {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Dotted keys of the credentials a file may hold (never shown, kept when a PUT leaves them out). */
const SECRET_KEYS = (Object.values(SETTINGS) as Setting<unknown>[]).filter((s) => s.secret).map((s) => s.key);

function getPath(y: YamlObject, key: string): unknown {
  return key.split(".").reduce<unknown>((cur, k) => (isObject(cur) ? cur[k] : undefined), y);
}

function withPath(y: YamlObject, key: string, value: unknown): YamlObject {
  const [head, ...rest] = key.split(".");
  if (rest.length === 0) {
    const { [head]: _drop, ...others } = y;
    return value === undefined ? others : { ...others, [head]: value };
  }
  const inner = isObject(y[head]) ? y[head] as YamlObject : {};
  return { ...y, [head]: withPath(inner, rest.join("."), value) };
}

export function redact(yaml: YamlObject): YamlObject {
  const { hf_token: _token, ...rest } = yaml;
  return SECRET_KEYS.reduce(
    (y, k) => (getPath(y, k) === undefined ? y : withPath(y, k, undefined)),
    rest as YamlObject,
  );
}

/** `{config: {...}}` or the config object itself; null when the body is neither. */
export function proposedConfig(body: unknown): YamlObject | null {
  if (!isObject(body)) return null;
  if (Object.keys(body).length === 1 && "config" in body) return isObject(body.config) ? body.config : null;
  return body;
}

export function mergeWithFile(proposed: YamlObject, onDisk: YamlObject): YamlObject {
  let out = { ...proposed };
  for (const k of PRESERVED) if (!(k in out) && k in onDisk) out[k] = onDisk[k];
  for (const k of SECRET_KEYS) {
    if (getPath(out, k) === undefined && getPath(onDisk, k) !== undefined) {
      out = withPath(out, k, getPath(onDisk, k));
    }
  }
  return out;
}

/**
 * One resolveConfig problem line (`key (from <file> = <value>): why`) as the key it is about and a short
 * message for beside the field: `key why (got value)`.
 */
export function readProblem(line: string): ConfigProblem {
  const m = line.match(/^([A-Za-z0-9_.]+) \(from .*? = (.*)\): (.*)$/s);
  if (m) return { param: m[1], message: `${m[1]} ${m[3]} (got ${m[2]})` };
  const key = line.match(/^([A-Za-z0-9_.]+)[\s:(]/)?.[1] ?? line;
  return { param: key, message: line.replace(/ \(from [^)]*\)/, "") };
}

/** Validates a proposed skulk.yaml on its own (flags and environment left out): its problems, named by key. */
export function validateConfigYaml(yaml: YamlObject, yamlPath: string): ConfigProblem[] {
  try {
    resolveConfig({ flags: {}, env: {}, yaml, yamlPath });
    return [];
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return e.problems.map(readProblem);
  }
}

function kindOf(s: Setting<unknown>): SettingView["kind"] {
  const d = typeof s.default === "function" ? (s.default as (env: Env) => unknown)({}) : s.default;
  if (typeof d === "number") return "number";
  if (typeof d === "boolean") return "boolean";
  if (Array.isArray(d)) return "list";
  if (d !== null && typeof d === "object") return "mapping";
  return "text";
}

/** Every setting the file can hold, with what the running node uses, for the settings form. */
export function settingViews(config: Config): SettingView[] {
  return (Object.entries(SETTINGS) as [keyof Config, Setting<unknown>][]).filter(([, s]) => !s.fileless).map((
    [name, s],
  ) => ({
    key: s.key,
    env: s.env ?? null,
    flag: s.flag ? `--${s.flag.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}` : null,
    kind: kindOf(s),
    scope: scopeOf(s),
    running: s.secret ? (config[name] ? "(set)" : null) : config[name],
  }));
}

/** Whether any setting resolves differently under the new file than under the old one. */
export function changesSettings(before: YamlObject, after: YamlObject, yamlPath: string): boolean {
  const resolve = (y: YamlObject) => {
    try {
      return JSON.stringify(resolveConfig({ flags: {}, env: {}, yaml: y, yamlPath }).config);
    } catch {
      return null;
    }
  };
  return resolve(before) !== resolve(after);
}

const CLUSTER = (Object.entries(SETTINGS) as [keyof Config, Setting<unknown>][]).filter(([, s]) =>
  scopeOf(s) === "cluster"
);

/**
 * Splits a proposed skulk.yaml: the cluster-scope keys it names (dotted key → value as written) become an
 * event for every node; the rest is this node's file.
 */
export function splitByScope(yaml: YamlObject): { cluster: Record<string, unknown>; node: YamlObject } {
  const cluster: Record<string, unknown> = {};
  let node = yaml;
  for (const [, s] of CLUSTER) {
    const v = getPath(yaml, s.key);
    if (v === undefined) continue;
    cluster[s.key] = v;
    node = withPath(node, s.key, undefined);
    // A section the split leaves empty goes too, so the file holds no `cluster: {}`.
    const section = s.key.split(".")[0];
    if (isObject(node[section]) && Object.keys(node[section] as YamlObject).length === 0) {
      node = withPath(node, section, undefined);
    }
  }
  return { cluster, node };
}

/**
 * The settings a node runs with: its own (flags, environment, skulk.yaml, defaults) with the cluster's
 * values over the cluster-scope keys. A value that does not parse (never submitted, but an event is
 * input from the log) leaves the node's own.
 */
export function withClusterConfig(own: Config, cluster: Record<string, unknown>): Config {
  const out = { ...own } as Record<string, unknown>;
  for (const [name, s] of CLUSTER) {
    if (!(s.key in cluster)) continue;
    const parsed = s.schema.safeParse(cluster[s.key]);
    if (parsed.success) out[name] = parsed.data;
  }
  return out as Config;
}
