// @ts-check
/**
 * Example extension: puts a system prompt in front of every chat (or in place of the client's own, when
 * `replace` is set). Config, in skulk.yaml:
 *
 *   extensions:
 *     modules: [/path/to/system-prompt.js]
 *     config:
 *       system-prompt: { prompt: "Answer in French.", replace: false }
 */

/** @type {import("../../src/extensions/api.ts").Extension} */
export default {
  name: "system-prompt",
  apiVersion: 1,
  setup(ctx) {
    if (typeof ctx.config.prompt !== "string" || ctx.config.prompt === "") {
      throw new Error("set extensions.config.system-prompt.prompt to the system prompt to add");
    }
  },
  onChatRequest(req, ctx) {
    const prompt = /** @type {string} */ (ctx.config.prompt);
    const rest = ctx.config.replace ? req.messages.filter((m) => m.role !== "system") : req.messages;
    return { ...req, messages: [{ role: "system", content: prompt }, ...rest] };
  },
};
