/**
 * `GET /config` and `PUT /config`: the node's skulk.yaml at `ctx.configPath`, read and written whole.
 * A bad file is refused with 422 and upstream's envelope whose `param` names the first wrong key.
 */
import { Hono } from "hono";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { z } from "zod";
import {
  changesSettings,
  isObject,
  mergeWithFile,
  proposedConfig,
  redact,
  settingViews,
  validateConfigYaml,
  type YamlObject,
} from "../../config/edit.ts";
import type { ApiEnv } from "../env.ts";
import { ApiError, envelope, JsonBodyError, parseJsonBody } from "../errors.ts";
import { describe } from "../openapi.ts";

const ConfigView = z.object({
  config: z.record(z.string(), z.unknown()),
  configPath: z.string(),
  fileExists: z.boolean(),
  effective: z.object({ has_hf_token: z.boolean() }).loose(),
});
const PutResult = z.object({ success: z.literal(true), message: z.string(), requiresRestart: z.boolean() });

describe({
  method: "get",
  path: "/config",
  summary: "This node's skulk.yaml (hf_token left out) and its running settings",
  tag: "config",
  response: ConfigView,
});
describe({
  method: "put",
  path: "/config",
  summary: "Validate and write skulk.yaml (body: {config: {...}} or the object); 422 names the wrong key",
  tag: "config",
  body: z.union([z.object({ config: z.record(z.string(), z.unknown()) }), z.record(z.string(), z.unknown())]),
  response: PutResult,
});

async function readFile(path: string): Promise<{ yaml: YamlObject; exists: boolean }> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return { yaml: {}, exists: false };
    throw new ApiError(503, `${path} cannot be read: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text) ?? {};
  } catch (e) {
    throw new ApiError(
      503,
      `${path} is not valid YAML (${(e as Error).message.split("\n")[0]}); fix or remove it`,
    );
  }
  if (!isObject(parsed)) throw new ApiError(503, `${path} must be a mapping of sections; fix or remove it`);
  return { yaml: parsed, exists: true };
}

/** Writes beside the target and renames, so a reader never sees half a file. */
async function writeFile(path: string, yaml: YamlObject): Promise<void> {
  const tmp = `${path}.tmp-${crypto.randomUUID()}`;
  try {
    await Deno.writeTextFile(tmp, stringifyYaml(yaml));
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => undefined);
    throw new ApiError(503, `${path} cannot be written: ${(e as Error).message}`);
  }
}

export const configRoutes = new Hono<ApiEnv>()
  .get("/config", async (c) => {
    const n = c.var.node;
    const { yaml, exists } = await readFile(n.configPath);
    return c.json({
      config: redact(yaml),
      configPath: n.configPath,
      fileExists: exists,
      effective: {
        has_hf_token: typeof yaml.hf_token === "string" && yaml.hf_token !== "",
        settings: settingViews(n.config),
      },
    });
  })
  .put("/config", async (c) => {
    const n = c.var.node;
    let body: unknown;
    try {
      body = parseJsonBody(await c.req.text());
    } catch (e) {
      const why = e instanceof JsonBodyError
        ? e.message
        : `request body is not valid JSON: ${(e as Error).message}`;
      throw new ApiError(422, why);
    }
    const proposed = proposedConfig(body);
    if (!proposed) throw new ApiError(422, 'send the config as a JSON object, or as {"config": {...}}');
    const { yaml: onDisk } = await readFile(n.configPath);
    const next = mergeWithFile(proposed, onDisk);
    const problems = validateConfigYaml(next, n.configPath);
    if (problems.length > 0) {
      const env = envelope(422, problems.map((p) => p.message).join("; "), {
        param: problems[0].param,
        type: "invalid_request_error",
      });
      return c.json({ ...env, problems }, 422);
    }
    await writeFile(n.configPath, next);
    const requiresRestart = changesSettings(onDisk, next, n.configPath);
    return c.json({
      success: true as const,
      message: requiresRestart ? `saved ${n.configPath}; restart the node to apply` : `saved ${n.configPath}`,
      requiresRestart,
    });
  });
