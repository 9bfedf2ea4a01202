/**
 * Authenticated HTTP between nodes: every peer request carries an HMAC-SHA256 over method, path, time, nonce,
 * sender and body under the cluster key, plus version and namespace headers; refusals name the reason class only.
 */
import { logger } from "../log/mod.ts";
import { VERSION } from "../version.ts";

const log = logger("peers");
const enc = new TextEncoder();

/** Peer requests older or newer than this (ms) are refused; within it a signature is accepted once. */
export const REPLAY_WINDOW_MS = 30_000;

/**
 * Largest peer request body (bytes), refused by Content-Length before any byte is read and capped while
 * streaming. The largest legitimate one is an event carrying a custom model card (its client body is held
 * to the API's JSON limit) or a gossip round of 24 readings and 256 statuses, both far below this; the
 * measurement is in docs/cluster.md.
 */
export const PEER_BODY_LIMIT = 4 * 1024 * 1024;

/**
 * Largest answer read from a peer. A sync answer carries a snapshot of the whole cluster state plus up to
 * 256 events, so it is allowed more room than a request; past it the answer is dropped unread.
 */
export const PEER_ANSWER_LIMIT = 64 * 1024 * 1024;

export const H = {
  node: "x-skulk-node",
  version: "x-skulk-version",
  namespace: "x-skulk-namespace",
  time: "x-skulk-time",
  nonce: "x-skulk-nonce",
  signature: "x-skulk-signature",
  refusal: "x-skulk-refusal",
} as const;

export type RefusalReason = "version" | "namespace" | "key" | "replay";

export interface PeerIdentity {
  nodeId: string;
  namespace: string;
  version: string;
}

/**
 * The key bytes: the secret when there is one (set, generated or joined: cluster/secret.ts), else derived
 * from the namespace so a LAN cluster forms unconfigured. The derived key is public (mDNS announces the
 * namespace): that mode trusts everyone on the LAN, which is why a node with an API key never uses it.
 */
export async function clusterKey(secret: string | null, namespace: string): Promise<CryptoKey> {
  const raw = secret
    ? enc.encode(secret)
    : new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(`skulk-cluster-key/${namespace}`)));
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
}

function canonical(
  method: string,
  path: string,
  time: string,
  nonce: string,
  nodeId: string,
  body: Uint8Array,
): Uint8Array<ArrayBuffer> {
  const head = enc.encode(`${method.toUpperCase()}\n${path}\n${time}\n${nonce}\n${nodeId}\n`);
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s: string) =>
  /^[0-9a-f]{64}$/.test(s) ? Uint8Array.from(s.match(/../g)!, (h) => parseInt(h, 16)) : null;

/**
 * The headers that sign one request; `path` is the path and query exactly as sent. The nonce keeps two
 * identical requests in the same millisecond (two equal chats forwarded at once) from sharing a signature,
 * which the replay guard would refuse.
 */
export async function signedHeaders(
  key: CryptoKey,
  me: PeerIdentity,
  method: string,
  path: string,
  body: Uint8Array,
  now: number,
): Promise<Record<string, string>> {
  const time = String(now);
  const nonce = hex(crypto.getRandomValues(new Uint8Array(12)).buffer);
  const sig = await crypto.subtle.sign("HMAC", key, canonical(method, path, time, nonce, me.nodeId, body));
  return {
    [H.node]: me.nodeId,
    [H.version]: me.version,
    [H.namespace]: me.namespace,
    [H.time]: time,
    [H.nonce]: nonce,
    [H.signature]: hex(sig),
  };
}

/**
 * A refusal has a `message` for this node's log (naming what differs, ours included) and a `public` line
 * for the sender that names only the class of the problem: nothing in it helps a forger find the key.
 */
export type Verdict =
  | { ok: true; nodeId: string }
  | { ok: false; reason: RefusalReason; message: string; public: string };

