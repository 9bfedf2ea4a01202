/**
 * `skulk models add --path FILE` and `skulk models remove ID`: register or drop a local GGUF card. With a
 * daemon on the data dir they go through its API (so the running node sees them); without one, SQLite directly.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import { Catalog } from "../models/catalog.ts";
import { deleteCustomCard, localCard, LocalModelError, saveCustomCard } from "../models/local.ts";
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

export function registerModelsAdd(models: Command): void {
  models.command("add")
    .description("register a local GGUF file as a custom model card (facts read from its header)")
    .requiredOption("--path <file>", "the GGUF file")
    .option("--id <model_id>", "model id (default local/<file name>)")
    .option(
      "--draft <file>",
      "a smaller GGUF beside it, with the same vocabulary, that drafts for speculative decoding",
    )
    .option("--data-dir <dir>", "the node's data dir (env SKULK_DATA_DIR)")
    .option("--url <url>", "a node's API URL (default: the daemon on the data dir, if one runs)")
    .option("--config <file>", "skulk.yaml to read")
    .option("--json", "print the added model as JSON")
    .action(async (flags) => {
      const path = resolve(flags.path);
      const draft = flags.draft ? resolve(flags.draft) : undefined;
      const t = target(flags);
      if (t.url) {
        const entry = await getJson<{ id: string; storage_size_megabytes: number }>(`${t.url}/models/add`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            gguf_path: path,
            ...(flags.id ? { model_id: flags.id } : {}),
            ...(draft ? { draft_path: draft } : {}),
          }),
        });
        console.log(flags.json ? JSON.stringify(entry) : `added ${entry.id} on the node at ${t.url}`);
        return;
      }
      const card = await localCard(path, flags.id, draft).catch((e) => {
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
