/**
 * The sha256 downloads are checked with: OpenSSL's libcrypto through FFI where Linux has it (it uses the CPU's
 * SHA extensions: measured 2-3x node:crypto here, the largest CPU cost of a download), else node:crypto.
 */
import { createHash } from "node:crypto";

export interface Sha256 {
  update(data: Uint8Array): void;
  /** Lowercase hex; the hash cannot be updated afterwards. */
  digest(): string;
}

const SYMBOLS = {
  EVP_MD_CTX_new: { parameters: [], result: "pointer" },
  EVP_MD_CTX_free: { parameters: ["pointer"], result: "void" },
  EVP_sha256: { parameters: [], result: "pointer" },
  EVP_DigestInit_ex: { parameters: ["pointer", "pointer", "pointer"], result: "i32" },
  EVP_DigestUpdate: { parameters: ["pointer", "buffer", "usize"], result: "i32" },
  EVP_DigestFinal_ex: { parameters: ["pointer", "buffer", "pointer"], result: "i32" },
} as const;

type Lib = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let lib: Lib | null | undefined;

/** libcrypto, once per thread; null where it is absent or FFI is not allowed (node:crypto is used then). */
function libcrypto(): Lib | null {
  if (lib !== undefined) return lib;
  lib = null;
  // macOS aborts a process that loads its system libcrypto; only Linux is tried.
  if (Deno.build.os !== "linux" || Deno.env.get("SKULK_SHA256") === "node") return lib;
  for (const name of ["libcrypto.so.3", "libcrypto.so"]) {
    try {
      lib = Deno.dlopen(name, SYMBOLS).symbols;
      break;
    } catch { /* next name, or none */ }
  }
  return lib;
}

// A hash dropped before its digest (a failed download) still frees its OpenSSL context.
const contexts = new FinalizationRegistry<{ s: Lib; ctx: Deno.PointerObject }>(({ s, ctx }) =>
  s.EVP_MD_CTX_free(ctx)
);

class OpenSslSha256 implements Sha256 {
  #ctx: Deno.PointerValue;

  constructor(private readonly s: Lib) {
    const ctx = s.EVP_MD_CTX_new();
    if (ctx === null) throw new Error("libcrypto could not allocate a sha256 context");
    this.#ctx = ctx;
    contexts.register(this, { s, ctx }, this);
    if (s.EVP_DigestInit_ex(ctx, s.EVP_sha256(), null) !== 1) {
      throw new Error("libcrypto could not start a sha256");
    }
  }

  update(data: Uint8Array): void {
    if (this.#ctx === null) throw new Error("sha256 already digested");
    if (data.length === 0) return;
    if (this.s.EVP_DigestUpdate(this.#ctx, data, BigInt(data.length)) !== 1) {
      throw new Error("libcrypto sha256 update failed");
    }
  }

  digest(): string {
    if (this.#ctx === null) throw new Error("sha256 already digested");
    const out = new Uint8Array(32);
    const ok = this.s.EVP_DigestFinal_ex(this.#ctx, out, null) === 1;
    contexts.unregister(this);
    this.s.EVP_MD_CTX_free(this.#ctx);
    this.#ctx = null;
    if (!ok) throw new Error("libcrypto sha256 final failed");
    return Array.from(out, (b) => b.toString(16).padStart(2, "0")).join("");
  }
}

/** Which implementation createSha256 uses in this thread (the benchmark prints it). */
export function sha256Backend(): "openssl" | "node:crypto" {
  return libcrypto() ? "openssl" : "node:crypto";
}

export function createSha256(): Sha256 {
  const s = libcrypto();
  if (s) return new OpenSslSha256(s);
  const h = createHash("sha256");
  return { update: (d) => void h.update(d), digest: () => h.digest("hex") };
}
