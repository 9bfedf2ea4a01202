/**
 * Whether this cluster can run a catalogue model: the runner and backend tags `/models` says serve it (the
 * capability table) against the backends each reachable node advertises in `/state`. Pure; no DOM here.
 */
import { computesOf, nodeComputes, resolveNodeBackend } from "../../placement/capabilities.ts";
import type { ClusterStateWire, ModelListEntry } from "./api.ts";
import { isTimedOut, nodeIds, nodeName } from "./nodes.ts";

export type Runnable =
  | { ok: true }
  /** `runner`: no runner of this build serves the card (MLX, image generation...); else no node offers it. */
  | { ok: false; runner: boolean; reason: string };

/** The nodes that count: reported and not timed out. */
function liveNodes(s: ClusterStateWire): string[] {
  return nodeIds(s).filter((id) => !isTimedOut(s, id));
}

/** True when every live node runs Linux (its `osVersion` is `linux …`): MLX cards can never run there. */
export function linuxOnly(s: ClusterStateWire): boolean {
  const ids = liveNodes(s);
  return ids.length > 0 && ids.every((id) => s.nodeIdentities[id]?.osVersion.startsWith("linux") === true);
}

export function runnableHere(m: ModelListEntry, s: ClusterStateWire): Runnable {
  const serving = m.serving;
  if (!serving.ok) return { ok: false, runner: true, reason: serving.reason };
  const ids = liveNodes(s);
  if (ids.length === 0) return { ok: false, runner: false, reason: "no node has reported yet" };
  const why: string[] = [];
  for (const id of ids) {
    const backends = s.nodeEngines[id]?.backends;
    if (serving.node_tag !== null && !(backends ?? []).includes(serving.node_tag)) {
      why.push(`${nodeName(s, id)} has no ${serving.runner} engine`);
      continue;
    }
    const computes = nodeComputes(backends);
    if (resolveNodeBackend(serving.backends, serving.backend_preference, computes) !== null) {
      return { ok: true };
    }
    why.push(`${nodeName(s, id)} offers ${computes.join("/")}`);
  }
  return {
    ok: false,
    runner: false,
    reason: `needs ${serving.runner} on ${computesOf(serving.backends).join("/")}; ${why.join("; ")}`,
  };
}
