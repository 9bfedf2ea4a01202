/**
 * Loading extensions at node start: each specifier (a path, a file: or http(s) URL, an npm: or jsr: specifier)
 * imported, its default export checked (API version first, then shape), its setup run under guard. A module that
 * fails any step is refused with the reason and the node starts without it.
 */
import { Buffer } from "node:buffer";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { logger } from "../log/mod.ts";
import { VERSION } from "../version.ts";
import {
  type Extension,
  EXTENSION_API_VERSION,
  type ExtensionContext,
  ExtensionSchema,
  type RefusedStatus,
} from "./api.ts";
import { errorText, guarded } from "./guard.ts";
import { ExtensionHost, type HostOptions, type Running } from "./host.ts";

const log = logger("extensions");

/** A specifier as `import()` takes it: paths become file: URLs (relative ones from the working directory). */
export function moduleUrl(spec: string, cwd: string): string {
  if (/^(npm|jsr|file|https?|data):/i.test(spec)) return spec;
  return pathToFileURL(isAbsolute(spec) ? spec : resolve(cwd, spec)).href;
}

export type Importer = (url: string) => Promise<unknown>;

/**
 * `import(url)`, and for a file: URL the module's own text as a data: URL when the runtime cannot load the file
 * itself: a `deno compile`d binary imports only what was compiled into it, but it evaluates data: URLs, so a
 * single-file JavaScript extension (bundled, no relative imports) loads there too.
 */
export async function importModule(url: string, native: Importer = (u) => import(u)): Promise<unknown> {
  try {
    return await native(url);
  } catch (e) {
    if (!url.startsWith("file:") || !/module not found/i.test(String((e as Error)?.message))) throw e;
    let text: string;
    try {
      text = await Deno.readTextFile(new URL(url));
    } catch {
      throw e;
    }
    return await native(`data:text/javascript;base64,${Buffer.from(text).toString("base64")}`);
  }
}

export interface LoadOptions extends HostOptions {
  specs: string[];
  /** `extensions.config`: each extension's own settings, by its name. */
  configs: Record<string, Record<string, unknown>>;
  nodeId: string;
  embed: ExtensionContext["embed"];
  cwd?: string;
  importer?: Importer;
}

/** Why a module's default export is refused, or the extension it is. */
export function checkExport(
  mod: unknown,
): { ok: true; ext: Extension } | { ok: false; name: string | null; reason: string } {
  const value = (mod as { default?: unknown } | null)?.default;
  if (value === null || typeof value !== "object") {
    return { ok: false, name: null, reason: "its default export is not an extension object" };
  }
  const v = value as Record<string, unknown>;
  const name = typeof v.name === "string" ? v.name : null;
  if (v.apiVersion !== EXTENSION_API_VERSION) {
    const asked = v.apiVersion === undefined
      ? "no extension API version"
      : `extension API version ${JSON.stringify(v.apiVersion)}`;
    return {
      ok: false,
      name,
      reason: `${
        name ?? "the extension"
      } requires ${asked}, but this Skulk (${VERSION}) supports extension API version ${EXTENSION_API_VERSION}`,
    };
  }
  const parsed = ExtensionSchema.safeParse(v);
  if (!parsed.success) {
    return { ok: false, name, reason: parsed.error.issues.map((i) => i.message).join("; ") };
  }
  return { ok: true, ext: value as Extension };
}

/** Loads every extension named in the settings (none when disabled); never throws. */
export async function loadExtensions(o: LoadOptions): Promise<ExtensionHost> {
  const running: Running[] = [];
  const refused: RefusedStatus[] = [];
  if (!o.enabled) {
    if (o.specs.length) {
      log.warn("extensions disabled (extensions.disable / SKULK_EXTENSIONS_DISABLE): {n} not loaded", {
        n: o.specs.length,
      });
    }
    return new ExtensionHost(running, refused, o);
  }
  const refuse = (source: string, name: string | null, reason: string) => {
    refused.push({ source, name, reason });
    log.error("extension {source} refused: {reason}", { source, reason });
  };
  for (const source of o.specs) {
    let mod: unknown;
    try {
      mod = await importModule(moduleUrl(source, o.cwd ?? Deno.cwd()), o.importer);
    } catch (e) {
      refuse(source, null, `cannot be loaded: ${errorText(e)}`);
      continue;
    }
    const checked = checkExport(mod);
    if (!checked.ok) {
      refuse(source, checked.name, checked.reason);
      continue;
    }
    const ext = checked.ext;
    if (running.some((r) => r.ext.name === ext.name)) {
      refuse(source, ext.name, `another extension already loaded is named ${ext.name}`);
      continue;
    }
    const ctx: ExtensionContext = Object.freeze({
      name: ext.name,
      nodeId: o.nodeId,
      skulkVersion: VERSION,
      config: Object.freeze(structuredClone(o.configs[ext.name] ?? {})),
      logger: logger("extension", ext.name),
      embed: o.embed,
    });
    if (ext.setup) {
      const setup = ext.setup;
      const out = await guarded(() => setup.call(ext, ctx), o.hookBudgetMs);
      if (out.kind !== "ok") {
        refuse(
          source,
          ext.name,
          out.kind === "timeout"
            ? `setup took longer than ${o.hookBudgetMs} ms`
            : `setup failed: ${errorText(out.error)}`,
        );
        continue;
      }
    }
    running.push({ ext, source, ctx });
    log.info("extension {name} loaded from {source}", { name: ext.name, source });
  }
  return new ExtensionHost(running, refused, o);
}
