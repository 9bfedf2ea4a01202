/**
 * Master election and commitment as pure rules: which live claim to follow, when to claim a new session,
 * whether a claim holds a majority of the voting nodes, and up to where the log is committed. No I/O here.
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

/** How many of `n` voters make a majority. */
export const majority = (n: number): number => Math.floor(n / 2) + 1;

/**
 * Raft's "at least as up to date": a log whose last event was indexed in a later session wins, then the
 * longer log. A node that holds a committed event only follows a log that holds it too, because the
 * master that committed it indexed it in the latest session a majority has seen.
 */
export const upToDate = (
  a: Pick<NodeStatus, "lastTerm" | "lastIdx">,
  b: Pick<NodeStatus, "lastTerm" | "lastIdx">,
) => a.lastTerm > b.lastTerm || (a.lastTerm === b.lastTerm && a.lastIdx >= b.lastIdx);

/** Candidates for a new session: force-master first, then the most up-to-date log, then seniority, then node id. */
export const candidateOrder: Order<NodeStatus> = by(
  (s) => !s.forceMaster,
  (s) => -s.lastTerm,
  (s) => -s.lastIdx,
  (s) => s.startedAt,
  (s) => s.nodeId,
);

/**
 * Among competing masters (formation, a healed partition, a whole-cluster restart): force-master, then
 * the one more nodes follow (a healed minority joins the majority), then the most up-to-date log, then the
 * later session, then seniority, then node id.
 */
export function claimOrder(followers: (s: NodeStatus) => number): Order<NodeStatus> {
  return by(
    (s) => !s.forceMaster,
    (s) => -followers(s),
    (s) => -s.lastTerm,
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
  /** The voting nodes in this node's replicated state (`votersOf`). */
  voters: string[];
  /** The highest election clock this node has seen anywhere. */
  maxClock: number;
  /** How long this node has had no master (ms), 0 when it has one. */
  masterlessMs: number;
  /** After this long without a master a node claims even if it is not the best candidate. */
  patienceMs: number;
}

const isClaim = (s: NodeStatus) => s.session !== null && s.session.master === s.nodeId;
const follows = (s: NodeStatus, claim: NodeStatus) =>
  s.session?.master === claim.nodeId && s.session.clock === claim.session!.clock;

/**
 * A claim this node may follow: its own or the one it follows, one whose log is at least as up to date (so following it never
 * drops an event this node holds that may be committed), or one from outside this node's voting set (two
 * clusters meeting: formation, or a node that was voted out coming back; the claim order decides), or a
 * forced master's.
 */
function eligible(i: ElectionInput, claim: NodeStatus): boolean {
  // The session this node already follows stays eligible: the master's gossiped log position lags the
  // pushes its followers have applied, and a vote is not taken back within a session (Raft's term).
  const current = i.self.session?.master === claim.nodeId && i.self.session.clock === claim.session!.clock;
  // A forced master is followed whatever its log: the operator chose it over that safety.
  return current || claim.forceMaster || upToDate(claim, i.self) || !i.voters.includes(claim.nodeId);
}

export function decide(i: ElectionInput): Decision {
  const claims = i.fresh.filter(isClaim).filter((c) => eligible(i, c));
  if (claims.length > 0) {
    const followers = (c: NodeStatus) => i.fresh.filter((s) => follows(s, c)).length;
    const best = [...claims].sort(claimOrder(followers))[0];
    return best.nodeId === i.self.nodeId
      ? { kind: "lead", session: best.session! }
      : { kind: "follow", session: best.session! };
  }
  const voters = new Set(i.voters);
  const pool = i.fresh.filter((s) => s.nodeId === i.self.nodeId || voters.has(s.nodeId));
  const best = [...pool].sort(candidateOrder)[0];
  if (best.nodeId === i.self.nodeId || i.masterlessMs >= i.patienceMs) {
    return { kind: "lead", session: { master: i.self.nodeId, clock: i.maxClock + 1 } };
  }
  return { kind: "wait" };
}

/**
 * Whether this node's claim is held by a majority of the voting nodes (itself included when it votes),
 * as seen in fresh statuses. Only then does it act as master: index events, answer syncs, time nodes
 * out. A forced master always acts, trading that safety for availability.
 */
export function holdsMajority(self: NodeStatus, fresh: NodeStatus[], voters: string[]): boolean {
  if (self.forceMaster) return true;
  if (!isClaim(self)) return false;
  const backing = fresh.filter((s) =>
    voters.includes(s.nodeId) && (s.nodeId === self.nodeId || follows(s, self))
  );
  return backing.length >= majority(voters.length);
}

/**
 * The highest index a majority of the voters hold: the master's own log end, and for each follower the
 * index up to which it acknowledged the master's history. A forced master commits on its own.
 */
export function commitIndex(
  selfId: string,
  selfIdx: number,
  held: Record<string, number>,
  voters: string[],
  forced: boolean,
): number {
  if (forced) return selfIdx;
  const idx = voters.map((v) => (v === selfId ? selfIdx : held[v] ?? -1)).sort((a, b) => b - a);
  return idx[majority(voters.length) - 1] ?? -1;
}
