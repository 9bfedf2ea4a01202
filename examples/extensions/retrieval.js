// @ts-check
/**
 * Example extension: retrieval-augmented chat. At start it embeds a small set of documents with the cluster's
 * embedding model (ctx.embed, served in-process); for each chat it embeds the last user message, picks the
 * closest documents by cosine similarity and gives them to the model as a system message. Config:
 *
 *   extensions:
 *     config:
 *       retrieval:
 *         model: nomic-ai/nomic-embed-text-v1.5-GGUF   # any placed embedding model
 *         documents: ["Skulk nodes gossip telemetry every 2 s.", "..."]
 *         top: 2
 *
 * The embedding model may not be placed yet when the node starts: documents are embedded on first use, and a
 * chat that cannot be embedded in time goes on without context (Skulk logs and counts the error or timeout).
 */

/** @type {Promise<{ text: string, vector: number[] }[]> | null} */
let index = null;

/** @param {number[]} a @param {number[]} b */
function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}

/** @param {unknown} content */
function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p.text === "string" ? p.text : "")).join("");
  }
  return "";
}

/** @type {import("../../src/extensions/api.ts").Extension} */
export default {
  name: "retrieval",
  apiVersion: 1,
  setup(ctx) {
    const docs = ctx.config.documents;
    if (typeof ctx.config.model !== "string" || !Array.isArray(docs) || docs.length === 0) {
      throw new Error("set extensions.config.retrieval.model and a non-empty documents list");
    }
  },
  async onChatRequest(req, ctx) {
    const model = /** @type {string} */ (ctx.config.model);
    const docs = /** @type {string[]} */ (ctx.config.documents);
    const top = typeof ctx.config.top === "number" ? ctx.config.top : 2;
    const question = textOf([...req.messages].reverse().find((m) => m.role === "user")?.content);
    if (!question) return undefined;
    // Built once, shared by concurrent requests; a failed build is retried by the next request.
    index ??= ctx.embed(model, docs).then((vectors) => docs.map((text, i) => ({ text, vector: vectors[i] })));
    index.catch(() => (index = null));
    const [docsIndex, [q]] = await Promise.all([index, ctx.embed(model, question)]);
    const best = docsIndex
      .map((d) => ({ text: d.text, score: cosine(q, d.vector) }))
      .sort((a, b) => b.score - a.score)
      .slice(0, top);
    ctx.logger.debug("retrieved {n} documents for request {id}", { n: best.length, id: ctx.chat.requestId });
    const context = best.map((d) => `- ${d.text}`).join("\n");
    return {
      ...req,
      messages: [{ role: "system", content: `Use this context if it helps:\n${context}` }, ...req.messages],
    };
  },
};
