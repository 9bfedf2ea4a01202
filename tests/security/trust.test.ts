/**
 * The pure parts of the cluster's trust: which secret and namespace a node uses (decideTrust), the join
 * token's wire form, and the API key comparison.
 */
import { describe, expect, it } from "vitest";
import { keyMatches } from "../../src/api/auth.ts";
import {
  type ClusterFile,
  decideTrust,
  decodeJoinToken,
  encodeJoinToken,
  generateSecret,
  type TrustInputs,
} from "../../src/cluster/secret.ts";

const SECRET = "s".repeat(43);
const token = { secret: "t".repeat(43), namespace: "lab", address: "10.0.0.2:52415" };
const none: TrustInputs = {
  secret: null,
  apiKey: null,
  join: null,
  namespace: "default",
  peers: [],
  stored: null,
};
const stored = (o: Partial<ClusterFile> = {}): ClusterFile => ({
  version: 1,
  secret: SECRET,
  namespace: "default",
  joinedNamespace: null,
  peers: [],
  apiAddress: "10.0.0.1:52415",
  ...o,
});

describe("decideTrust", () => {
  const generate = () => "g".repeat(43);
  const cases: {
    name: string;
    in: Partial<TrustInputs>;
    origin: string;
    secret: string | null;
    ns: string;
  }[] = [
    { name: "zero-config: derived key", in: {}, origin: "derived", secret: null, ns: "default" },
    {
      name: "API key, nothing stored: generated",
      in: { apiKey: "k".repeat(16) },
      origin: "generated",
      secret: "g".repeat(43),
      ns: "default",
    },
    {
      name: "API key, stored: reused",
      in: { apiKey: "k".repeat(16), stored: stored() },
      origin: "stored",
      secret: SECRET,
      ns: "default",
    },
    {
      name: "stored without an API key (joined earlier): reused",
      in: { stored: stored() },
      origin: "stored",
      secret: SECRET,
      ns: "default",
    },
    {
      name: "explicit wins over stored and token",
      in: { secret: "explicit-secret", stored: stored(), join: token },
      origin: "explicit",
      secret: "explicit-secret",
      ns: "lab",
    },
    {
      name: "token wins over stored",
      in: { join: token, stored: stored() },
      origin: "joined",
      secret: token.secret,
      ns: "lab",
    },
    {
      name: "a joined namespace is kept",
      in: { stored: stored({ joinedNamespace: "lab" }) },
      origin: "stored",
      secret: SECRET,
      ns: "lab",
    },
    {
      name: "a configured namespace wins over a joined one",
      in: { namespace: "mine", stored: stored({ joinedNamespace: "lab" }) },
      origin: "stored",
      secret: SECRET,
      ns: "mine",
    },
    {
      name: "a namespace the node merely ran with is not sticky",
      in: { stored: stored({ namespace: "old" }) },
      origin: "stored",
      secret: SECRET,
      ns: "default",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const t = decideTrust({ ...none, ...c.in }, generate);
      expect([t.origin, t.secret, t.namespace]).toEqual([c.origin, c.secret, c.ns]);
    });
  }
  it("keeps the token's peer for later starts and adds it to the configured ones", () => {
    const t = decideTrust({ ...none, peers: ["10.0.0.9:1"], join: token });
    expect(t.peers).toEqual(["10.0.0.9:1", "10.0.0.2:52415"]);
    expect(t.file).toMatchObject({ secret: token.secret, joinedNamespace: "lab", peers: ["10.0.0.2:52415"] });
  });
  it("refuses a token whose namespace contradicts the configured one", () => {
    expect(() => decideTrust({ ...none, namespace: "other", join: token })).toThrow(
      /namespace 'lab'.*'other'/,
    );
  });
  it("generates 32 random bytes, different every time", () => {
    const [a, b] = [generateSecret(), generateSecret()];
    expect(a).not.toBe(b);
    expect(atob(a.replaceAll("-", "+").replaceAll("_", "/")).length).toBe(32);
  });
});

describe("join tokens", () => {
  it("round-trip", () => {
    expect(decodeJoinToken(encodeJoinToken(token))).toEqual(token);
  });
  it("refuse damage without echoing the token", () => {
    const t = encodeJoinToken(token);
    for (const bad of ["nope", `${t.slice(0, 20)}!!`, t.slice(0, t.length - 10), "skulk-join1.e30"]) {
      let message = "";
      try {
        decodeJoinToken(bad);
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message, bad).toMatch(/join token/);
      expect(message).not.toContain(token.secret);
      expect(message).not.toContain(bad.slice(12, 30) || "never");
    }
  });
});

describe("keyMatches", () => {
  it("accepts the key and nothing else, whatever the lengths", () => {
    const key = "the-api-key-0123456789";
    expect(keyMatches(key, key)).toBe(true);
    for (const other of ["", "the-api-key", `${key}x`, "the-api-key-0123456780", "x".repeat(10_000)]) {
      expect(keyMatches(other, key), other.slice(0, 30)).toBe(false);
    }
  });
});
