/**
 * The cluster plane of one node: discovery feeds the address book, a timer runs gossip rounds, the
 * election decides this node's role, and replication keeps the log in step. It owns ctx.submit/masterNodeId.
 */
import { logger } from "../log/mod.ts";
import type { NodeContext } from "../node/context.ts";
import { eq } from "drizzle-orm";
import { kv } from "../store/schema.ts";
import { StoreWriteError } from "../store/db.ts";
import { type Link, MAX_LINKS } from "../telemetry/reading.ts";
import { AddressBook, pickTargets } from "./addresses.ts";
import type { Discovery } from "./discovery/static-peers.ts";
import { CommitTracker, NoMaster, NoQuorum } from "./commit.ts";
import type { ClusterHandle, ClusterView, HealthIssue } from "./handle.ts";
// The types' old home, for importers written before they moved to handle.ts.
export type { ClusterHandle, ClusterView, HealthIssue } from "./handle.ts";
export { NoMaster } from "./commit.ts";
import { commitIndex, decide, holdsMajority, majority } from "./election.ts";
import { type Event, eventType, makeEvent } from "./events.ts";
import {
  type GossipMessage,
  GossipMessageSchema,
  GossipState,
  type NodeStatus,
  type Session,
} from "./gossip.ts";
import { timedOut } from "./liveness.ts";
import { eventIdOf } from "./log.ts";
import { votersOf } from "./state.ts";
import type { Config } from "../config/schema.ts";
import type { Plane } from "../node/plane.ts";
import { mdnsDiscovery } from "./discovery/mdns.ts";
import { staticPeers } from "./discovery/static-peers.ts";
import {
  clusterKey,
  httpTransport,
  localIdentity,
  OnceEvery,
  PeerError,
  type PeerTransport,
  precheck,
  ReplayGuard,
  signedAnswerHeaders,
  signedHeaders,
  type Verdict,
  verifyRequest,
} from "./peers.ts";
import { settleTrust } from "./secret.ts";
import { countedTransport, metricsOf } from "../metrics/node.ts";
import {
  answerSync,
  applyPush,
  applySync,
  type Push,
  PushAnswerSchema,
  pushOf,
  type SyncRequest,
  SyncResponseSchema,
} from "./replication.ts";

const log = logger("cluster");
const CLOCK_KEY = "cluster.election_clock";

export interface ClusterTimings {
  /** Gossip round interval. */
  roundMs: number;
  /** A status not refreshed for this long no longer counts for the election. */
  electionTimeoutMs: number;
  fanout: number;
}

/** How often a master, which otherwise waits for its followers to call, measures its link to each one. */
const LINK_PROBE_MS = 5000;

export const DEFAULT_TIMINGS: ClusterTimings = { roundMs: 500, electionTimeoutMs: 1500, fanout: 3 };

/** A follower may trail the master this long (a push in flight, a pull under way) before health says so. */
export const BEHIND_GRACE_MS = 5000;

export interface ClusterDeps {
  transport: PeerTransport;
  verify: ClusterHandle["verify"];
  precheck: ClusterHandle["precheck"];
  sign: ClusterHandle["sign"];
  signAnswer: ClusterHandle["signAnswer"];
  discovery: Discovery[];
  apiAddress: string | null;
  timings?: Partial<ClusterTimings>;
}

export class ClusterNode {
  readonly t: ClusterTimings;
  readonly gossipState: GossipState;
  readonly book: AddressBook;
  session: Session | null = null;
  #hb = 0;
  #masterSince = 0;
  #masterlessSince: number | null = null;
  #maxClock = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #syncing: Promise<void> | null = null;
  #needsSync = false;
  #pushChains = new Map<string, Promise<unknown>>();
  #lastId: string | null;
  #timingOut = new Set<string>();
  #round: Promise<void> | null = null;
  #stopped = false;
  /** This node leads a session that a majority of the voting nodes follow (or it is a forced master). */
  #established = false;
  /** The session clock in which this node last indexed MasterElected. */
  #electedIn: number | null = null;
  readonly #commit: CommitTracker;
  /** Voting membership changes one at a time, each committed before the next (Raft's single-server rule). */
  #changing: Promise<void> | null = null;
  readonly #caughtUp = Promise.withResolvers<void>();
  #isCaughtUp = false;
  /** Failed pulls in a row, and when the next may start (they back off so a full disk is not hammered). */
  #syncFailures = 0;
  #nextPullAt = 0;
  #lastSyncError = "";
  #resyncLogged = -2;
  /** Since when this follower has trailed the master's gossiped log position (null: it does not). */
  #behindSince: number | null = null;

