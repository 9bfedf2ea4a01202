/**
 * `GET /config` and `PUT /config`: node-scope keys in the node's skulk.yaml at `ctx.configPath`, written
 * whole; cluster-scope keys as a `ClusterConfigChanged` event every node applies. 422 names a wrong key.
 */
import { Hono } from "hono";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { z } from "zod";
import { makeEvent } from "../../cluster/events.ts";
import {
  changesSettings,
  isObject,
  mergeWithFile,
  proposedConfig,
  redact,
  settingViews,
  splitByScope,
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
const PutResult = z.object({
  success: z.literal(true),
  message: z.string(),
  requiresRestart: z.boolean(),
  /** Ours: the cluster-scope keys the request set for every node (dotted key → value). */
  cluster: z.record(z.string(), z.unknown()),
});

/** How long a PUT waits for its own cluster event to be applied here, so what it answers is what GET reads. */
const APPLY_WAIT_MS = 10_000;

describe({
  method: "get",
  path: "/config",
  summary: "This node's skulk.yaml (hf_token left out), the cluster-wide settings and each setting's scope",
  tag: "config",
  response: ConfigView,
});
describe({
  method: "put",
  path: "/config",
  summary:
    "Validate, then write node-scope keys to this node's skulk.yaml and submit cluster-scope keys for every node; 422 names the wrong key",
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
        /** The cluster-scope values set for every node (dotted key → value), over each node's own. */
        cluster: n.log.state.clusterConfig ?? {},
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
    const { cluster, node } = splitByScope(proposed);
    // Checked whole (node and cluster keys together), so a wrong cluster key is named like any other.
    const problems = validateConfigYaml(mergeWithFile(proposed, onDisk), n.configPath);
    if (problems.length > 0) {
      const env = envelope(422, problems.map((p) => p.message).join("; "), {
        param: problems[0].param,
        type: "invalid_request_error",
      });
      return c.json({ ...env, problems }, 422);
    }
    const next = mergeWithFile(node, onDisk);
    await writeFile(n.configPath, next);
    const changed = Object.entries(cluster).filter(([k, v]) =>
      JSON.stringify(n.log.state.clusterConfig?.[k]) !== JSON.stringify(v)
    );
    if (changed.length > 0) {
      const settings = Object.fromEntries(changed);
      await n.submit(makeEvent("ClusterConfigChanged", { settings }));
      await appliedHere(() =>
        changed.every(([k, v]) => JSON.stringify(n.log.state.clusterConfig?.[k]) === JSON.stringify(v))
      );
    }
    // The default model is placed by a plane made at start; every other cluster key applies while running.
    const requiresRestart = changesSettings(onDisk, next, n.configPath) ||
      changed.some(([k]) => k === "inference.default_model");
    const what = [
      `saved ${n.configPath}`,
      ...changed.length ? [`set ${changed.map(([k]) => k).join(", ")} for every node`] : [],
    ]
      .join("; ");
    return c.json({
      success: true as const,
      message: requiresRestart ? `${what}; restart the node to apply` : what,
      requiresRestart,
      cluster: Object.fromEntries(changed),
    });
  });

/** Waits (bounded) until this node applied what it submitted (the master acknowledged, replication lags); also PUT /v1/tracing. */
export async function appliedHere(done: () => boolean, readBack = "GET /config"): Promise<void> {
  const deadline = Date.now() + APPLY_WAIT_MS;
  while (!done()) {
    if (Date.now() > deadline) {
      throw new ApiError(
        503,
        `the cluster accepted the change but this node has not applied it within ${
          APPLY_WAIT_MS / 1000
        } s; ${readBack} shortly`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
