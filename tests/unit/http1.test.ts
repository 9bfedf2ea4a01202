/**
 * The downloads' HTTP/1.1 client against real loopback sockets that answer with crafted bytes: heads, chunked
 * framing split at awkward places, short bodies, redirects across origins, aborts, and TLS with a test CA.
 */
import { afterEach, describe, expect, it } from "vitest";
import { concatBytes } from "../../src/audio/bytes.ts";
import { httpGet, parseHead, rawHttpUsable, type RawResponse } from "../../src/downloads/http1.ts";
import { tempDir } from "../helpers/daemon.ts";

const enc = new TextEncoder();
const closers: (() => void)[] = [];
afterEach(() => closers.splice(0).forEach((c) => c()));

interface Seen {
  head: string;
}

/**
 * A server on loopback that reads one request head per connection and writes `reply` in the pieces given, with
 * a pause between them (so the client sees them in separate reads), then ends the connection gracefully.
 */
function server(reply: (seen: Seen) => (Uint8Array | string)[], listener?: Deno.Listener): {
  url: string;
  seen: Seen[];
} {
  const l = listener ?? Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const seen: Seen[] = [];
  closers.push(() => l.close());
  (async () => {
    for await (const conn of l) {
      (async () => {
        const buf = new Uint8Array(8192);
        let text = "";
        while (!text.includes("\r\n\r\n")) {
          const n = await conn.read(buf).catch(() => null);
          if (n === null) return conn.close();
          text += new TextDecoder().decode(buf.subarray(0, n));
        }
        const s = { head: text.split("\r\n\r\n")[0] };
        seen.push(s);
        try {
          for (const piece of reply(s)) {
            const bytes = typeof piece === "string" ? enc.encode(piece) : piece;
            for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
            await new Promise((r) => setTimeout(r, 5));
          }
          // A graceful end (TLS close_notify, TCP FIN) after everything written, before the socket goes.
          await conn.closeWrite();
          await conn.read(buf).catch(() => null);
        } catch { /* the client hung up */ }
        try {
          conn.close();
        } catch { /* closed */ }
      })();
    }
  })().catch(() => {});
  const addr = l.addr as Deno.NetAddr;
  return { url: `http://127.0.0.1:${addr.port}`, seen };
}

async function readAll(res: RawResponse): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (;;) {
    const { done, value } = await res.body.read();
    if (done) break;
    parts.push(value!.slice());
  }
  return concatBytes(parts);
}

function random(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let off = 0; off < n; off += 65536) crypto.getRandomValues(b.subarray(off, Math.min(n, off + 65536)));
  // CR LF pairs inside the data must not be taken for framing.
  b.set([13, 10, 13, 10, 48, 13, 10], 100);
  return b;
}

describe("parseHead", () => {
  it("reads the status and repeated headers, and refuses what is not HTTP/1.x", () => {
    const h = parseHead("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 5-9/10\r\nX-A: 1\r\nX-A: 2");
    expect(h.status).toBe(206);
    expect(h.headers.get("content-range")).toBe("bytes 5-9/10");
    expect(h.headers.get("x-a")).toBe("1, 2");
    expect(parseHead("HTTP/1.0 200").status).toBe(200);
    expect(() => parseHead("SSH-2.0-OpenSSH")).toThrow(/not an HTTP\/1.x response/);
    expect(() => parseHead("HTTP/1.1 200 OK\r\nno colon here")).toThrow(/malformed response header/);
  });
});

