/**
 * Where the cluster key comes from: an explicit secret, a join token, the data dir's `cluster.json`, one
 * generated for a node with an API key, or (zero-config LAN) none. Also the join token's wire form.
 */
import { z } from "zod";
import { logger } from "../log/mod.ts";

const log = logger("cluster");

export const CLUSTER_FILE = "cluster.json";
const TOKEN_PREFIX = "skulk-join1.";
const ADDRESS = /^[^\s:/]+:\d{1,5}$/;

/** What a join token carries: enough for another node to hold the same key and find this one. */
export const JoinTokenSchema = z.object({
  secret: z.string().min(32, "the secret in a join token is at least 32 characters"),
  namespace: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
  address: z.string().regex(ADDRESS, "the address in a join token is host:port"),
}).strict();
export type JoinToken = z.infer<typeof JoinTokenSchema>;

/** The data dir's record: the secret this node holds (null when it uses an explicit or derived one). */
const ClusterFileSchema = z.object({
  version: z.literal(1),
  secret: z.string().min(32).nullable(),
  /** The namespace the node last ran with (what a token carries). */
  namespace: z.string(),
  /** The namespace of the token this node joined with: kept, so later starts need no token. */
  joinedNamespace: z.string().nullable(),
  /** Peers from join tokens, added to the configured ones at every start. */
  peers: z.array(z.string().regex(ADDRESS)),
  /** This node's API address at its last start, for `skulk cluster token` with the daemon stopped. */
  apiAddress: z.string().nullable(),
}).strict();
export type ClusterFile = z.infer<typeof ClusterFileSchema>;

