/** `skulk models`: lists the model cards this program knows (bundled, plus custom ones from a node). */
import type { Command } from "commander";
import { type ModelCard, ModelCardSchema } from "../models/card.ts";
import { Catalog, isImageCard } from "../models/catalog.ts";
import { dbPath } from "../store/db.ts";
import { queryReadOnly } from "../store/readonly.ts";
import { formatBytes, resolveDataDir } from "./common.ts";

/** Custom cards of a data dir, read-only (the daemon may be running); none when it has no database yet. */
async function customCardsOf(dataDir: string): Promise<ModelCard[]> {
  try {
    const { rows } = await queryReadOnly(dbPath(dataDir), "SELECT card FROM custom_cards");
    return rows.flatMap((r) => {
      const parsed = ModelCardSchema.safeParse(JSON.parse(String(r.card)));
      return parsed.success ? [{ ...parsed.data, is_custom: true }] : [];
    });
  } catch {
    return [];
  }
}
import { registerLaunch } from "./launch.ts";
import { registerModelsAdd } from "./models-add.ts";
import { registerPull } from "./pull.ts";

export function registerModels(program: Command): Command {
  const models = program.command("models")
    .enablePositionalOptions()
    .description("list the model cards: bundled ones, and custom ones added on this data dir")
    .option("--json", "print the cards as JSON")
    .option("--all", "include image-generation cards")
    .option("--search <text>", "only cards whose id contains this text")
    .option(
      "--data-dir <dir>",
      "data dir whose custom cards to include (env SKULK_DATA_DIR, default ~/.skulk)",
    )
    .action(async (flags) => {
      const needle = (flags.search as string | undefined)?.toLowerCase();
      const catalog = Catalog.bundled();
      for (const c of await customCardsOf(resolveDataDir(flags))) {
        if (!catalog.get(c.model_id)) catalog.add(c);
      }
      const cards = catalog.all()
        .filter((c) => flags.all || !isImageCard(c))
        .filter((c) => !needle || c.model_id.toLowerCase().includes(needle))
        .sort((a, b) => a.model_id.localeCompare(b.model_id));
      if (flags.json) {
        console.log(JSON.stringify(cards, null, 2));
        return;
      }
      const w = Math.max(8, ...cards.map((c) => c.model_id.length + (c.is_custom ? 2 : 0)));
      console.log(`${"MODEL".padEnd(w)}  ${"SIZE".padStart(9)}  ${"QUANT".padEnd(8)}  TASKS`);
      for (const c of cards) {
        console.log(
          `${(c.model_id + (c.is_custom ? " *" : "")).padEnd(w)}  ${
            (c.storage_size ? formatBytes(c.storage_size.in_bytes) : "?").padStart(9)
          }  ${c.quantization.padEnd(8)}  ${c.tasks.join(",")}`,
        );
      }
      const custom = cards.filter((c) => c.is_custom).length;
      console.log(`(${cards.length} cards${custom ? `; * = custom, ${custom}` : ""})`);
    });
  registerModelsAdd(models);
  registerPull(models);
  registerLaunch(models);
  return models;
}