describe("httpGet over loopback", () => {
  it("reads a Content-Length body sent in pieces, the head and first bytes in one write, and sends our headers", async () => {
    const body = random(300_000);
    const s = server(() => [
      new Uint8Array([
        ...enc.encode(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`),
        ...body.subarray(0, 10),
      ]),
      body.subarray(10, 150_000),
      body.subarray(150_000),
    ]);
    const res = await httpGet(
      `${s.url}/a/b?c=d`,
      new Headers({ range: "bytes=0-", authorization: "Bearer t" }),
    );
    expect(res.status).toBe(200);
    expect(await readAll(res)).toEqual(body);
    const head = s.seen[0].head.toLowerCase();
    expect(head).toMatch(/^get \/a\/b\?c=d http\/1\.1/);
    expect(head).toContain("range: bytes=0-");
    expect(head).toContain("authorization: bearer t");
    expect(head).toContain("accept-encoding: identity");
  });

  it("decodes a chunked body whose framing is split across reads", async () => {
    const body = random(70_000);
    const a = body.subarray(0, 40_000);
    const b = body.subarray(40_000);
    const s = server(() => [
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
      `${a.length.toString(16)}\r`,
      new Uint8Array([10, ...a.subarray(0, 7)]),
      a.subarray(7),
      `\r\n${b.length.toString(16)};ext=1\r\n`,
      b,
      "\r\n0\r\nX-Trailer: x\r\n",
      "\r\n",
    ]);
    expect(await readAll(await httpGet(s.url, new Headers()))).toEqual(body);
  });

  it("reads a close-delimited body to the end", async () => {
    const body = random(50_000);
    const s = server(() => ["HTTP/1.0 200 OK\r\n\r\n", body]);
    expect(await readAll(await httpGet(s.url, new Headers()))).toEqual(body);
  });

  it("fails a body cut short of its Content-Length, naming what is missing", async () => {
    const s = server(() => ["HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", "x".repeat(400)]);
    const res = await httpGet(s.url, new Headers());
    await expect(readAll(res)).rejects.toThrow(/600 bytes of the body still to come/);
  });

  it("refuses a malformed Content-Length", async () => {
    const s = server(() => ["HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\nxx"]);
    await expect(httpGet(s.url, new Headers())).rejects.toThrow(/bad content-length lots/);
  });

  it("follows redirects, dropping Authorization when the origin changes", async () => {
    const target = server(() => ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]);
    const sameOrigin = server((seen) =>
      seen.head.startsWith("GET /start")
        ? ["HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 0\r\n\r\n"]
        : [`HTTP/1.1 307 Temporary Redirect\r\nLocation: ${target.url}/cdn/file\r\n\r\n`]
    );
    const res = await httpGet(`${sameOrigin.url}/start`, new Headers({ authorization: "Bearer secret" }));
    expect(res.status).toBe(200);
    expect(new TextDecoder().decode(await readAll(res))).toBe("ok");
    expect(res.url).toBe(`${target.url}/cdn/file`);
    expect(sameOrigin.seen.map((x) => x.head.split("\r\n")[0])).toEqual([
      "GET /start HTTP/1.1",
      "GET /moved HTTP/1.1",
    ]);
    expect(sameOrigin.seen[1].head.toLowerCase()).toContain("authorization: bearer secret");
    expect(target.seen[0].head.toLowerCase()).not.toContain("authorization");
  });

  it("stops at a redirect loop", async () => {
    const s = server(() => ["HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n"]);
    await expect(httpGet(s.url, new Headers())).rejects.toThrow(/more than 10 redirects/);
  });

  it("an abort closes the connection mid-body; a cancel ends a pending read as done", async () => {
    const s = server(() => ["HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n", "x".repeat(1000)]);
    const ac = new AbortController();
    const res = await httpGet(s.url, new Headers(), ac.signal);
    expect((await res.body.read()).done).toBe(false);
    const pending = res.body.read();
    ac.abort(new Error("stop"));
    await expect(pending).rejects.toThrow();
    const again = await httpGet(s.url, new Headers());
    await again.body.read();
    const waiting = again.body.read();
    again.body.cancel();
    expect((await waiting).done).toBe(true);
  });

  it("speaks TLS to an https server (a CA made for the test)", async (t) => {
    const dir = tempDir("http1-tls-");
    closers.push(() => Deno.removeSync(dir, { recursive: true }));
    const openssl = (...args: string[]) =>
      new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "null" }).outputSync().success;
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    Deno.writeTextFileSync(`${dir}/leaf.ext`, "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n");
    let made = false;
    try {
      made = openssl(
        "req",
        "-x509",
        ...ec,
        "-days",
        "1",
        "-subj",
        "/CN=skulk test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
      ) &&
        openssl("req", ...ec, "-subj", "/CN=localhost", "-keyout", "key.pem", "-out", "leaf.csr") &&
        openssl(
          "x509",
          "-req",
          "-in",
          "leaf.csr",
          "-CA",
          "ca.pem",
          "-CAkey",
          "ca.key",
          "-CAcreateserial",
          "-days",
          "1",
          "-extfile",
          "leaf.ext",
          "-out",
          "cert.pem",
        );
    } catch { /* no openssl binary */ }
    if (!made) return t.skip(); // the openssl command line is needed to make the certificates
    const body = random(200_000);
    const l = Deno.listenTls({
      hostname: "127.0.0.1",
      port: 0,
      cert: Deno.readTextFileSync(`${dir}/cert.pem`),
      key: Deno.readTextFileSync(`${dir}/key.pem`),
    });
    const s = server(() => [`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`, body], l);
    const url = s.url.replace("http://127.0.0.1", "https://localhost");
    const res = await httpGet(url, new Headers(), undefined, [Deno.readTextFileSync(`${dir}/ca.pem`)]);
    expect(await readAll(res)).toEqual(body);
    // Without the test CA the certificate is refused, as fetch would refuse it.
    await expect(httpGet(url, new Headers())).rejects.toThrow(/certificate/i);
  });
});

describe("rawHttpUsable", () => {
  it("leaves proxied setups, other schemes and an explicit opt-out to fetch", () => {
    expect(rawHttpUsable("https://huggingface.co/x", "auto", {})).toBe(true);
    expect(rawHttpUsable("http://127.0.0.1:1/x", "auto", {})).toBe(true);
    expect(rawHttpUsable("https://huggingface.co/x", "auto", { HTTPS_PROXY: "http://proxy:3128" })).toBe(
      false,
    );
    expect(rawHttpUsable("https://huggingface.co/x", "auto", { all_proxy: "socks5://p" })).toBe(false);
    expect(rawHttpUsable("file:///tmp/x", "auto", {})).toBe(false);
    expect(rawHttpUsable("https://huggingface.co/x", "fetch", {})).toBe(false);
  });
});
