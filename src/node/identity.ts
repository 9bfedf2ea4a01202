/**
 * This node's stable identity: an Ed25519 key kept in the data dir, whose libp2p-style PeerId
 * (`12D3KooW…`) is the node id. Upstream makes a new id at every start; ours stays, so history and
 * exclusion lists keep their meaning across restarts.
 */
const B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

export function base58btc(bytes: Uint8Array): string {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = "";
  while (n > 0n) {
    out = B58[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = "1" + out;
  }
  return out;
}

/** libp2p PeerId of an Ed25519 public key: identity multihash of the protobuf-encoded key. */
export function peerIdFromEd25519(publicKey: Uint8Array): string {
  if (publicKey.length !== 32) throw new Error("an Ed25519 public key is 32 bytes");
  const proto = new Uint8Array([0x08, 0x01, 0x12, 0x20, ...publicKey]); // KeyType=Ed25519, Data=key
  return base58btc(new Uint8Array([0x00, proto.length, ...proto])); // multihash: identity, length
}

export interface NodeIdentity {
  nodeId: string;
  publicKey: Uint8Array;
  /** True when this start created the key (a new node). */
  created: boolean;
}

interface KeyFile {
  version: 1;
  privateKeyPkcs8: string;
  publicKey: string;
}

const b64 = (b: Uint8Array) => btoa(String.fromCharCode(...b));
const unb64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

export async function loadOrCreateIdentity(dataDir: string): Promise<NodeIdentity> {
  const path = `${dataDir}/node_key.json`;
  try {
    const file = JSON.parse(await Deno.readTextFile(path)) as KeyFile;
    const publicKey = unb64(file.publicKey);
    return { nodeId: peerIdFromEd25519(publicKey), publicKey, created: false };
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) {
      throw new Error(
        `${path} is unreadable (${(e as Error).message}); move it away to give this node a new id`,
      );
    }
  }
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const publicKey = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  const file: KeyFile = { version: 1, privateKeyPkcs8: b64(pkcs8), publicKey: b64(publicKey) };
  await Deno.mkdir(dataDir, { recursive: true });
  // Written aside and renamed so a crash never leaves a half-written key.
  await Deno.writeTextFile(`${path}.tmp`, JSON.stringify(file), { mode: 0o600 });
  await Deno.rename(`${path}.tmp`, path);
  return { nodeId: peerIdFromEd25519(publicKey), publicKey, created: true };
}
