import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GgufReadError, readGgufFacts } from "../../src/models/gguf/reader.ts";
import { GgmlType, gguf, writeGguf } from "../../src/dev/gguf/writer.ts";
import { tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";

const dir = tempDir("gguf-reader-");
let model: string;
let bigHeader: string;

/** A loopback file server: honours single `bytes=a-b` ranges unless told to ignore them; counts requests. */
function serveFiles(opts: { ignoreRange?: boolean; overSend?: boolean } = {}) {
  const ranges: string[] = [];
  const ac = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, signal: ac.signal, onListen: () => {} },
    async (req) => {
      const path = `${dir}${new URL(req.url).pathname}`;
      let bytes: Uint8Array<ArrayBuffer>;
      try {
        bytes = await Deno.readFile(path);
      } catch {
        return new Response("not found", { status: 404 });
      }
      const range = req.headers.get("range");
      if (!range || opts.ignoreRange) return new Response(bytes);
      ranges.push(range);
      const m = range.match(/^bytes=(\d+)-(\d+)$/);
      if (!m) return new Response("bad range", { status: 416 });
      const start = Number(m[1]);
      // A hostile server: answers 206 but sends the whole rest of the file, whatever the range asked.
      const end = opts.overSend ? bytes.length - 1 : Math.min(Number(m[2]), bytes.length - 1);
      if (start >= bytes.length) {
        return new Response(null, {
          status: 416,
          headers: { "content-range": `bytes */${bytes.length}` },
        });
      }
      return new Response(bytes.slice(start, end + 1), {
        status: 206,
        headers: { "content-range": `bytes ${start}-${end}/${bytes.length}`, "accept-ranges": "bytes" },
      });
    },
  );
  const url = `http://127.0.0.1:${server.addr.port}`;
  return { url, ranges, close: async () => (ac.abort(), await server.finished) };
}

beforeAll(async () => {
  model = await tinyModel({ layers: 3, seed: 21 });
  // A header larger than the parser's 2 MB first chunk, so a remote read needs several ranges.
  bigHeader = `${dir}/big-header.gguf`;
  await writeGguf(bigHeader, {
    "general.architecture": gguf.str("llama"),
    "llama.block_count": gguf.u32(2),
    "llama.embedding_length": gguf.u32(8),
    "llama.context_length": gguf.u32(512),
    "llama.attention.head_count": gguf.u32(2),
    "padding.strings": gguf.strings(
      Array.from({ length: 150_000 }, (_, i) => `token-${i}-${"x".repeat(20)}`),
    ),
  }, [{ name: "w", dims: [8, 3], type: GgmlType.F32, data: new Uint8Array(96) }]);
});
afterAll(() => Deno.removeSync(dir, { recursive: true }));

