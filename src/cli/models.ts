/** `skulk models`: lists the model cards this program knows (bundled, plus custom ones from a node). */
import type { Command } from "commander";
import { Catalog, isImageCard } from "../models/catalog.ts";
import { formatBytes } from "./common.ts";
import { registerModelsAdd } from "./models-add.ts";
import { registerPull } from "./pull.ts";

export function registerModels(program: Command): Command {
  const models = program.command("models")
    .description("list the model cards (bundled with this program)")
    .option("--json", "print the cards as JSON")
    .option("--all", "include image-generation cards")
    .option("--search <text>", "only cards whose id contains this text")
    .action((flags) => {
      const needle = (flags.search as string | undefined)?.toLowerCase();
      const cards = Catalog.bundled().all()
        .filter((c) => flags.all || !isImageCard(c))
        .filter((c) => !needle || c.model_id.toLowerCase().includes(needle))
        .sort((a, b) => a.model_id.localeCompare(b.model_id));
      if (flags.json) {
        console.log(JSON.stringify(cards, null, 2));
        return;
      }
      const w = Math.max(8, ...cards.map((c) => c.model_id.length));
      console.log(`${"MODEL".padEnd(w)}  ${"SIZE".padStart(9)}  ${"QUANT".padEnd(8)}  TASKS`);
      for (const c of cards) {
        console.log(`${c.model_id.padEnd(w)}  ${(c.storage_size ? formatBytes(c.storage_size.in_bytes) : "?").padStart(9)}  ${c.quantization.padEnd(8)}  ${c.tasks.join(",")}`);
      }
      console.log(`(${cards.length} cards)`);
    });
  registerModelsAdd(models);
  registerPull(models);
  return models;
}