/** Cheap checks that need no body: a request failing them is refused before its body is read. */
export function precheck(
  me: PeerIdentity,
  headers: Headers,
  now: number,
): Verdict | null {
  const h = (n: string) => headers.get(n) ?? "";
  const from = h(H.node) || "unknown node";
  // The public lines echo only what the sender sent: ours (namespace, version) stay in our log.
  if (h(H.version) !== me.version) {
    const theirs = `Skulk version ${h(H.version) || "(none)"} from ${from}`;
    const why = "all nodes of a cluster run the same version";
    return {
      ok: false,
      reason: "version",
      message: `${theirs} differs from ours (${me.version}); ${why}`,
      public: `${theirs} differs from ours; ${why}`,
    };
  }
  if (h(H.namespace) !== me.namespace) {
    const theirs = `namespace '${h(H.namespace)}' of ${from}`;
    return {
      ok: false,
      reason: "namespace",
      message: `${theirs} differs from ours ('${me.namespace}')`,
      public: `${theirs} differs from ours`,
    };
  }
  const time = Number(h(H.time));
  if (!Number.isFinite(time) || Math.abs(now - time) > REPLAY_WINDOW_MS) {
    const message = `request is outside the ${REPLAY_WINDOW_MS / 1000} s window (clock skew or replay)`;
    return { ok: false, reason: "replay", message: `${message} from ${from}`, public: message };
  }
  return null;
}

/**
 * Checks one incoming peer request: the header checks of `precheck`, then signature and replay. `path` is
 * the path and query as received.
 */
export async function verifyRequest(
  key: CryptoKey,
  me: PeerIdentity,
  req: { method: string; path: string; headers: Headers; body: Uint8Array },
  now: number,
  seen: ReplayGuard,
): Promise<Verdict> {
  const early = precheck(me, req.headers, now);
  if (early) return early;
  const h = (n: string) => req.headers.get(n) ?? "";
  const from = h(H.node) || "unknown node";
  const sig = unhex(h(H.signature));
  const good = sig !== null &&
    await crypto.subtle.verify(
      "HMAC",
      key,
      sig,
      canonical(req.method, req.path, h(H.time), h(H.nonce), h(H.node), req.body),
    );
  if (!good) {
    return {
      ok: false,
      reason: "key",
      message: `request from ${from} is not signed with our cluster key (another cluster secret)`,
      public: `request from ${from} is not signed with our cluster key`,
    };
  }
  if (!seen.first(h(H.signature), Number(h(H.time)), now)) {
    const message = "request was already received (replay)";
    return { ok: false, reason: "replay", message: `${message} from ${from}`, public: message };
  }
  return { ok: true, nodeId: h(H.node) };
}

/**
 * Headers signing an answer to a peer request. The HMAC covers the request's own signature, so an answer
 * is bound to the one request it answers (no replay needed), and the answer's body: a node that merely
 * holds an address (one announced over mDNS, say) cannot feed us statuses, snapshots or events.
 */
export async function signedAnswerHeaders(
  key: CryptoKey,
  me: PeerIdentity,
  requestSignature: string,
  body: Uint8Array,
  now: number,
): Promise<Record<string, string>> {
  const time = String(now);
  const sig = await crypto.subtle.sign(
    "HMAC",
    key,
    canonical("ANSWER", requestSignature, time, "", me.nodeId, body),
  );
  return { [H.node]: me.nodeId, [H.time]: time, [H.signature]: hex(sig) };
}

/** Whether an answer carries a valid signature for the request we signed with `requestSignature`. */
export async function verifyAnswer(
  key: CryptoKey,
  requestSignature: string,
  headers: Headers,
  body: Uint8Array,
): Promise<boolean> {
  const sig = unhex(headers.get(H.signature) ?? "");
  return sig !== null && await crypto.subtle.verify(
    "HMAC",
    key,
    sig,
    canonical("ANSWER", requestSignature, headers.get(H.time) ?? "", "", headers.get(H.node) ?? "", body),
  );
}

