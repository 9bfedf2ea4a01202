// @ts-check
/**
 * Example extension: appends one JSON line per chat to a file once its answer is complete: when, which API,
 * the model, the last user message, the answer's text, stop reason and token counts. Config:
 *
 *   extensions:
 *     config:
 *       request-log: { path: /var/log/skulk/chats.jsonl }
 */

/** @type {string} */
let path = "";

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
  name: "request-log",
  apiVersion: 1,
  async setup(ctx) {
    if (typeof ctx.config.path !== "string" || ctx.config.path === "") {
      throw new Error("set extensions.config.request-log.path to the JSON-lines file to write");
    }
    path = ctx.config.path;
    // Fails here, at start, when the file cannot be written, rather than silently at each request.
    await Deno.writeTextFile(path, "", { append: true });
  },
  async onChatResponse(req, res, ctx) {
    const lastUser = [...req.messages].reverse().find((m) => m.role === "user");
    const line = {
      at: new Date().toISOString(),
      node: ctx.nodeId,
      request_id: ctx.chat.requestId,
      api: res.api,
      stream: res.stream,
      model: req.model,
      max_tokens: req.max_tokens ?? null,
      prompt: textOf(lastUser?.content),
      status: res.status,
      text: res.text,
      finish_reason: res.finishReason,
      usage: res.usage,
      error: res.error,
    };
    await Deno.writeTextFile(path, JSON.stringify(line) + "\n", { append: true });
  },
};
