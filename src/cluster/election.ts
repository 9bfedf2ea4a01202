/**
 * Master election as pure rules: which live claim to follow, when to claim a new session, in a
 * deterministic order. The plane feeds it fresh statuses from gossip; nothing here does I/O.
 */
import type { NodeStatus, Session } from "./gossip.ts";

export type Decision =
  | { kind: "lead"; session: Session }
  | { kind: "follow"; session: Session }
  | { kind: "wait" };

/** Negative when `a` ranks before `b`. */
type Order<T> = (a: T, b: T) => number;
const by = <T>(...keys: ((x: T) => number | string | boolean)[]): Order<T> => (a, b) => {
  for (const k of keys) {
    const [x, y] = [k(a), k(b)];
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
};

/** Candidates for a new session: force-master first, then the longest replica, then seniority, then node id. */
export const candidateOrder: Order<NodeStatus> = by(
  (s) => !s.forceMaster,
  (s) => -s.lastIdx,
  (s) => s.startedAt,
  (s) => s.nodeId,
);

/**
 * Among competing masters (formation, a healed partition, a whole-cluster restart): force-master, then
 * the one more nodes follow (a healed minority joins the majority and keeps its log), then the longer log
 * (no history is dropped when all restart), then the later session, then seniority, then node id.
 */
export function claimOrder(followers: (s: NodeStatus) => number): Order<NodeStatus> {
  return by(
    (s) => !s.forceMaster,
    (s) => -followers(s),
    (s) => -s.lastIdx,
    (s) => -(s.session?.clock ?? 0),
    (s) => s.startedAt,
    (s) => s.nodeId,
  );
}

export interface ElectionInput {
  self: NodeStatus;
  /** Statuses heard recently, including `self`. */
  fresh: NodeStatus[];
  /** The highest election clock this node has seen anywhere. */
  maxClock: number;
  /** How long this node has had no master (ms), 0 when it has one. */
  masterlessMs: number;
  /** After this long without a master a node claims even if it is not the best candidate. */
  patienceMs: number;
}

const isClaim = (s: NodeStatus) => s.session !== null && s.session.master === s.nodeId;

export function decide(i: ElectionInput): Decision {
  const claims = i.fresh.filter(isClaim);
  if (claims.length > 0) {
    const followers = (c: NodeStatus) =>
      i.fresh.filter((s) => s.session?.master === c.nodeId && s.session.clock === c.session!.clock).length;
    const best = [...claims].sort(claimOrder(followers))[0];
    return best.nodeId === i.self.nodeId
      ? { kind: "lead", session: best.session! }
      : { kind: "follow", session: best.session! };
  }
  const best = [...i.fresh].sort(candidateOrder)[0];
  if (best.nodeId === i.self.nodeId || i.masterlessMs >= i.patienceMs) {
    return { kind: "lead", session: { master: i.self.nodeId, clock: i.maxClock + 1 } };
  }
  return { kind: "wait" };
}