  constructor(readonly ctx: NodeContext, readonly deps: ClusterDeps) {
    this.t = { ...DEFAULT_TIMINGS, ...deps.timings };
    this.gossipState = new GossipState(ctx.nodeId, ctx.telemetry);
    this.book = new AddressBook(deps.apiAddress);
    this.#lastId = ctx.log.lastEventId;
    this.#commit = new CommitTracker((held) =>
      commitIndex(ctx.nodeId, ctx.log.state.lastEventAppliedIdx, held, this.voters(), ctx.config.forceMaster)
    );
  }

  get role(): ClusterView["role"] {
    if (!this.session) return "none";
    if (this.session.master !== this.ctx.nodeId) return "follower";
    return this.#established ? "master" : "candidate";
  }

  voters(): string[] {
    return votersOf(this.ctx.log.state, this.ctx.nodeId);
  }

  async start(): Promise<void> {
    const { ctx } = this;
    const row = await ctx.store.db.select().from(kv).where(eq(kv.key, CLOCK_KEY)).get();
    this.#maxClock = row ? Number(row.value) : 0;
    // Every node starts as its own master and converges with whoever it finds.
    await this.#lead({ master: ctx.nodeId, clock: this.#maxClock }, Date.now());
    ctx.log.onApplied((ie) => {
      const prev = this.#lastId;
      this.#lastId = ctx.log.lastEventId;
      if (eventType(ie.event) === "NodeTimedOut") {
        const id = (ie.event as { NodeTimedOut: { nodeId: string } }).NodeTimedOut.nodeId;
        this.#timingOut.delete(id);
        if (id !== ctx.nodeId) {
          this.gossipState.forget(id);
          this.#links.delete(id);
        }
      }
      if (this.role === "master") {
        this.#commit.update();
        this.#pushAll(pushOf(ctx.nodeId, prev, ie));
      }
    });
    ctx.log.onReset(() => (this.#lastId = ctx.log.lastEventId));
    // A one-node cluster (or a forced master) backs its own claim at once (after the listeners above, which
    // push and count what it then indexes).
    this.#judgeMajority(Date.now());
    ctx.masterNodeId =
      () => (this.role === "master" || this.role === "follower" ? this.session!.master : null);
    ctx.whenCaughtUp = () => this.#caughtUp.promise;

    ctx.submit = async (event) => {
      await this.submitAnywhere(event);
    };
    for (const d of this.deps.discovery) {
      await d.start((a) => this.book.add(a, d.name === "mdns" ? "mdns" : "static"));
    }
    // A node with no way to find a peer (no static peer, no mDNS: it binds loopback or has it off) leads
    // alone from the start: there is no other log to catch up with.
    const mdns = this.deps.discovery.some((d) => d.name === "mdns") && !!this.deps.apiAddress &&
      !this.deps.apiAddress.startsWith("127.");
    if (this.book.all().length === 0 && !mdns) this.#markCaughtUp("it has no peer to follow");
    this.#timer = setInterval(() => {
      if (!this.#round) this.#round = this.tick().finally(() => (this.#round = null));
    }, this.t.roundMs);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    for (const d of this.deps.discovery) await d.stop();
    await this.#round;
  }

  selfStatus(now: number): NodeStatus {
    this.#hb = Math.max(this.#hb + 1, now);
    return {
      nodeId: this.ctx.nodeId,
      hb: this.#hb,
      startedAt: this.ctx.startedAt,
      forceMaster: this.ctx.config.forceMaster,
      lastIdx: this.ctx.log.state.lastEventAppliedIdx,
      lastTerm: this.ctx.log.lastTerm,
      lastEventId: this.ctx.log.lastEventId,
      apiAddress: this.deps.apiAddress,
      session: this.session,
    };
  }

  addressOf(nodeId: string): string | null {
    return this.gossipState.status(nodeId)?.status.apiAddress ??
      this.ctx.telemetry.get(nodeId)?.reading.apiAddress ?? null;
  }

  /** One round: refresh our status, exchange with a few peers, re-decide the role, repair the log, check liveness. */
  async tick(now = Date.now()): Promise<void> {
    this.gossipState.offerStatus(this.selfStatus(now), now);
    for (const s of this.gossipState.statuses()) {
      if (s.status.apiAddress && s.status.nodeId !== this.ctx.nodeId) {
        this.book.add(s.status.apiAddress, "gossip");
      }
    }
    const master = this.role === "follower" ? this.addressOf(this.session!.master) : null;
    // Followers reach the master every round and it answers each with everything new, so a master
    // only reaches out to addresses that are not its followers yet (newcomers, other masters).
    const followers = this.role === "master"
      ? new Set(this.#followers(now).map((s) => s.apiAddress))
      : new Set();
    // It does still measure its link to each follower now and then, for /state's topology.
    const targets = pickTargets(
      this.book.ready(now).filter((a) =>
        (!followers.has(a) || this.#linkStale(a, now)) && !this.#inFlight.has(a)
      ),
      master,
      this.t.fanout,
      Math.random,
    );
    // An unreachable peer must not stall the round: the election is judged after at most one round's
    // wait, and exchanges still running finish (or time out) in the background.
    const all = Promise.all(targets.map((a) => {
      this.#inFlight.add(a);
      return this.exchange(a).finally(() => this.#inFlight.delete(a));
    }));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([all, new Promise((r) => (timer = setTimeout(r, this.t.roundMs)))]);
    clearTimeout(timer);
    if (this.#stopped) return;
    await this.elect(Date.now());
    if (this.role === "follower") {
      const m = this.gossipState.status(this.session!.master)?.status;
      const behind = !!m && m.lastIdx > this.ctx.log.state.lastEventAppliedIdx;
      if (!behind) this.#behindSince = null;
      else this.#behindSince ??= Date.now();
      if (this.#needsSync || behind) this.pull();
    } else this.#behindSince = null;
    if (this.role === "master") {
      // Every node starts as its own master; only a lead that survived the election's patience is real.
      if (!this.#isCaughtUp && Date.now() - this.#masterSince >= 2 * this.t.electionTimeoutMs) {
        this.#markCaughtUp("it leads the cluster");
      }
      await this.#collectAcks(Date.now());
      this.#admitFollowers(Date.now());
      this.#checkLiveness(Date.now());
    }
  }

  /**
   * Why this node's view of the cluster cannot be trusted right now (empty when it can): no master, a
   * master it cannot reach, a log behind the master's, or failing syncs.
   */
  health(now = Date.now()): HealthIssue[] {
    const out: HealthIssue[] = [];
    if (!this.session) {
      out.push({ code: "no_master", message: "no master: the cluster is electing one" });
      return out;
    }
    if (this.role === "candidate") {
      out.push({ code: "no_quorum", message: `no master: ${this.#noMajority()}` });
    }
    if (this.role === "follower") {
      const master = this.session.master;
      const heard = this.gossipState.status(master);
      const silent = heard ? now - heard.receivedAt : null;
      if (silent === null || silent > this.t.electionTimeoutMs) {
        out.push({
          code: "master_unreachable",
          message: silent === null
            ? `cannot reach master ${master}: not heard from yet`
            : `cannot reach master ${master}: not heard from for ${(silent / 1000).toFixed(1)} s`,
        });
      }
      const gap = (heard?.status.lastIdx ?? -1) - this.ctx.log.state.lastEventAppliedIdx;
      if (gap > 0 && this.#behindSince !== null && now - this.#behindSince >= BEHIND_GRACE_MS) {
        out.push({
          code: "behind_master",
          message: `behind master ${master}'s log by ${gap} event(s) for ${
            ((now - this.#behindSince) / 1000).toFixed(1)
          } s`,
        });
      }
      if (this.#syncFailures > 0) {
        out.push({
          code: "sync_failing",
          message:
            `${this.#syncFailures} sync(s) from master ${master} failed in a row: ${this.#lastSyncError}`,
        });
      }
    }
    if (!this.#isCaughtUp) {
      out.push({ code: "catching_up", message: "catching up with the master's log after start" });
    }
    return out;
  }

  /** True once this node's state may be acted on (see NodeContext.whenCaughtUp). */
  get caughtUp(): boolean {
    return this.#isCaughtUp;
  }

  #markCaughtUp(why: string): void {
    if (this.#isCaughtUp) return;
    this.#isCaughtUp = true;
    log.info("caught up at log index {idx}: {why}", { idx: this.ctx.log.state.lastEventAppliedIdx, why });
    this.#caughtUp.resolve();
  }

  async exchange(address: string): Promise<void> {
    const now = Date.now();
    try {
      const msg = this.gossipState.messageFor(this.#digests.get(address) ?? null);
      const sent = performance.now();
      const answer = await this.deps.transport(address, "gossip", msg, this.t.electionTimeoutMs);
      const rttMs = Math.round((performance.now() - sent) * 10) / 10;
      const res = GossipMessageSchema.parse(answer);
      this.gossipState.merge(res, Date.now());
      const peer = this.gossipState.statuses().find((e) =>
        e.status.apiAddress === address && e.status.nodeId !== this.ctx.nodeId
      );
      if (peer) {
        this.#links.set(peer.status.nodeId, { nodeId: peer.status.nodeId, address, rttMs, measuredAt: now });
      }
      this.#digests.set(address, res.digest);
      this.book.ok(address);
    } catch (e) {
      this.#digests.delete(address);
      this.book.failed(address, now);
      // A master that refuses connections twice in a row is gone (kill -9, crash): stop waiting for
      // its heartbeat to age out. Timeouts do not count, since a busy master is not a dead one.
      const master = this.role === "follower" ? this.session!.master : null;
      if (
        master && address === this.addressOf(master) && e instanceof PeerError && e.kind === "unreachable" &&
        !/timed out|abort/i.test(e.message)
      ) {
        if ((this.#masterFailures = this.#masterFailures + 1) >= 2) this.gossipState.suspect(master);
      }
      return;
    }
    this.#masterFailures = 0;
  }
  #digests = new Map<string, GossipMessage["digest"]>();
  /** The last measured link to each peer, by node id. */
  #links = new Map<string, Link>();

  #linkStale(address: string, now: number): boolean {
    const last = [...this.#links.values()].find((l) => l.address === address);
    return !last || now - last.measuredAt > LINK_PROBE_MS;
  }

  /** Links measured within the node timeout: an older one says nothing about the link now. */
  links(now = Date.now()): Link[] {
    const maxAge = this.ctx.config.nodeTimeout * 1000;
    return [...this.#links.values()].filter((l) => now - l.measuredAt <= maxAge)
      .sort((a, b) => a.nodeId.localeCompare(b.nodeId)).slice(0, MAX_LINKS);
  }
  #inFlight = new Set<string>();
  #masterFailures = 0;

  async elect(now: number): Promise<void> {
    const fresh = this.gossipState.fresh(now, this.t.electionTimeoutMs);
    for (const s of fresh) if (s.session) this.#maxClock = Math.max(this.#maxClock, s.session.clock);
    const d = decide({
      self: this.selfStatus(now),
      fresh: fresh.map((s) => (s.nodeId === this.ctx.nodeId ? { ...s, session: this.session } : s)),
      voters: this.voters(),
      maxClock: this.#maxClock,
      masterlessMs: this.#masterlessSince === null ? 0 : now - this.#masterlessSince,
      patienceMs: 2 * this.t.electionTimeoutMs,
    });
    const same = (a: Session | null, b: Session | null) => a?.master === b?.master && a?.clock === b?.clock;
    if (d.kind === "lead" && !same(d.session, this.session)) await this.#lead(d.session, now);
    else if (d.kind === "follow" && !same(d.session, this.session)) {
      log.info("following master {master} (session {clock})", {
        master: d.session.master,
        clock: d.session.clock,
      });
      this.ctx.flight?.note({
        source: "election",
        event: "new_master",
        detail: `following master ${d.session.master} (session ${d.session.clock})`,
        attrs: { master: d.session.master, clock: d.session.clock },
      });
      this.session = d.session;
      this.#masterlessSince = null;
      this.#needsSync = true;
      // Tell the new master now that we back it (its majority), rather than at our next round.
      const addr = this.addressOf(d.session.master);
      this.gossipState.offerStatus(this.selfStatus(now), now);
      if (addr && !this.#inFlight.has(addr)) {
        this.#inFlight.add(addr);
        this.exchange(addr).finally(() => this.#inFlight.delete(addr));
      }
    } else if (d.kind === "wait" && this.session && this.role === "follower") {
      log.info("master {master} is silent; electing a new one", { master: this.session.master });
      this.ctx.flight?.note({
        source: "election",
        event: "master_lost",
        detail: `master ${this.session.master} is silent; electing a new one`,
        attrs: { master: this.session.master },
      });
      this.session = null;
      this.#masterlessSince = now;
    } else if (d.kind === "wait" && this.#masterlessSince === null) this.#masterlessSince = now;
    if (d.kind === "lead" && this.#masterlessSince !== null) this.#masterlessSince = null;
    this.#judgeMajority(now);
  }

  /** Acts as master only while a majority of the voting nodes back this node's claim. */
  #judgeMajority(now: number): void {
    const self = this.selfStatus(now);
    // Backing is judged over the election timeout to become master, and twice that to stay one, so a
    // follower delayed by a busy machine does not make the master flap. Staying longer is safe: commits
    // count followers' answers, and a follower answers only the master it follows.
    const window = this.#established ? 2 * this.t.electionTimeoutMs : this.t.electionTimeoutMs;
    const fresh = [self, ...this.#freshOthers(now, window)];
    const holds = this.session?.master === this.ctx.nodeId && holdsMajority(self, fresh, this.voters());
    if (holds === this.#established) return;
    this.#established = holds;
    if (holds) {
      log.info("a majority of the voting nodes backs this node: acting as master (session {clock})", {
        clock: this.session!.clock,
      });
      this.ctx.flight?.note({
        source: "election",
        event: "became_master",
        detail: `a majority of the voting nodes backs this node: acting as master (session ${
          this.session!.clock
        })`,
        attrs: { master: this.ctx.nodeId, clock: this.session!.clock },
      });
      this.#masterSince = now;
      this.#timingOut.clear();
      this.#commit.reset();
      // Indexed first in the session, so a node holding an uncommitted tail from an older session sees
      // this log as newer and follows it (see election.ts, upToDate). Once per session is enough.
      if (this.#electedIn !== this.session!.clock) {
        this.#electedIn = this.session!.clock;
        this.#appendQuietly(
          makeEvent("MasterElected", { nodeId: this.ctx.nodeId, clock: this.session!.clock }),
        );
      }
      if (!(this.ctx.log.state.voters ?? []).includes(this.ctx.nodeId)) {
        this.#changeMembership(makeEvent("NodeJoined", { nodeId: this.ctx.nodeId }));
      }
    } else {
      const why = this.#noMajority();
      log.warn("{why}: no longer acting as master", { why });
      this.ctx.flight?.note({
        source: "election",
        event: "stepped_down",
        detail: `${why}: no longer acting as master`,
      });
      this.#commit.failAll(`${why}; retry in a moment`);
    }
  }

  #freshOthers(now: number, windowMs = this.t.electionTimeoutMs): NodeStatus[] {
    return this.gossipState.fresh(now, windowMs).filter((s) => s.nodeId !== this.ctx.nodeId);
  }

  /** Why this node cannot commit: how many voters it hears, of how many, and how many it needs. */
  #noMajority(): string {
    const voters = this.voters();
    const heard = [this.ctx.nodeId, ...this.#freshOthers(Date.now()).map((s) => s.nodeId)]
      .filter((id) => voters.includes(id)).length;
    return `no majority of the voting nodes is reachable from ${this.ctx.nodeId} ` +
      `(${heard} of ${voters.length} heard, ${majority(voters.length)} needed)`;
  }

  #appendQuietly(event: Event): void {
    this.ctx.log.append(event).catch((e) =>
      log.error("could not index {type}: {error}", { type: eventType(event), error: (e as Error).message })
    );
  }

  /** One membership change at a time, committed before the next; false when one is still under way. */
  #changeMembership(event: Event, onFail?: () => void): boolean {
    if (this.#changing) return false;
    this.#changing = this.ctx.log.append(event)
      .then((ie) => this.#commit.wait(ie.idx, 30_000, () => this.#noMajority()))
      .catch((e) => {
        onFail?.();
        log.warn("membership change {type} not committed: {error}", {
          type: eventType(event),
          error: (e as Error).message,
        });
      })
      .finally(() => (this.#changing = null));
    return true;
  }

  /** Followers prove in their status what they hold: the master's event at their last index. */
  async #collectAcks(now: number): Promise<void> {
    for (const s of this.#followers(now)) {
      if (s.lastIdx <= this.#commit.heldBy(s.nodeId) || s.lastIdx > this.ctx.log.state.lastEventAppliedIdx) {
        continue;
      }
      if (s.lastEventId !== null && (await this.ctx.log.eventIdAt(s.lastIdx)) === s.lastEventId) {
        this.#commit.ack(s.nodeId, s.lastIdx);
      }
    }
  }

  /** A node that follows this master and holds the committed log becomes a voter. */
  #admitFollowers(now: number): void {
    const voters = this.voters();
    for (const s of this.#followers(now)) {
      const held = this.#commit.heldBy(s.nodeId);
      if (voters.includes(s.nodeId) || held < 0 || held < this.#commit.index) continue;
      log.info("node {nodeId} follows and has caught up: indexing it as a voter", { nodeId: s.nodeId });
      this.#changeMembership(makeEvent("NodeJoined", { nodeId: s.nodeId }));
      return;
    }
  }

  async #lead(session: Session, now: number): Promise<void> {
    const { ctx } = this;
    const was = this.session;
    this.session = session;
    this.#masterSince = now;
    this.#masterlessSince = null;
    if (this.#established) {
      this.#established = false;
      this.#commit.failAll("the master changed session; retry in a moment");
    }
    this.#maxClock = Math.max(this.#maxClock, session.clock);
    this.#timingOut.clear();
    // The new session continues from this node's replica: same indices, a new session label.
    ctx.log.setSession(`${session.master}/${session.clock}`);
    const value = String(session.clock);
    const updatedAt = new Date().toISOString();
    await ctx.store.db.insert(kv).values({ key: CLOCK_KEY, value, updatedAt }).onConflictDoUpdate({
      target: kv.key,
      set: { value, updatedAt },
    });
    if (was) {
      log.info("this node claims the master role (session {clock}, log at {idx})", {
        clock: session.clock,
        idx: ctx.log.state.lastEventAppliedIdx,
      });
    }
  }

  /** Pulls from the master until caught up; one pull at a time. */
  pull(): void {
    if (this.#syncing || this.role !== "follower") return;
    if (Date.now() < this.#nextPullAt) return void (this.#needsSync = true);
    const master = this.session!.master;
    this.#needsSync = false;
    this.#syncing = (async () => {
      const addr = this.addressOf(master);
      if (!addr) return void (this.#needsSync = true);
      for (let i = 0; i < 100 && this.session?.master === master; i++) {
        const req: SyncRequest = {
          after: this.ctx.log.state.lastEventAppliedIdx,
          eventId: this.ctx.log.lastEventId,
        };
        const res = SyncResponseSchema.parse(await this.deps.transport(addr, "sync", req, 10_000));
        if (res.snapshot) {
          // Once per snapshot: a follower that cannot apply it would otherwise repeat this every round.
          const first = res.snapshot.idx !== this.#resyncLogged;
          this.#resyncLogged = res.snapshot.idx;
          const fields = { master, idx: res.snapshot.idx };
          if (first) log.info("resynchronising from master {master}'s snapshot at {idx}", fields);
          else log.debug("resynchronising from master {master}'s snapshot at {idx}", fields);
        }
        if (!(await applySync(this.ctx.log, res))) {
          if (this.ctx.log.state.lastEventAppliedIdx >= res.lastIdx) {
            this.#markCaughtUp(`it holds master ${master}'s log`);
          }
          break;
        }
      }
      if (this.#syncFailures > 0) {
        log.info("sync from {master} works again after {n} failed attempt(s)", {
          master,
          n: this.#syncFailures,
        });
      }
      this.#syncFailures = 0;
      this.#nextPullAt = 0;
    })().catch((e) => {
      this.#needsSync = true;
      const error = (e as Error).message;
      const n = ++this.#syncFailures;
      // A write that failed here (a full disk) fails again at once: back off to 10 s. A network failure
      // retries next round, since a follower that lags keeps its engines from hearing of placements.
      // Either way, log at warning on the first failure, on each new cause, then every 20th.
      this.#nextPullAt = e instanceof StoreWriteError
        ? Date.now() + Math.min(10_000, this.t.roundMs * 2 ** Math.min(n - 1, 5))
        : 0;
      const loud = n === 1 || error !== this.#lastSyncError || n % 20 === 0;
      this.#lastSyncError = error;
      const fields = { master, n, error };
      if (loud) log.warn("sync from {master} failed ({n} in a row): {error}", fields);
      else log.debug("sync from {master} failed ({n} in a row): {error}", fields);
    }).finally(() => (this.#syncing = null));
  }

  #followers(now: number): NodeStatus[] {
    return this.gossipState.fresh(now, this.t.electionTimeoutMs)
      .filter((s) => s.nodeId !== this.ctx.nodeId && s.session?.master === this.ctx.nodeId && s.apiAddress);
  }

  #pushAll(p: Push): void {
    for (const s of this.#followers(Date.now())) {
      const addr = s.apiAddress!;
      // One chain per follower keeps pushes in order; a failed push is repaired by the follower's pull.
      // Its answer says up to where the follower holds our history: what the commit index counts.
      const next = (this.#pushChains.get(addr) ?? Promise.resolve()).then(async () => {
        const a = PushAnswerSchema.parse(await this.deps.transport(addr, "push", p, 2000));
        if (a.held !== null && this.role === "master") this.#commit.ack(s.nodeId, a.held);
      }).catch(() => {});
      this.#pushChains.set(addr, next);
    }
  }

  #checkLiveness(now: number): void {
    const heard = Object.fromEntries(this.gossipState.statuses().map((e) => [e.status.nodeId, e.receivedAt]));
    const late = timedOut({
      selfId: this.ctx.nodeId,
      heard,
      state: this.ctx.log.state,
      masterSince: this.#masterSince,
      now,
      timeoutMs: this.ctx.config.nodeTimeout * 1000,
    });
    for (const id of late) {
      if (this.#timingOut.has(id)) continue;
      // A timed-out voter leaves the voting set: one membership change at a time.
      if (
        !this.#changeMembership(makeEvent("NodeTimedOut", { nodeId: id }), () => this.#timingOut.delete(id))
      ) {
        return;
      }
      this.#timingOut.add(id);
      log.warn("node {nodeId} silent for more than {s} s: timing it out", {
        nodeId: id,
        s: this.ctx.config.nodeTimeout,
      });
    }
  }

  get #commitTimeoutMs(): number {
    return this.ctx.config.commitTimeout * 1000;
  }

  /** Master: index the event, then answer once a majority holds it, or NoQuorum after the commit timeout. */
  async indexCommitted(event: Event): Promise<{ idx: number }> {
    if (this.role === "candidate") throw new NoQuorum(`${this.#noMajority()}; retry in a moment`);
    if (this.role !== "master") {
      throw new NoMaster(`this node is not the master (${this.session?.master ?? "none known"})`);
    }
    const { idx } = await this.ctx.log.append(event);
    await this.awaitCommit(idx);
    return { idx };
  }

  /** Resolves once `idx` is held by a majority of the voters; NoQuorum after the commit timeout. */
  awaitCommit(idx: number): Promise<void> {
    return this.#commit.wait(
      idx,
      this.#commitTimeoutMs,
      () =>
        `${this.#noMajority()} within ${this.ctx.config.commitTimeout} s; the event is not acknowledged, retry`,
    );
  }

  /** ctx.submit: index locally as master, else hand the event to the master. */
  async submitAnywhere(event: Event): Promise<{ idx: number }> {
    if (this.role === "master" || this.role === "candidate") return await this.indexCommitted(event);
    const master = this.session?.master;
    const addr = master ? this.addressOf(master) : null;
    if (!master || !addr) throw new NoMaster("the cluster is electing a master; retry in a moment");
    try {
      return await this.deps.transport(addr, "submit", { event }, this.#commitTimeoutMs + 2000) as {
        idx: number;
      };
    } catch (e) {
      if (e instanceof PeerError && e.status === 503 && /no_quorum/.test(e.message)) {
        throw new NoQuorum(
          `the master ${master} could not get a majority of the voting nodes to hold the event in time; ` +
            "it is not acknowledged, retry in a moment",
        );
      }
      throw new NoMaster(
        `the master ${master} did not take the event (${(e as Error).message}); retry in a moment`,
      );
    }
  }

  handle(): ClusterHandle {
    return {
      verify: this.deps.verify,
      precheck: this.deps.precheck,
      sign: this.deps.sign,
      signAnswer: this.deps.signAnswer,
      gossip: (m) => {
        const reply = this.gossipState.gossipReply(m, Date.now());
        // A candidate learns here that a follower now backs it: act at once, not at the next round.
        if (this.role === "candidate") this.#judgeMajority(Date.now());
        return reply;
      },
      submit: (event) => this.indexCommitted(event),
      links: (now) => this.links(now),
      awaitCommit: (idx) => this.awaitCommit(idx),
      sync: (req) => {
        if (this.role !== "master") throw new NoMaster("this node is not the master");
        return answerSync(this.ctx.log, req);
      },
      push: async (p) => {
        if (this.role !== "follower" || p.master !== this.session?.master || this.#syncing) {
          return { applied: false, held: null };
        }
        let applied: boolean;
        try {
          applied = await applyPush(this.ctx.log, p);
        } catch (e) {
          // A write that failed here (a full disk) is retried, and reported with backoff, by the pull.
          log.debug("could not apply pushed event {idx}: {error}", {
            idx: p.event.idx,
            error: (e as Error).message,
          });
          applied = false;
        }
        // Held only when the event at that index is the master's (an older push may meet a diverged tail).
        const held = applied && (await this.ctx.log.eventIdAt(p.event.idx)) === eventIdOf(p.event.event)
          ? p.event.idx
          : null;
        if (held === null) this.pull();
        return { applied, held };
      },
      view: () => this.view(),
      health: () => this.health(),
      call: (nodeId, path, body, timeoutMs = 5000) => {
        const addr = this.addressOf(nodeId);
        if (!addr) throw new NoMaster(`node ${nodeId} has no known address yet; retry in a moment`);
        return this.deps.transport(addr, path, body, timeoutMs);
      },
    };
  }

  view(now = Date.now()): ClusterView {
    return {
      nodeId: this.ctx.nodeId,
      role: this.role,
      session: this.session,
      lastIdx: this.ctx.log.state.lastEventAppliedIdx,
      commitIdx: this.role === "master" ? this.#commit.index : -1,
      voters: this.voters(),
      peers: this.gossipState.statuses().filter((e) => e.status.nodeId !== this.ctx.nodeId).map((e) => ({
        nodeId: e.status.nodeId,
        apiAddress: e.status.apiAddress,
        session: e.status.session,
        lastIdx: e.status.lastIdx,
        silentMs: now - e.receivedAt,
      })),
      addresses: this.book.all().map((e) => e.address),
    };
  }
}

/** A refused peer request in the flight recorder (once a minute per sender and reason, as it is logged). */
function notePeerRefusal(ctx: NodeContext, headers: Headers, v: Exclude<Verdict, { ok: true }>): void {
  ctx.flight?.note({
    source: "peer",
    event: "refused",
    detail: v.message,
    attrs: { from: headers.get("x-skulk-node"), reason: v.reason },
  });
}

/** The daemon's cluster plane: keys, transport and discovery from the config, around one ClusterNode. */
export function clusterPlane(config: Config, timings?: Partial<ClusterTimings>): Plane<NodeContext> {
  let node: ClusterNode | null = null;
  return {
    name: "cluster",
    async start(ctx) {
      const apiAddress = ctx.telemetry.get(ctx.nodeId)?.reading.apiAddress ?? null;
      const trust = settleTrust(config.dataDir, {
        secret: config.clusterSecret,
        apiKey: config.apiKey,
        join: config.join,
        namespace: config.namespace,
        peers: config.peers,
      }, apiAddress);
      const { namespace } = trust;
      const key = await clusterKey(trust.secret, namespace);
      const me = localIdentity(ctx.nodeId, namespace);
      const guard = new ReplayGuard();
      const refusals = new OnceEvery();
      const discovery: Discovery[] = [staticPeers(trust.peers)];
      if (config.mdns) {
        discovery.push(mdnsDiscovery({ namespace, apiAddress, nodeId: ctx.nodeId }));
      }
      node = new ClusterNode(ctx, {
        transport: countedTransport(httpTransport(key, me), metricsOf(ctx)),
        verify: async (req) => {
          const v = await verifyRequest(key, me, req, Date.now(), guard);
          if (!v.ok && refusals.due(`${req.headers.get("x-skulk-node")}/${v.reason}`)) {
            log.warn("refused a peer: {why}", { why: v.message });
            notePeerRefusal(ctx, req.headers, v);
          }
          return v;
        },
        precheck: (headers) => {
          const v = precheck(me, headers, Date.now());
          if (v && !v.ok && refusals.due(`${headers.get("x-skulk-node")}/${v.reason}`)) {
            log.warn("refused a peer: {why}", { why: v.message });
            notePeerRefusal(ctx, headers, v);
          }
          return v;
        },
        sign: (method, path, body) => signedHeaders(key, me, method, path, body, Date.now()),
        signAnswer: (requestSignature, body) =>
          signedAnswerHeaders(key, me, requestSignature, body, Date.now()),
        discovery,
        apiAddress,
        timings,
      });
      ctx.cluster = node.handle();
      await node.start();
    },
    async stop() {
      await node?.stop();
    },
  };
}
