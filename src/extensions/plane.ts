/**
 * The extensions plane: loads the extensions the settings name when the node starts (so `ctx.extensions` serves
 * the chat routes), gives them `ctx.embed` through the node's own API in-process, and tears them down at stop.
 */
import { z } from "zod";
import type { NodeContext } from "../node/context.ts";
import type { Plane } from "../node/plane.ts";
import { EXTENSION_API_VERSION, type ExtensionContext, type ExtensionsStatus } from "./api.ts";
import type { ExtensionHost } from "./host.ts";
import { loadExtensions } from "./load.ts";

const EmbeddingsReply = z.object({
  data: z.array(z.object({ index: z.number().int(), embedding: z.array(z.number()) })),
});

/**
 * `ctx.embed` for extensions: a `POST /v1/embeddings` answered by this node's own app in-process (Hono's
 * `app.fetch`, no socket), so it takes exactly the route's path: a local engine or the node that drives the
 * model. The node's own API key goes with it when one is set; it never leaves the process.
 */
export function embedThrough(
  handle: () => ((req: Request) => Promise<Response>) | undefined,
  apiKey: () => string | null,
): ExtensionContext["embed"] {
  return async (model, inputs) => {
    const input = typeof inputs === "string" ? [inputs] : [...inputs];
    const fetcher = handle();
    if (!fetcher) throw new Error("this node's API is not serving yet");
    const headers: Record<string, string> = { "content-type": "application/json" };
    const key = apiKey();
    if (key) headers.authorization = `Bearer ${key}`;
    const res = await fetcher(
      new Request("http://skulk.internal/v1/embeddings", {
        method: "POST",
        headers,
        body: JSON.stringify({ model, input }),
      }),
    );
    const body = await res.json().catch(() => null) as { error?: { message?: string } } | null;
    if (!res.ok) throw new Error(body?.error?.message ?? `embeddings of ${model} failed (${res.status})`);
    const parsed = EmbeddingsReply.safeParse(body);
    if (!parsed.success) throw new Error(`embeddings of ${model}: the reply has no vectors`);
    return [...parsed.data.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
  };
}

export class ExtensionsPlane implements Plane<NodeContext> {
  readonly name = "extensions";
  #host?: ExtensionHost;

  async start(ctx: NodeContext): Promise<void> {
    const c = ctx.config;
    this.#host = await loadExtensions({
      specs: c.extensions,
      configs: c.extensionsConfig,
      enabled: !c.extensionsDisable,
      requestBudgetMs: c.extensionsRequestBudgetMs,
      hookBudgetMs: c.extensionsHookBudgetMs,
      nodeId: ctx.nodeId,
      embed: embedThrough(() => ctx.handle, () => ctx.config.apiKey),
    });
    ctx.extensions = this.#host;
  }

  async stop(): Promise<void> {
    await this.#host?.teardown();
  }
}

/** What `GET /v1/extensions` and the node's diagnostics show: loaded, refused and why, counts. */
export function extensionsStatus(ctx: NodeContext): ExtensionsStatus {
  return ctx.extensions?.status() ?? {
    apiVersion: EXTENSION_API_VERSION,
    enabled: !ctx.config.extensionsDisable,
    requestBudgetMs: ctx.config.extensionsRequestBudgetMs,
    loaded: [],
    refused: [],
  };
}
