/**
 * The default model (`--default-model`, `SKULK_DEFAULT_MODEL`, `inference.default_model`): a model id, or a
 * path to a local GGUF that is registered as a custom card first. Once this node is master and the model is
 * not placed, it is placed where the planner decides, so a fresh `make run` has something to chat with.
 */
import { send } from "../app/commands.ts";
import { DomainError, NoMaster, NoQuorum } from "../app/errors.ts";
import { placeModel } from "../app/instances.ts";
import { nodePorts } from "../app/ports.ts";
import { instanceBody } from "../cluster/instances.ts";
import { logger } from "../log/mod.ts";
import { cardToWire } from "../models/card.ts";
import { localCard } from "../models/local.ts";
import type { NodeContext } from "../node/context.ts";
import { placementRequest } from "../placement/planner.ts";
import type { Plane } from "../node/plane.ts";

const log = logger("default-model");

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

export class DefaultModel implements Plane<NodeContext> {
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
        await send(nodePorts(ctx).route, { kind: "add_card", model_card: cardToWire(card) });
      }
    }
    // Only the master places, and only once the cluster has settled on one (a joining node stays quiet).
    for (let attempt = 0; attempt < 60 && !this.#stopped; attempt++) {
      const placed = Object.values(ctx.log.state.instances).some((i) =>
        instanceBody(i).shardAssignments.modelId === modelId
      );
      if (placed) return;
      if (ctx.masterNodeId() === ctx.nodeId && ctx.catalog.get(modelId)) {
        // The same command as POST /place_instance, decided by this master's desk in turn with the others.
        const { model_id, sharding, instance_meta, min_nodes, excluded_nodes } = placementRequest(modelId);
        try {
          await placeModel(nodePorts(ctx), { model_id, sharding, instance_meta, min_nodes, excluded_nodes });
          log.info("placed the default model {model}", { model: modelId });
          return;
        } catch (e) {
          // Not now (no majority yet, telemetry still arriving): try again; a refusal with numbers is final.
          const retry = e instanceof NoMaster || e instanceof NoQuorum ||
            (e instanceof DomainError && (e.kind === "NotReady" || e.kind === "Busy"));
          if (!retry) throw e;
        }
      }
      await new Promise((res) => setTimeout(res, 1000));
    }
  }
}
