/**
 * The default model (`--default-model`, `SKULK_DEFAULT_MODEL`, `inference.default_model`): a model id, or a
 * path to a local GGUF that is registered as a custom card first. Once this node is master and the model is
 * not placed, it is placed where the planner decides, so a fresh `make run` has something to chat with.
 */
import { makeEvent } from "../cluster/events.ts";
import { instanceBody } from "../cluster/instances.ts";
import { logger } from "../log/mod.ts";
import { cardToWire } from "../models/card.ts";
import { localCard } from "../models/local.ts";
import type { NodeContext } from "../node/context.ts";
import { currentView, placementCard } from "../api/routes/placement.ts";
import { createInstance } from "../api/routes/instances.ts";
import { placeInstance, placementRequest } from "../placement/planner.ts";
import type { Plane } from "./node.ts";

const log = logger("default-model");

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

export class DefaultModel implements Plane {
  readonly name = "default-model";
  #stopped = false;
  #task: Promise<void> | null = null;

  /** `spec` is read at start: the setting is cluster-wide, so the log may set it after the config loaded. */
  constructor(private readonly spec: () => string | null) {}

  start(ctx: NodeContext): void {
    const spec = this.spec();
    if (!spec) return;
    this.#task = this.#run(ctx, spec).catch((e) => {
      log.error("could not place the default model {spec}: {error}", {
        spec,
        error: (e as Error).message,
      });
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#task;
  }

  async #run(ctx: NodeContext, spec: string): Promise<void> {
    let modelId = spec;
    if (spec.endsWith(".gguf") || await isFile(spec)) {
      const path = spec.startsWith("/") ? spec : `${Deno.cwd()}/${spec}`;
      const card = await localCard(path);
      modelId = card.model_id;
      if (!ctx.catalog.get(modelId)) {
        await ctx.submit(makeEvent("CustomModelCardAdded", { modelCard: cardToWire(card) }));
      }
    }
    // Only the master places, and only once the cluster has settled on one (a joining node stays quiet).
    for (let attempt = 0; attempt < 60 && !this.#stopped; attempt++) {
      const placed = Object.values(ctx.log.state.instances).some((i) =>
        instanceBody(i).shardAssignments.modelId === modelId
      );
      if (placed) return;
      if (ctx.masterNodeId() === ctx.nodeId && ctx.catalog.get(modelId)) {
        const card = await placementCard(ctx, modelId);
        const r = placeInstance(currentView(ctx), card, placementRequest(modelId));
        if ("instance" in r) {
          await createInstance(ctx, r.instance);
          log.info("placed the default model {model}", { model: modelId });
          return;
        }
        if (!r.pending) throw new Error(r.error);
      }
      await new Promise((res) => setTimeout(res, 1000));
    }
  }
}
