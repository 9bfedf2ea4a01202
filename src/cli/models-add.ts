/**
 * `skulk models add <hub id> | --path FILE`, `skulk models search <query>` and `skulk models remove ID`. With a
 * daemon on the data dir they go through its API (so the running node sees them); without one, the hub and SQLite directly.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import { loadConfig } from "../config/load.ts";
import { Catalog } from "../models/catalog.ts";
import { type ModelCard } from "../models/card.ts";
import { hubCard, HubCardError, QuantNotFound } from "../models/hub-card.ts";
import { HubClient, HubError, type HubModel, hubOptions } from "../models/hub.ts";
import { deleteCustomCard, localCard, LocalModelError, saveCustomCard } from "../models/local.ts";
import { modelIdProblem, quoted } from "../security/ids.ts";
import { acquireLock, liveOwner } from "../node/lock.ts";
import { openStore } from "../store/db.ts";
import { CliError, formatBytes, getJson, nodeUrl, resolveDataDir } from "./common.ts";

interface Target {
  url?: string;
  dataDir: string;
}

/** The running node's URL when --url is given or a daemon holds the data dir; otherwise the data dir itself. */
function target(flags: { url?: string; dataDir?: string; config?: string }): Target {
  const dataDir = resolveDataDir(flags);
  if (flags.url || liveOwner(dataDir)) return { url: nodeUrl(flags), dataDir };
  return { dataDir };
}

/** Runs `fn` on the data dir's store while holding its lock, so no daemon starts halfway through. */
async function withStore<T>(
  dataDir: string,
  fn: (db: Awaited<ReturnType<typeof openStore>>["db"]) => Promise<T>,
): Promise<T> {
  const lock = acquireLock(dataDir, "127.0.0.1", 0);
  try {
    const store = await openStore(dataDir);
    try {
      return await fn(store.db);
    } finally {
      store.close();
    }
  } finally {
    lock.release();
  }
}

/** The hub as this CLI's config names it, refusing in offline mode as a node does. */
function hubOf(flags: { dataDir?: string; config?: string }): HubClient {
  const { config } = loadConfig({ dataDir: flags.dataDir, config: flags.config });
  const options = hubOptions(config);
  if (config.offline) {
    throw new CliError(
      `offline mode (SKULK_OFFLINE) is set, so the model hub at ${options.endpoint} is not contacted`,
    );
  }
  return new HubClient(options);
}

/** A hub or card failure as a CLI error: the message already names the repo and the hub's answer. */
function hubCliError(e: unknown): unknown {
  if (e instanceof HubError || e instanceof HubCardError) return new CliError(e.message);
  if (e instanceof QuantNotFound) return new CliError(e.message, 2);
  return e;
}

/** Hub calls may read a header in several ranges: longer than getJson's default wait. */
const HUB_CALL_MS = 120_000;

function sizeText(bytes: number | null | undefined): string {
  return bytes ? formatBytes(bytes) : "size unknown";
}

async function addFromHub(
  modelId: string,
  flags: { quant?: string; json?: boolean; url?: string; dataDir?: string; config?: string },
): Promise<void> {
  const problem = modelIdProblem(modelId);
  if (problem) throw new CliError(`model id ${quoted(modelId)} ${problem}`, 2);
  const t = target(flags);
  if (t.url) {
    const entry = await getJson<
      {
        id: string;
        storage_size_bytes: number | null;
        quantization: string;
        gguf_file: string | null;
        mmproj_file: string | null;
        servable: { ok: boolean; reason: string | null };
      }
    >(`${t.url}/models/add`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_id: modelId, ...(flags.quant ? { quant: flags.quant } : {}) }),
      signal: AbortSignal.timeout(HUB_CALL_MS),
    });
    if (flags.json) return console.log(JSON.stringify(entry));
    console.log(
      `added ${entry.id} (${sizeText(entry.storage_size_bytes)}, ${entry.quantization || "unknown type"}${
        entry.gguf_file ? `, ${entry.gguf_file}` : ""
      }${entry.mmproj_file ? ` + ${entry.mmproj_file}` : ""}) on the node at ${t.url}`,
    );
    if (!entry.servable.ok) console.log(`note: ${entry.servable.reason}`);
    return;
  }
  const report = await hubCard(hubOf(flags), modelId, flags.quant).catch((e) => {
    throw hubCliError(e);
  });
  const card: ModelCard = report.card;
  if (Catalog.bundled().get(card.model_id)) {
    throw new CliError(`'${card.model_id}' is a bundled card already; no need to add it`, 2);
  }
  await withStore(t.dataDir, (db) => saveCustomCard(db, card, "hub"));
  if (flags.json) return console.log(JSON.stringify(card));
  console.log(
    `added ${card.model_id} (${sizeText(card.storage_size?.in_bytes)}, ${
      card.quantization || "unknown type"
    }${
      card.gguf_file ? `, ${card.gguf_file}` : ""
    }) to ${t.dataDir}; no node runs there, it is listed when one starts`,
  );
}

