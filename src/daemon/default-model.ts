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

  constructor(private readonly spec: string) {}

  start(ctx: NodeContext): void {
    this.#task = this.#run(ctx).catch((e) => {
      log.error("could not place the default model {spec}: {error}", {
        spec: this.spec,
        error: (e as Error).message,
      });
    });
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#task;
  }

  async #run(ctx: NodeContext): Promise<void> {
    let modelId = this.spec;
    if (this.spec.endsWith(".gguf") || await isFile(this.spec)) {
      const path = this.spec.startsWith("/") ? this.spec : `${Deno.cwd()}/${this.spec}`;
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
