/**
 * The name a user sees for a placed instance: which engine runs it and on how many nodes ("llama.cpp on
 * one node", "llama.cpp RPC pool of 3 nodes"). Pure; the upstream wire tags stay on the wire only.
 */
import type { Instance } from "../cluster/instances.ts";
import { tagOf, untag } from "../cluster/tagged.ts";
import { parseCard } from "../models/card.ts";
import { type EngineKind, engineKindFor } from "./kind.ts";

/** Engines by the name their projects use. */
export const ENGINE_NAME: Record<EngineKind, string> = {
  "llama-server": "llama.cpp",
  "whisper-server": "whisper.cpp",
  "espeak-ng": "espeak-ng",
  "sherpa-onnx": "sherpa-onnx",
};

/** The engine an instance's card runs on, or null when its card names none this build can serve. */
export function instanceEngine(instance: Instance): EngineKind | null {
  const shard = Object.values(untag(instance).shardAssignments.runnerToShard)[0];
  if (!shard) return null;
  try {
    const kind = engineKindFor(parseCard(untag(shard).modelCard));
    return "kind" in kind ? kind.kind : null;
  } catch {
    return null; // a card this build cannot read
  }
}

export function instanceName(instance: Instance): string {
  const nodes = Object.keys(untag(instance).shardAssignments.nodeToRunner).length;
  const kind = instanceEngine(instance);
  const engine = kind ? ENGINE_NAME[kind] : "no engine of this build";
  if (tagOf(instance) === "LlamaRpcInstance") return `${engine} RPC pool of ${nodes} nodes`;
  if (nodes <= 1) return `${engine} on one node`;
  return `${engine} split across ${nodes} nodes`;
}

/** A placement kind (`instance_meta` of a preview) in words, for an option that has no instance to name. */
export function placementKindName(meta: string): string {
  switch (meta) {
    case "LlamaRpc":
      return "an RPC pool (one llama.cpp driver, the other nodes lending memory)";
    case "MlxRing":
      return "one engine per node, layers split in a pipeline";
    case "MlxJaccl":
      return "a tensor-parallel group (Macs with MLX only)";
    default:
      return "an unknown kind of instance";
  }
}
