/**
 * The one settings table: no module outside src/config/ reads a `SKULK_*` variable (the source tree is
 * scanned), every variable src/ names is a row, every row is described and appears in docs/configuration.md.
 */
import { describe, expect, it } from "vitest";
import { configurationDoc } from "../../src/config/doc.ts";
import { resolveConfig } from "../../src/config/load.ts";
import { type Setting, SETTINGS } from "../../src/config/schema.ts";

const root = new URL("../../", import.meta.url).pathname;
const rows = Object.values(SETTINGS) as Setting<unknown>[];

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${root}${dir}`)) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory && rel !== "src/generated" && rel !== "src/dashboard/dist") out.push(...sources(rel));
    else if (e.isFile && /\.tsx?$/.test(e.name)) out.push(rel);
  }
  return out;
}

/** Reads of a `SKULK_*` variable: `env.SKULK_X`, `env["SKULK_X"]`, `get("SKULK_X")`, `env("SKULK_X")`. */
const READ =
  /(?:\.\s*SKULK_[A-Z0-9_]+\b|\[\s*["'`]SKULK_[A-Z0-9_]+["'`]\s*\]|\(\s*["'`]SKULK_[A-Z0-9_]+["'`]\s*[,)])/g;

/** The process environment outside src/config/: only what is no setting (PATH, the proxy variables). */
const OTHER_ENV_READS: Record<string, string> = {
  "src/telemetry/collect.ts": "PATH, to find nvidia-smi",
  "src/engines/settings.ts": "PATH, searched for engines no setting names",
  "src/engines/lifeline.ts": "PATH, to find setpriv for the parent-death signal",
  "src/downloads/http1.ts": "the proxy variables fetch honours and our HTTP/1.1 client does not",
  "src/cli/service.ts": "HOME and USER: where a user service lives, and whose linger to enable",
};

describe("the settings table", () => {
  const files = sources("src");

  it("is the only reader of SKULK_* variables: nothing outside src/config/ reads one", () => {
    const reads = files.filter((f) => !f.startsWith("src/config/")).flatMap((f) =>
      [...Deno.readTextFileSync(`${root}${f}`).matchAll(READ)].map((m) => `${f}: ${m[0]}`)
    );
    expect(reads).toEqual([]);
  });

  it("leaves the process environment to config resolution, but for PATH and proxies", () => {
    const readers = files.filter((f) => !f.startsWith("src/config/"))
      .filter((f) => /Deno\.env\b/.test(Deno.readTextFileSync(`${root}${f}`)));
    expect(readers.sort()).toEqual(Object.keys(OTHER_ENV_READS).sort());
  });

  it("has a row for every SKULK_* variable the program names", () => {
    const known = new Set(rows.flatMap((s) => [s.env, ...(s.envAliases ?? [])]));
    const named = new Set(
      files.flatMap((
        f,
      ) => [...Deno.readTextFileSync(`${root}${f}`).matchAll(/\bSKULK_[A-Z0-9_]*[A-Z0-9]\b/g)])
        .map((m) => m[0]),
    );
    expect([...named].filter((n) => !known.has(n)).sort()).toEqual([]);
  });

  it("gives every setting a unique key and variable and a one-line description", () => {
    const keys = rows.map((s) => s.key);
    const envs = rows.flatMap((s) => [s.env, ...(s.envAliases ?? [])]).filter(Boolean);
    expect(new Set(keys).size).toBe(keys.length);
    expect(new Set(envs).size).toBe(envs.length);
    for (const s of rows) {
      expect(s.description.trim(), s.key).not.toBe("");
      expect(s.description, s.key).not.toMatch(/\n/);
    }
  });

  it("is what docs/configuration.md shows, row by row, and the page on disk is up to date", () => {
    const page = configurationDoc();
    const lines = page.split("\n");
    for (const s of rows) {
      const row = lines.find((l) => l.startsWith(`| \`${s.key}\` |`));
      expect(row, s.key).toBeDefined();
      expect(row).toContain(s.description.replaceAll("|", "\\|"));
      for (const v of [s.env, ...(s.envAliases ?? [])]) if (v) expect(row).toContain(`\`${v}\``);
    }
    expect(Deno.readTextFileSync(`${root}docs/configuration.md`), "run `make embed`").toBe(page);
  });

  it("resolves an alias when the main variable is unset, and the main one first", () => {
    const max = (env: Record<string, string>) => resolveConfig({ flags: {}, env }).config.maxOutputTokens;
    expect(max({})).toBe(4096);
    expect(max({ SKULK_MAX_TOKENS: "64" })).toBe(64);
    expect(max({ SKULK_MAX_TOKENS: "64", SKULK_MAX_OUTPUT_TOKENS: "32" })).toBe(32);
    expect(() => resolveConfig({ flags: {}, env: { SKULK_MAX_TOKENS: "lots" } })).toThrow(
      /inference\.max_output_tokens \(from SKULK_MAX_TOKENS = "lots"\)/,
    );
  });

  it("reads no config file path from skulk.yaml, and derives host defaults from the given environment", () => {
    expect(() => resolveConfig({ flags: {}, env: {}, yaml: { config: "elsewhere.yaml" } })).toThrow(
      /config \(from skulk\.yaml\): unknown section/,
    );
    const { config } = resolveConfig({ flags: {}, env: { HOME: "/home/u", XDG_CACHE_HOME: "/xdg" } });
    expect(config.configFile).toBe("skulk.yaml");
    expect(config.cacheDir).toBe("/xdg/skulk");
    expect(config.hfHome).toBe("/home/u/.cache/huggingface");
  });
});
