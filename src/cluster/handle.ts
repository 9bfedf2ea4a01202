/**
 * What a running cluster plane offers the rest of the node (peer routes, forwarding, health): the handle set
 * on ctx.cluster and the node's view of its cluster. Types only, so that holding a handle imports no plane.
 */
import type { Event } from "./events.ts";
import type { GossipMessage, Session } from "./gossip.ts";
import type { Verdict } from "./peers.ts";
import type { Push, SyncRequest, SyncResponse } from "./replication.ts";
import type { Link } from "../telemetry/reading.ts";

/** One reason this node is degraded (`/healthz`). */
export interface HealthIssue {
  code: string;
  message: string;
}

/** What the peer routes call; set on ctx.cluster while the plane runs. */
export interface ClusterHandle {
  verify(req: { method: string; path: string; headers: Headers; body: Uint8Array }): Promise<Verdict>;
  /** The header checks that need no body, so a request failing them is refused before its body is read. */
  precheck(headers: Headers): Verdict | null;
  /** Headers signing a request to another node as this node (`path` with its query, as sent). */
  sign(method: string, path: string, body: Uint8Array): Promise<Record<string, string>>;
  /** Headers signing our answer to the peer request that carried `requestSignature`. */
  signAnswer(requestSignature: string, body: Uint8Array): Promise<Record<string, string>>;
  gossip(m: GossipMessage): GossipMessage;
  /** Master: indexes the event and returns once a majority of the voting nodes hold it (else NoQuorum). */
  submit(event: Event): Promise<{ idx: number }>;
  /** Master: resolves once `idx` is committed; NoQuorum after the commit timeout. */
  awaitCommit(idx: number): Promise<void>;
  sync(req: SyncRequest): Promise<SyncResponse>;
  push(p: Push): Promise<{ applied: boolean; held: number | null }>;
  view(): ClusterView;
  /** Why this node's view of the cluster is not current (empty when it is). */
  health(): HealthIssue[];
  /** A signed request to another node's peer route (`timeoutMs`: 5 s unless given). */
  call(nodeId: string, path: string, body: unknown, timeoutMs?: number): Promise<unknown>;
  /** Links to peers measured by recent gossip exchanges (round trip), newest per peer, for telemetry. */
  links(now?: number): Link[];
}

export interface ClusterView {
  nodeId: string;
  /** `candidate`: claims the master role but no majority of the voting nodes backs it, so it indexes nothing. */
  role: "master" | "candidate" | "follower" | "none";
  session: Session | null;
  lastIdx: number;
  /** On the master, the highest index a majority of the voters hold; -1 elsewhere. */
  commitIdx: number;
  /** The voting nodes in this node's replicated state. */
  voters: string[];
  peers: {
    nodeId: string;
    apiAddress: string | null;
    session: Session | null;
    lastIdx: number;
    silentMs: number;
  }[];
  addresses: string[];
}
