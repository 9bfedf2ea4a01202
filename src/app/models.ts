/**
 * Custom card use cases: add a card for a local GGUF (read on the node that was asked, where the file is) or a hub
 * repo (read from the hub by the node that was asked, with its token), delete one; the master checks and indexes.
 */
import { makeEvent } from "../cluster/events.ts";
import { untag } from "../cluster/tagged.ts";
import { cardToWire, parseCard } from "../models/card.ts";
import { modelListEntry } from "../models/catalog.ts";
import { type ModelCard } from "../models/card.ts";
import { HubCardError, type HubCardReport, QuantNotFound } from "../models/hub-card.ts";
import { localCard, LocalModelError } from "../models/local.ts";
import { servability } from "../placement/capabilities.ts";
import { type CommandResult, send } from "./commands.ts";
import { Conflict, Invalid, NotFound, NotReady } from "./errors.ts";
import type { DecidePorts, NodePorts } from "./ports.ts";

/** Master: a custom card may not shadow a bundled one. */
export async function decideAddCard(p: DecidePorts, wire: { modelId: string }): Promise<CommandResult> {
  let modelId: string;
  try {
    modelId = parseCard(wire).model_id;
  } catch (e) {
    throw new Invalid(`not a valid model card: ${(e as Error).message}`, "model_card");
  }
  const existing = p.card(modelId);
  if (existing && !existing.is_custom) {
    throw new Conflict(`'${modelId}' is a bundled card; choose another model_id`, "model_id");
  }
  const event = makeEvent("CustomModelCardAdded", { modelCard: wire });
  const { idx } = await p.index(event);
  return { idx, event_id: untag(event).eventId, model_id: modelId };
}

export async function decideDeleteCard(p: DecidePorts, modelId: string): Promise<CommandResult> {
  const card = p.card(modelId);
  if (!card?.is_custom) {
    throw new NotFound(
      card ? `'${modelId}' is a bundled card, not a custom one` : `no custom card '${modelId}'`,
    );
  }
  const event = makeEvent("CustomModelCardDeleted", { modelId });
  const { idx } = await p.index(event);
  return { idx, event_id: untag(event).eventId, model_id: modelId };
}

/** Registers a local GGUF as a custom card; answers with the catalogue entry this node then lists. */
export async function addModel(p: NodePorts, ggufPath: string, modelId?: string, draftPath?: string) {
  const card = await localCard(ggufPath, modelId, draftPath).catch((e) => {
    throw e instanceof LocalModelError
      ? new Invalid(e.message, e.message.includes("draft_path") ? "draft_path" : "gguf_path")
      : e;
  });
  return await addCard(p, card);
}

/** Replicates a built card through the master and answers with the catalogue entry this node then lists. */
async function addCard(p: NodePorts, card: ModelCard) {
  await send(p.route, { kind: "add_card", model_card: cardToWire(card) });
  const added = p.card(card.model_id);
  // Applied here already (send waited), so only a delete racing this add leaves it out.
  if (!added) throw new NotReady(`the card for '${card.model_id}' was deleted again meanwhile`);
  return modelListEntry(added);
}

/**
 * Adds a hub repo as a custom card. `resolve` reads the hub (hub-card.ts); its HubErrors pass through for the
 * API to map (missing, refused, unreachable), the card problems become Invalid naming the repo.
 */
export async function addHubModel(
  p: NodePorts,
  resolve: (modelId: string, quant?: string) => Promise<HubCardReport>,
  modelId: string,
  quant?: string,
) {
  const report = await resolve(modelId, quant).catch((e) => {
    if (e instanceof QuantNotFound) throw new Invalid(e.message, "quant");
    if (e instanceof HubCardError) throw new Invalid(e.message, "model_id");
    throw e;
  });
  const entry = await addCard(p, report.card);
  const serves = servability(report.card);
  return {
    ...entry,
    gguf_file: report.card.gguf_file ?? null,
    mmproj_file: report.card.mmproj_file ?? null,
    available_quants: report.quants,
    header_bytes_read: report.header_bytes,
    /** Whether this build's runners can serve it, and why not (an MLX repo on Linux nodes). */
    servable: serves.ok ? { ok: true, reason: null } : { ok: false, reason: serves.reason },
  };
}

export async function deleteModel(p: NodePorts, modelId: string) {
  await send(p.route, { kind: "delete_card", model_id: modelId });
  return { message: "Model card deleted", model_id: modelId };
}
