/** The model catalogue: `GET /models` and `GET /v1/models` (upstream's ModelList). */
import { Hono } from "hono";
import { z } from "zod";
import { downloadModelId } from "../../cluster/downloads.ts";
import { isImageCard, modelListEntry } from "../../models/catalog.ts";
import { applyResolvedFacts, loadAllResolvedFacts } from "../../models/facts.ts";
import type { ApiEnv } from "../env.ts";
import { badRequest } from "../errors.ts";
import { describe } from "../openapi.ts";

for (const path of ["/models", "/v1/models"]) {
  describe({
    method: "get",
    path,
    summary: "Model catalogue (bundled and custom cards)",
    tag: "models",
    query: { status: "'downloaded' to list only downloaded models" },
  });
}

const Query = z.object({ status: z.enum(["downloaded"]).optional() });

export const modelRoutes = new Hono<ApiEnv>();
for (const path of ["/models", "/v1/models"]) {
  modelRoutes.get(path, async (c) => {
    const q = Query.safeParse(c.req.query());
    if (!q.success) throw badRequest("status must be 'downloaded' when given", "status");
    const n = c.var.node;
    const showImages = n.config.enableImageModels;
    let cards = n.catalog.all().filter((card) => showImages || !isImageCard(card));
    if (q.data.status === "downloaded") {
      const done = new Set(
        Object.values(n.log.state.downloads).flat().filter((p) => "DownloadCompleted" in p).map(
          downloadModelId,
        ),
      );
      cards = cards.filter((card) => done.has(card.model_id) || card.gguf_path !== undefined);
    }
    // A size resolved once (placement preview) is listed from then on; one still open is listed as null.
    const facts = await loadAllResolvedFacts(n.store.db);
    return c.json({
      object: "list",
      data: cards.map((card) => modelListEntry(applyResolvedFacts(card, facts.get(card.model_id)))),
    });
  });
}