async function search(query: string, flags: { limit: string; mlxOnly?: boolean; json?: boolean } & Target) {
  const limit = Number(flags.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new CliError("--limit must be 1 to 100", 2);
  let found: HubModel[];
  if (flags.url) {
    const q = new URLSearchParams({ query, limit: String(limit), mlx_only: String(Boolean(flags.mlxOnly)) });
    found = await getJson<HubModel[]>(`${flags.url}/models/search?${q}`, {
      signal: AbortSignal.timeout(HUB_CALL_MS),
    });
  } else {
    found = await hubOf(flags).search({ query, limit, mlxOnly: Boolean(flags.mlxOnly) }).catch((e) => {
      throw hubCliError(e);
    });
  }
  if (flags.json) return console.log(JSON.stringify(found));
  if (found.length === 0) return console.log(`no hub model matches ${quoted(query)}`);
  for (const m of found) {
    console.log(
      `${m.id.padEnd(56)} ${String(m.downloads).padStart(10)} downloads ${
        String(m.likes).padStart(6)
      } likes` +
        `${m.tags.includes("gguf") ? "  gguf" : ""}`,
    );
  }
}

export function registerModelsAdd(models: Command): void {
  models.command("search <query>")
    .description("search the model hub (HF_ENDPOINT) for models, most downloaded first")
    .option("--limit <n>", "how many (1-100)", "20")
    .option("--mlx-only", "only mlx-community repos")
    .option("--data-dir <dir>", "the node's data dir (env SKULK_DATA_DIR)")
    .option("--url <url>", "a node's API URL (default: the daemon on the data dir, if one runs)")
    .option("--config <file>", "skulk.yaml to read")
    .option("--json", "print the results as JSON")
    .action(async (query: string, flags) => {
      await search(query, { ...flags, ...target(flags) });
    });

  models.command("add [model_id]")
    .description(
      "add a hub repo by id as a custom model card (GGUF: quantisation, shards and header read from the hub; " +
        "MLX: config.json), or register a local GGUF file with --path",
    )
    .option(
      "--quant <name>",
      "the GGUF quantisation to take (default: Q4_K_M, then the documented preference)",
    )
    .option("--path <file>", "a local GGUF file instead of a hub repo")
    .option("--id <model_id>", "with --path: model id (default local/<file name>)")
    .option(
      "--draft <file>",
      "with --path: a smaller GGUF beside it, with the same vocabulary, that drafts for speculative decoding",
    )
    .option("--data-dir <dir>", "the node's data dir (env SKULK_DATA_DIR)")
    .option("--url <url>", "a node's API URL (default: the daemon on the data dir, if one runs)")
    .option("--config <file>", "skulk.yaml to read")
    .option("--json", "print the added model as JSON")
    .action(async (modelId: string | undefined, flags) => {
      if (!flags.path) {
        if (!modelId) throw new CliError("give a hub model id (org/name) or --path FILE", 2);
        return await addFromHub(modelId, flags);
      }
      const path = resolve(flags.path);
      const draft = flags.draft ? resolve(flags.draft) : undefined;
      const t = target(flags);
      const id: string | undefined = flags.id ?? modelId;
      if (t.url) {
        const entry = await getJson<{ id: string; storage_size_megabytes: number }>(`${t.url}/models/add`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            gguf_path: path,
            ...(id ? { model_id: id } : {}),
            ...(draft ? { draft_path: draft } : {}),
          }),
        });
        console.log(flags.json ? JSON.stringify(entry) : `added ${entry.id} on the node at ${t.url}`);
        return;
      }
      const card = await localCard(path, id, draft).catch((e) => {
        throw e instanceof LocalModelError ? new CliError(e.message, 2) : e;
      });
      if (Catalog.bundled().get(card.model_id)) {
        throw new CliError(`'${card.model_id}' is a bundled card; choose another --id`, 2);
      }
      await withStore(t.dataDir, (db) => saveCustomCard(db, card, "local"));
      if (flags.json) console.log(JSON.stringify(card));
      else {
        console.log(
          `added ${card.model_id} (${
            formatBytes(card.storage_size?.in_bytes ?? 0)
          }, ${card.family}, ${card.n_layers} layers, ` +
            `${
              card.quantization || "unknown type"
            }) to ${t.dataDir}; no node runs there, it is listed when one starts`,
        );
      }
    });

  models.command("remove <model_id>")
    .description("delete a custom model card")
    .option("--data-dir <dir>", "the node's data dir (env SKULK_DATA_DIR)")
    .option("--url <url>", "a node's API URL (default: the daemon on the data dir, if one runs)")
    .option("--config <file>", "skulk.yaml to read")
    .action(async (modelId: string, flags) => {
      const t = target(flags);
      if (t.url) {
        await getJson(`${t.url}/models/custom/${modelId}`, { method: "DELETE" });
        console.log(`removed ${modelId} on the node at ${t.url}`);
        return;
      }
      const gone = await withStore(t.dataDir, (db) => deleteCustomCard(db, modelId));
      if (!gone) throw new CliError(`no custom card '${modelId}' in ${t.dataDir}`);
      console.log(`removed ${modelId} from ${t.dataDir}`);
    });
}
