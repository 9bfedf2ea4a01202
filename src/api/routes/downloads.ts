/**
 * Download routes in upstream's shape: `POST /download/start` and `DELETE /download/{node_id}/{model_id}` (sent
 * on to the node they name), and the `/store/*` routes served from this node's models dir (its own store).
 */
import { Hono } from "hono";
import { z } from "zod";
import { downloadModelId } from "../../cluster/downloads.ts";
import { ShardMetadataSchema } from "../../cluster/instances.ts";
import { scanModels } from "../../downloads/local.ts";
import type { DownloadManager } from "../../downloads/manager.ts";
import { fullShard } from "../../downloads/manager.ts";
import { summarize } from "../../downloads/progress.ts";
import { type ModelCard, parseCard } from "../../models/card.ts";
import type { NodeContext } from "../../node/context.ts";
import type { ApiEnv } from "../env.ts";
import { forwardRequest } from "../../serving/forward.ts";
import { ApiError, badRequest, describeZodError, notFound, readJsonWithRaw, unavailable } from "../errors.ts";
import { describe } from "../openapi.ts";
import { checkModelId, RepoPathSchema } from "../../security/ids.ts";

const StartBody = z.object({ targetNodeId: z.string().min(1), shardMetadata: ShardMetadataSchema });
const StoreDownloadBody = z.object({ gguf_file: RepoPathSchema.optional() }).strict();
const CommandResponse = z.object({ commandId: z.string() });
const StatusResponse = z.object({
  modelId: z.string(),
  status: z.enum(["pending", "downloading", "complete", "failed"]),
  progress: z.number(),
  error: z.string().nullable(),
});

describe({
  method: "post",
  path: "/download/start",
  summary: "Start downloading a shard's files on a node",
  tag: "downloads",
  body: StartBody,
  response: CommandResponse,
});
describe({
  method: "delete",
  path: "/download/:node_id/:model_id",
  summary: "Cancel a download and delete its files on a node",
  tag: "downloads",
  response: CommandResponse,
});
describe({
  method: "get",
  path: "/store/downloads",
  summary: "This node's downloads with status and progress",
  tag: "store",
});
describe({
  method: "get",
  path: "/store/registry",
  summary: "Models complete on this node's disk",
  tag: "store",
});
describe({
  method: "post",
  path: "/store/models/:model_id/download",
  summary: "Download a catalogue model to this node",
  tag: "store",
  body: StoreDownloadBody,
  response: StatusResponse,
});
describe({
  method: "get",
  path: "/store/models/:model_id/download/status",
  summary: "Status of one model's download on this node",
  tag: "store",
  response: StatusResponse,
});
describe({
  method: "delete",
  path: "/store/models/:model_id",
  summary: "Delete a model's files from this node",
  tag: "store",
});

function manager(n: NodeContext): DownloadManager {
  if (!n.downloads) throw unavailable("downloads are not running on this node yet; retry in a moment");
  return n.downloads;
}

/**
 * Commands name their target node: this node acts on its own id and sends the request on, unchanged, to any
 * other node of the cluster (once: a forwarded request is never forwarded again). Null means "act here".
 */
async function routeToNode(
  n: NodeContext,
  nodeId: string,
  req: Request,
  body: string,
): Promise<Response | null> {
  if (nodeId === n.nodeId) return null;
  if (n.telemetry.get(nodeId) === undefined) throw notFound(`no node ${nodeId} is known to this cluster`);
  const res = await forwardRequest(n, nodeId, req, body);
  if ("error" in res) throw new ApiError(503, res.error);
  return res;
}

function catalogCard(n: NodeContext, modelId: string): ModelCard {
  const card = n.catalog.get(modelId);
  if (!card) throw notFound(`model ${modelId} is not in the catalogue; see GET /models`);
  return card;
}

function recordOf(n: NodeContext, modelId: string) {
  return (n.log.state.downloads[n.nodeId] ?? []).find((p) => downloadModelId(p) === modelId);
}

/** Starts a download and waits only for its first record; its outcome is published as progress records. */
async function startInBackground(
  m: DownloadManager,
  card: ModelCard,
  shard = fullShard(card),
): Promise<void> {
  await m.begin(card, shard);
}