const b64url = (b: Uint8Array) =>
  btoa(String.fromCharCode(...b)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
const unb64url = (s: string) => atob(s.replaceAll("-", "+").replaceAll("_", "/"));

/** 32 random bytes, base64url: 256 bits no one can derive from anything the node shows. */
export function generateSecret(): string {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

export function encodeJoinToken(t: JoinToken): string {
  return TOKEN_PREFIX + b64url(new TextEncoder().encode(JSON.stringify(JoinTokenSchema.parse(t))));
}

/** Parses a token; throws an Error saying what is wrong (never echoing the token, which holds a secret). */
export function decodeJoinToken(token: string): JoinToken {
  const t = token.trim();
  if (!t.startsWith(TOKEN_PREFIX)) {
    throw new Error(`a join token starts with '${TOKEN_PREFIX}'; print one with 'skulk cluster token'`);
  }
  let raw: unknown;
  try {
    const bin = unb64url(t.slice(TOKEN_PREFIX.length));
    raw = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
  } catch {
    throw new Error("the join token is damaged (not base64url JSON); copy it again whole");
  }
  const parsed = JoinTokenSchema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`the join token is damaged: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  }
  return parsed.data;
}

export function readClusterFile(dataDir: string): ClusterFile | null {
  const path = `${dataDir}/${CLUSTER_FILE}`;
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw new TrustError(`${path} is unreadable (${(e as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = null;
  }
  const parsed = ClusterFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new TrustError(`${path} is damaged; move it away (the node then decides its cluster key afresh)`);
  }
  return parsed.data;
}

/** Written aside and renamed, mode 0600 from creation: the secret is never readable by others, even briefly. */
export function writeClusterFile(dataDir: string, file: ClusterFile): void {
  const path = `${dataDir}/${CLUSTER_FILE}`;
  const tmp = `${path}.tmp`;
  try {
    Deno.removeSync(tmp);
  } catch { /* none left over */ }
  Deno.writeTextFileSync(tmp, JSON.stringify(ClusterFileSchema.parse(file)), {
    mode: 0o600,
    createNew: true,
  });
  Deno.chmodSync(tmp, 0o600); // the umask may have narrowed it further, never widened; make it exact
  Deno.renameSync(tmp, path);
}

export interface TrustInputs {
  /** SKULK_CLUSTER_SECRET / cluster.secret. */
  secret: string | null;
  apiKey: string | null;
  join: JoinToken | null;
  namespace: string;
  peers: string[];
  stored: ClusterFile | null;
}

export type TrustOrigin = "explicit" | "joined" | "stored" | "generated" | "derived";

export interface Trust {
  /** The secret the cluster key is made from; null means the namespace-derived (public) key. */
  secret: string | null;
  namespace: string;
  peers: string[];
  origin: TrustOrigin;
  /** What to keep in the data dir (apiAddress filled in by the caller). */
  file: ClusterFile;
}

const DEFAULT_NAMESPACE = "default";

/** Pure: why a token cannot be used with the configured namespace, or null. */
export function joinConflict(join: JoinToken, namespace: string): string | null {
  if (namespace === DEFAULT_NAMESPACE || namespace === join.namespace) return null;
  return `the join token is for namespace '${join.namespace}' but this node is configured with '${namespace}'; drop --namespace or use a token of that namespace`;
}

/**
 * Pure: the cluster's secret, namespace and static peers from the settings and the data dir. An explicit
 * secret wins; then a join token; then the stored secret; then a new one when an API key protects the node;
 * else the derived key. A namespace set in the config wins over a joined one; a token's must agree with it.
 */
export function decideTrust(i: TrustInputs, generate: () => string = generateSecret): Trust {
  const conflict = i.join && joinConflict(i.join, i.namespace);
  if (conflict) throw new TrustError(conflict);
  const configured = i.namespace !== DEFAULT_NAMESPACE ? i.namespace : null;
  const joinedNamespace = i.join?.namespace ?? i.stored?.joinedNamespace ?? null;
  const namespace = i.join?.namespace ?? configured ?? joinedNamespace ?? DEFAULT_NAMESPACE;
  const peers = [
    ...new Set([...i.peers, ...(i.stored?.peers ?? []), ...(i.join ? [i.join.address] : [])]),
  ];
  const keptPeers = [...new Set([...(i.stored?.peers ?? []), ...(i.join ? [i.join.address] : [])])];
  const file = (secret: string | null): ClusterFile => ({
    version: 1,
    secret,
    namespace,
    joinedNamespace,
    peers: keptPeers,
    apiAddress: i.stored?.apiAddress ?? null,
  });
  if (i.secret) {
    return { secret: i.secret, namespace, peers, origin: "explicit", file: file(i.stored?.secret ?? null) };
  }
  if (i.join) return { secret: i.join.secret, namespace, peers, origin: "joined", file: file(i.join.secret) };
  if (i.stored?.secret) {
    return { secret: i.stored.secret, namespace, peers, origin: "stored", file: file(i.stored.secret) };
  }
  if (i.apiKey) {
    const secret = generate();
    return { secret, namespace, peers, origin: "generated", file: file(secret) };
  }
  return { secret: null, namespace, peers, origin: "derived", file: file(null) };
}

export class TrustError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TrustError";
  }
}

/** The imperative shell around decideTrust: reads and writes the data dir, logs how other nodes join. */
export function settleTrust(
  dataDir: string,
  inputs: Omit<TrustInputs, "stored">,
  apiAddress: string | null,
): Trust {
  const stored = readClusterFile(dataDir);
  const trust = decideTrust({ ...inputs, stored });
  writeClusterFile(dataDir, { ...trust.file, apiAddress: apiAddress ?? trust.file.apiAddress });
  const join = `skulk run --join "$(skulk cluster token --data-dir ${dataDir})"`;
  switch (trust.origin) {
    case "generated":
      log.info(
        "generated this cluster's secret in {path} (the API key is set, so peers need a secret no one can derive); other nodes join with: {join}",
        { path: `${dataDir}/${CLUSTER_FILE}`, join },
      );
      break;
    case "joined":
      log.info(
        "joined namespace {namespace} through {address} with a join token; the secret is kept in {path}",
        {
          namespace: trust.namespace,
          address: inputs.join!.address,
          path: `${dataDir}/${CLUSTER_FILE}`,
        },
      );
      break;
    case "stored":
      log.info("cluster secret from {path}; other nodes join with: {join}", {
        path: `${dataDir}/${CLUSTER_FILE}`,
        join,
      });
      break;
    case "derived":
      log.info(
        "no API key and no cluster secret: peers are trusted by namespace alone (anyone on this LAN can join); set SKULK_API_KEY to protect the node and its cluster",
      );
      break;
    case "explicit":
      break;
  }
  return trust;
}
