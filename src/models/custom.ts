/**
 * Keeps a node's custom cards in step with the event log: each applied CustomModelCardAdded/Deleted is
 * written to SQLite `custom_cards` and to the in-memory catalogue, on every node that applies it.
 */
import type { EventLog } from "../cluster/log.ts";
import { logger } from "../log/mod.ts";
import type { Db } from "../store/db.ts";
import { type ModelCard, parseCard } from "./card.ts";
import type { Catalog } from "./catalog.ts";
import { deleteCustomCard, loadCustomCards, saveCustomCard } from "./local.ts";

const log = logger("models");

/** Loads the stored custom cards into the catalogue (at start); bad rows are logged, not fatal. */
export async function loadCustomCardsInto(db: Db, catalog: Catalog): Promise<number> {
  const { cards, errors } = await loadCustomCards(db);
  for (const e of errors) {
    log.warn("custom card {modelId} in SQLite is not a valid card, skipped: {message}", { ...e });
  }
  let added = 0;
  for (const card of cards) {
    // Bundled cards win over custom ones with the same id, as upstream's first-writer-wins cache fill.
    if (catalog.get(card.model_id) && !catalog.get(card.model_id)!.is_custom) continue;
    catalog.add(card);
    added++;
  }
  return added;
}

export function followCustomCardEvents(events: EventLog, db: Db, catalog: Catalog): void {
  events.onApplied(async ({ event }) => {
    if ("CustomModelCardAdded" in event) {
      let card: ModelCard;
      try {
        card = { ...parseCard(event.CustomModelCardAdded.modelCard), is_custom: true };
      } catch (e) {
        // A peer's card this build cannot read: the cluster goes on; this node just does not list it.
        log.warn("ignoring a custom card this node cannot read: {error}", { error: (e as Error).message });
        return;
      }
      const existing = catalog.get(card.model_id);
      if (existing && !existing.is_custom) {
        log.warn("ignoring custom card {modelId}: a bundled card has that id", { modelId: card.model_id });
        return;
      }
      // In the catalogue before the write: an InstanceCreated applied right after this event is checked
      // against it by the worker (placement/shard-check.ts) in the same tick.
      catalog.add(card);
      await saveCustomCard(db, card, card.gguf_path ? "local" : "hub");
    } else if ("CustomModelCardDeleted" in event) {
      const { modelId } = event.CustomModelCardDeleted;
      await deleteCustomCard(db, modelId);
      if (catalog.get(modelId)?.is_custom) catalog.remove(modelId);
    }
  });
}