describe("readGgufFacts", () => {
  it("reads the tiny model's shape, context, file type and tensor bytes from a local file", async () => {
    const f = await readGgufFacts(model);
    const size = Deno.statSync(model).size;
    expect(f).toMatchObject({
      architecture: "llama",
      blockCount: 3,
      embeddingLength: 64,
      headCount: 4,
      headCountKv: 2,
      headDim: 16,
      feedForwardLength: 192,
      contextLength: 4096,
      vocabSize: 32000,
      fileType: 1,
      fileTypeName: "F16",
      hasChatTemplate: true,
      tensorCount: 3 * 9 + 2,
      fileBytes: size,
    });
    // F16 matrices + F32 norms: 2 bytes a weight for matrices, 4 for the norm vectors.
    const norms = (3 * 2 + 1) * 64;
    expect(f.parameterCount).toBe(32000 * 64 + 3 * (64 * 64 * 2 + 64 * 32 * 2 + 64 * 192 * 3) + norms);
    expect(f.tensorBytes).toBe((f.parameterCount - norms) * 2 + norms * 4);
    expect(f.dataOffset % 32).toBe(0);
    // The data section holds every tensor (plus alignment padding only).
    expect(size - f.dataOffset - f.tensorBytes).toBeGreaterThanOrEqual(0);
    expect(size - f.dataOffset - f.tensorBytes).toBeLessThan(32 * f.tensorCount);
  });

  it("reads the same facts from a URL through HTTP Range requests", async () => {
    const srv = serveFiles();
    try {
      const name = model.split("/").at(-1)!;
      Deno.copyFileSync(model, `${dir}/${name}`);
      const remote = await readGgufFacts(`${srv.url}/${name}`);
      expect(remote).toEqual(await readGgufFacts(model));
      expect(srv.ranges[0]).toMatch(/^bytes=0-\d+$/);
      // Only the header was asked for, not the weights.
      expect(srv.ranges).toHaveLength(1);

      const big = await readGgufFacts(`${srv.url}/big-header.gguf`);
      expect(big).toMatchObject({
        blockCount: 2,
        tensorCount: 1,
        tensorBytes: 96,
        fileBytes: Deno.statSync(bigHeader).size,
      });
      expect(srv.ranges.length).toBeGreaterThan(2);
    } finally {
      await srv.close();
    }
  });

  it("says what is wrong with a URL that errors or ignores Range", async () => {
    const srv = serveFiles();
    const plain = serveFiles({ ignoreRange: true });
    try {
      await expect(readGgufFacts(`${srv.url}/missing.gguf`)).rejects.toThrow(/missing\.gguf answered 404/);
      await expect(readGgufFacts(`${plain.url}/big-header.gguf`)).rejects.toThrow(
        /ignored the HTTP Range request \(answered 200/,
      );
    } finally {
      await srv.close();
      await plain.close();
    }
    await expect(readGgufFacts(`${srv.url}/gone.gguf`)).rejects.toThrow(GgufReadError);
  });

  it("bounds a remote header: the bytes fetched in all, and each range to what it asked for", async () => {
    const srv = serveFiles();
    const hostile = serveFiles({ overSend: true });
    try {
      let read = 0;
      const facts = await readGgufFacts(`${srv.url}/big-header.gguf`, { onRead: (n) => (read += n) });
      // Grown 2 MB at a time until parsed: the whole header and no more than one range beyond it.
      expect(read).toBeGreaterThanOrEqual(facts.dataOffset);
      expect(read).toBeLessThan(facts.dataOffset + 2_000_001);
      await expect(readGgufFacts(`${srv.url}/big-header.gguf`, { maxBytes: 3_000_000 })).rejects.toThrow(
        /big-header\.gguf is not parsed after 3000000 bytes \(the bound\)/,
      );
      await expect(readGgufFacts(`${hostile.url}/big-header.gguf`)).rejects.toThrow(
        /sent more than the 2000000 bytes its Range asked for/,
      );
    } finally {
      await srv.close();
      await hostile.close();
    }
  });

  it("refuses a missing path, a directory and a file that is not GGUF", async () => {
    await expect(readGgufFacts(`${dir}/nope.gguf`)).rejects.toThrow(`no file at ${dir}/nope.gguf`);
    await expect(readGgufFacts(dir)).rejects.toThrow(`${dir} is not a file`);
    Deno.writeTextFileSync(`${dir}/notes.txt`, "hello, this is not a model\n".repeat(100));
    await expect(readGgufFacts(`${dir}/notes.txt`)).rejects.toThrow(/notes\.txt is not a readable GGUF file/);
    Deno.writeFileSync(`${dir}/empty.gguf`, new Uint8Array());
    await expect(readGgufFacts(`${dir}/empty.gguf`)).rejects.toThrow(GgufReadError);
  });

  it("refuses a GGUF without the architecture's shape", async () => {
    const path = `${dir}/no-shape.gguf`;
    await writeGguf(path, { "general.architecture": gguf.str("llama") }, []);
    await expect(readGgufFacts(path)).rejects.toThrow("GGUF header has no llama.block_count");
  });
});