/** Reads a body up to `limit` bytes; null when it is longer (the rest is not read). */
export async function readBounded(res: Response, limit: number): Promise<Uint8Array | null> {
  if (Number(res.headers.get("content-length") ?? 0) > limit) {
    await res.body?.cancel();
    return null;
  }
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of res.body ?? []) {
    total += chunk.length;
    if (total > limit) {
      await res.body?.cancel().catch(() => {});
      return null;
    }
    parts.push(chunk);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}

/** Remembers signatures inside the replay window so a captured request cannot be sent twice. */
export class ReplayGuard {
  readonly #seen = new Map<string, number>();

  first(signature: string, time: number, now: number): boolean {
    if (this.#seen.size > 10_000) {
      for (const [s, t] of this.#seen) if (now - t > REPLAY_WINDOW_MS) this.#seen.delete(s);
    }
    if (this.#seen.has(signature)) return false;
    this.#seen.set(signature, time);
    return true;
  }
}

/** Logs a line once per key and interval, so a misconfigured peer retrying forever is one line, not a storm. */
export class OnceEvery {
  readonly #last = new Map<string, number>();
  constructor(private readonly intervalMs = 60_000) {}
  due(key: string, now = Date.now()): boolean {
    const t = this.#last.get(key);
    if (t !== undefined && now - t < this.intervalMs) return false;
    this.#last.set(key, now);
    return true;
  }
}

export class PeerError extends Error {
  constructor(readonly kind: "unreachable" | "refused" | "failed", message: string, readonly status = 0) {
    super(message);
    this.name = "PeerError";
  }
}

/** What the planes use to talk to a peer: a JSON POST to `/cluster/peer/<path>`; tests and benches swap it. */
export type PeerTransport = (
  address: string,
  path: string,
  body: unknown,
  timeoutMs?: number,
) => Promise<unknown>;

export function httpTransport(key: CryptoKey, me: PeerIdentity): PeerTransport {
  const warned = new OnceEvery();
  return async (address, path, body, timeoutMs = 2000) => {
    const full = `/cluster/peer/${path}`;
    const bytes = enc.encode(JSON.stringify(body));
    const headers = await signedHeaders(key, me, "POST", full, bytes, Date.now());
    let res: Response;
    try {
      res = await fetch(`http://${address}${full}`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: bytes,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (e) {
      throw new PeerError("unreachable", `${address} unreachable: ${(e as Error).message.split("\n")[0]}`);
    }
    if (res.status === 403 && res.headers.get(H.refusal)) {
      const text = new TextDecoder().decode((await readBounded(res, 64 * 1024)) ?? new Uint8Array());
      let why = res.headers.get(H.refusal);
      try {
        why = JSON.parse(text)?.error?.message ?? why;
      } catch { /* the reason header says enough */ }
      if (warned.due(`${address}/${res.headers.get(H.refusal)}`)) {
        log.warn("peer {address} refused us: {why}", { address, why });
      }
      throw new PeerError("refused", `${address} refused: ${why}`, 403);
    }
    if (!res.ok) {
      const text = new TextDecoder().decode((await readBounded(res, 64 * 1024)) ?? new Uint8Array());
      throw new PeerError(
        "failed",
        `${address}${full} answered ${res.status}: ${text.slice(0, 200)}`,
        res.status,
      );
    }
    const answer = await readBounded(res, PEER_ANSWER_LIMIT);
    if (answer === null) {
      throw new PeerError("failed", `${address}${full} answered more than ${PEER_ANSWER_LIMIT} bytes`);
    }
    if (!(await verifyAnswer(key, headers[H.signature], res.headers, answer))) {
      if (warned.due(`${address}/answer`)) {
        log.warn("{address} answered without our cluster key's signature; ignoring it", { address });
      }
      throw new PeerError("refused", `${address} answered without our cluster key's signature`);
    }
    try {
      return JSON.parse(new TextDecoder().decode(answer));
    } catch {
      throw new PeerError("failed", `${address}${full} answered something that is not JSON`);
    }
  };
}

export const localIdentity = (nodeId: string, namespace: string): PeerIdentity => ({
  nodeId,
  namespace,
  version: VERSION,
});