export const downloadRoutes = new Hono<ApiEnv>()
  .post("/download/start", async (c) => {
    const n = c.var.node;
    const { raw, body } = await readJsonWithRaw(c, StartBody);
    if ("RpcDonorShardMetadata" in body.shardMetadata) {
      throw badRequest(
        "an RPC donor lends memory and holds no model file; donors never download",
        "shardMetadata",
      );
    }
    const wire = (Object.values(body.shardMetadata)[0] as { modelCard: { modelId: string } }).modelCard;
    let card = n.catalog.get(wire.modelId);
    if (!card) {
      try {
        card = parseCard(wire);
      } catch (e) {
        throw badRequest(
          `shardMetadata.modelCard is not a valid model card: ${
            e instanceof z.ZodError ? describeZodError(e).message : (e as Error).message.split("\n")[0]
          }`,
          "shardMetadata",
        );
      }
      // A local file is registered on its own node (POST /models/add); a request cannot name one to "download".
      if (card.gguf_path !== undefined || card.mmproj_file?.startsWith("/")) {
        throw badRequest(
          `shardMetadata.modelCard.${
            card.gguf_path !== undefined ? "ggufPath" : "mmprojFile"
          } names a local file; register it with POST /models/add on its node`,
          "shardMetadata",
        );
      }
    }
    const remote = await routeToNode(n, body.targetNodeId, c.req.raw, raw);
    if (remote) return remote;
    await startInBackground(manager(n), card, body.shardMetadata);
    return c.json({ commandId: crypto.randomUUID() });
  })
  .delete("/download/:node_id/:model_id{.+}", async (c) => {
    const n = c.var.node;
    const modelId = checkModelId(c.req.param("model_id"));
    const remote = await routeToNode(n, c.req.param("node_id"), c.req.raw, "");
    if (remote) return remote;
    await manager(n).remove(modelId);
    return c.json({ commandId: crypto.randomUUID() });
  })
  .get("/store/downloads", (c) => {
    const n = c.var.node;
    const list = n.log.state.downloads[n.nodeId] ?? [];
    return c.json({ downloads: list.map((p) => summarize(p, downloadModelId(p))) });
  })
  .get("/store/registry", async (c) => {
    const entries = (await scanModels(manager(c.var.node).modelsDir))
      .filter(({ manifest }) => manifest.completedAt !== null)
      .map(({ dir, manifest }) => ({
        model_id: manifest.modelId,
        store_path: dir,
        files: manifest.files.map((f) => f.path),
        downloaded_at: manifest.completedAt,
        total_bytes: manifest.files.reduce((a, f) => a + f.size, 0),
        repo_has_projector: manifest.files.some((f) => /mmproj/i.test(f.path)),
      }));
    return c.json({ entries });
  })
  .post("/store/models/:model_id{.+}/download", async (c) => {
    const n = c.var.node;
    const modelId = checkModelId(c.req.param("model_id"));
    const text = (await c.req.text()).trim();
    let parsed: unknown = {};
    try {
      if (text) parsed = JSON.parse(text);
    } catch (e) {
      throw badRequest(`request body is not valid JSON: ${(e as Error).message}`);
    }
    const body = StoreDownloadBody.safeParse(parsed);
    if (!body.success) {
      const { message } = describeZodError(body.error);
      throw badRequest(`the body may only carry {"gguf_file": "<repo path>"} (${message})`, "gguf_file");
    }
    const card = {
      ...catalogCard(n, modelId),
      ...(body.data.gguf_file ? { gguf_file: body.data.gguf_file } : {}),
    };
    await startInBackground(manager(n), card);
    const rec = recordOf(n, modelId);
    const s = rec
      ? summarize(rec, modelId)
      : { modelId, status: "pending" as const, progress: 0, error: null };
    return c.json({ modelId, status: s.status, progress: s.progress });
  })
  .get("/store/models/:model_id{.+}/download/status", (c) => {
    const n = c.var.node;
    const modelId = checkModelId(c.req.param("model_id"));
    const rec = recordOf(n, modelId);
    if (!rec) {
      throw notFound(
        `no download of ${modelId} on this node; start one with POST /store/models/${modelId}/download`,
      );
    }
    return c.json(summarize(rec, modelId));
  })
  .delete("/store/models/:model_id{.+}", async (c) => {
    const modelId = checkModelId(c.req.param("model_id"));
    if (!(await manager(c.var.node).remove(modelId))) {
      throw notFound(`model ${modelId} has no files on this node`);
    }
    return c.json({ modelId, deleted: true });
  });
