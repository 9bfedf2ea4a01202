/**
 * Containment against real daemons with real data dirs: ids and paths from requests and from a hostile hub listing
 * never reach outside the models folder, bad ids are 400s and unknown ones 404s, and the node's data survives.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, skulk, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { waitFor } from "../helpers/multinode.ts";
import { queryReadOnly } from "../../src/store/readonly.ts";
import { fullShard } from "../../src/downloads/manager.ts";
import type { ModelCard } from "../../src/models/card.ts";
import { Catalog } from "../../src/models/catalog.ts";

/** A catalogue card with no pinned file: its download takes every file the hub lists. */
const VOICE = "csukuangfj/vits-piper-en_US-amy-medium";

interface RawResponse {
  status: number;
  body: string;
}

/**
 * One HTTP/1.1 request with the request line written as given: fetch and curl (without --path-as-is) resolve `.`,
 * `..` and `%2E%2E` segments before sending, an attacker does not.
 */
async function raw(port: number, method: string, target: string, body = ""): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const bytes = new TextEncoder().encode(body);
    const head = `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${bytes.length}\r\n\r\n`;
    const request = new Uint8Array([...new TextEncoder().encode(head), ...bytes]);
    for (let off = 0; off < request.length;) off += await conn.write(request.subarray(off));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(65536);
    const deadline = setTimeout(() => conn.close(), 15_000);
    try {
      for (let n = await conn.read(buf); n !== null; n = await conn.read(buf)) chunks.push(buf.slice(0, n));
    } finally {
      clearTimeout(deadline);
    }
    const text = new TextDecoder().decode(new Uint8Array(chunks.flatMap((c) => [...c])));
    const status = Number(text.match(/^HTTP\/1\.1 (\d{3})/)?.[1] ?? 0);
    const rest = text.slice(text.indexOf("\r\n\r\n") + 4);
    // Chunked or not, the JSON object is what the checks read.
    const json = rest.match(/\{[\s\S]*\}/)?.[0] ?? rest;
    return { status, body: json };
  } finally {
    try {
      conn.close();
    } catch { /* closed by the deadline */ }
  }
}

/** The node's own files are all there and its database is sound. */
async function expectIntact(d: Daemon, modelsDir: string): Promise<void> {
  for (
    const f of [`${d.dataDir}/skulk.db`, `${d.dataDir}/node_key.json`, modelsDir, `${modelsDir}/keep.txt`]
  ) {
    expect(Deno.statSync(f), f).toBeTruthy();
  }
  const { rows } = await queryReadOnly(`${d.dataDir}/skulk.db`, "PRAGMA integrity_check");
  expect(rows).toEqual([{ integrity_check: "ok" }]);
  // Still serving: the attack did not take the node down.
  expect((await fetch(`${d.url}/node_id`)).status).toBe(200);
}

function expect400(res: RawResponse, what: RegExp): void {
  expect(res.status, res.body).toBe(400);
  expect((JSON.parse(res.body) as { error: { message: string } }).error.message).toMatch(what);
}

let root: string;
let hub: FakeHub;
let plain: Daemon;
let custom: Daemon;
let customModels: string;
const escapeName = `escape-${crypto.randomUUID()}`;

beforeAll(async () => {
  root = tempDir("containment-");
  const repo = `${root}/hub`;
  Deno.mkdirSync(repo);
  Deno.writeTextFileSync(`${repo}/tokens.txt`, "a 1\n");
  Deno.writeTextFileSync(`${root}/payload`, "written by a hostile hub listing\n");
  hub = await startFakeHub({
    repos: { [VOICE]: repo },
    hostile: { [VOICE]: [{ path: `../../../${escapeName}`, file: `${root}/payload` }] },
  });
  const env = { HF_ENDPOINT: hub.url, SKULK_DOWNLOAD_RETRY_BASE_MS: "20" };
  const plainDir = `${root}/plain`;
  Deno.mkdirSync(`${plainDir}/models`, { recursive: true });
  Deno.writeTextFileSync(`${plainDir}/models/keep.txt`, "keep");
  // --models-dir inside a parent folder that holds something else worth keeping.
  customModels = `${root}/shared/models`;
  Deno.mkdirSync(customModels, { recursive: true });
  Deno.writeTextFileSync(`${customModels}/keep.txt`, "keep");
  Deno.writeTextFileSync(`${root}/shared/other.txt`, "not skulk's");
  // A model folder (with its manifest) whose subfolder is a link out of the models dir, there before the start.
  const trap = `${plainDir}/models/${VOICE.replace("/", "--")}`;
  Deno.mkdirSync(`${trap}/.skulk`, { recursive: true });
  Deno.mkdirSync(`${root}/trap-target`);
  Deno.writeTextFileSync(`${root}/trap-target/voice.onnx`, "outside");
  Deno.symlinkSync(`${root}/trap-target`, `${trap}/sub`);
  Deno.writeTextFileSync(
    `${trap}/.skulk/manifest.json`,
    JSON.stringify({
      modelId: VOICE,
      shardMetadata: fullShard(Catalog.bundled().get(VOICE)!),
      files: [{ path: "sub/voice.onnx", size: 7, sha256: null }],
      completedAt: new Date().toISOString(),
    }),
  );
  [plain, custom] = await Promise.all([
    startDaemon({ dataDir: plainDir, env, timeoutMs: 60_000 }),
    startDaemon({ dataDir: `${root}/custom`, env, args: ["--models-dir", customModels], timeoutMs: 60_000 }),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([plain?.kill(), custom?.kill()]);
  await hub?.close();
  Deno.removeSync(root, { recursive: true });
  try {
    Deno.removeSync(`${root}/../${escapeName}`);
  } catch { /* not written: the point */ }
});

describe("ids from request paths", () => {
  it("refuses DELETE /store/models/.. and /store/models/. (the data dir stays)", async () => {
    const models = `${plain.dataDir}/models`;
    expect400(await raw(plain.port, "DELETE", "/store/models/.."), /'\.' or '\.\.' part/);
    await expectIntact(plain, models);
    expect400(await raw(plain.port, "DELETE", "/store/models/."), /'\.' or '\.\.' part/);
    await expectIntact(plain, models);
    expect400(await raw(plain.port, "DELETE", "/store/models/..%2F.."), /'\.' or '\.\.' part/);
    expect400(await raw(plain.port, "DELETE", "/store/models/org/.."), /'\.' or '\.\.' part/);
    await expectIntact(plain, models);
  });

  it("refuses DELETE /download/<node>/%2E%2E and /download/<node>/..", async () => {
    const models = `${plain.dataDir}/models`;
    expect400(await raw(plain.port, "DELETE", `/download/${plain.nodeId}/%2E%2E`), /'\.' or '\.\.' part/);
    expect400(await raw(plain.port, "DELETE", `/download/${plain.nodeId}/..`), /'\.' or '\.\.' part/);
    await expectIntact(plain, models);
  });

  it("refuses /store/models/.. with --models-dir (its parent folder stays)", async () => {
    expect400(await raw(custom.port, "DELETE", "/store/models/.."), /'\.' or '\.\.' part/);
    expect(Deno.readTextFileSync(`${root}/shared/other.txt`)).toBe("not skulk's");
    await expectIntact(custom, customModels);
  });

  it("answers 400 naming the problem for NUL, over-long and absolute ids, 404 for unknown ones", async () => {
    const models = `${plain.dataDir}/models`;
    expect400(await raw(plain.port, "DELETE", "/store/models/a%00b"), /NUL or control character/);
    expect400(await raw(plain.port, "DELETE", `/store/models/${"a".repeat(8000)}`), /8000 characters long/);
    expect400(await raw(plain.port, "DELETE", "/store/models/a%5Cb"), /backslash/);
    expect400(await raw(plain.port, "DELETE", "/store/models/%2Fetc"), /absolute path/);
    expect400(await raw(plain.port, "GET", "/store/models/../download/status"), /'\.' or '\.\.' part/);
    expect400(await raw(plain.port, "POST", "/store/models/../download"), /'\.' or '\.\.' part/);
    expect400(await raw(plain.port, "DELETE", "/models/custom/.."), /'\.' or '\.\.' part/);
    const unknown = await raw(plain.port, "DELETE", "/store/models/nobody/nothing");
    expect(unknown.status, unknown.body).toBe(404);
    expect((await raw(plain.port, "DELETE", "/models/custom/nobody/nothing")).status).toBe(404);
    await expectIntact(plain, models);
  });

  it("names the problem with a malformed model_id in placement requests", async () => {
    const long = "a".repeat(8000);
    expect400(await raw(plain.port, "GET", `/instance/previews?model_id=a%00b`), /NUL or control character/);
    expect400(await raw(plain.port, "GET", `/instance/placement?model_id=${long}`), /8000 characters long/);
    expect400(
      await raw(plain.port, "POST", "/place_instance", JSON.stringify({ model_id: "../.." })),
      /'\.' or '\.\.' part/,
    );
    expect400(
      await raw(plain.port, "POST", "/place_instance", JSON.stringify({ model_id: "nobody/nothing" })),
      /unknown model nobody\/nothing/,
    );
    await expectIntact(plain, `${plain.dataDir}/models`);
  });

  it("refuses a gguf_file that leads out of the model's folder", async () => {
    const res = await raw(
      plain.port,
      "POST",
      `/store/models/${VOICE}/download`,
      JSON.stringify({ gguf_file: `../../../${escapeName}` }),
    );
    expect400(res, /'\.' or '\.\.' part/);
    await expectIntact(plain, `${plain.dataDir}/models`);
  });

  it("refuses a card in POST /download/start whose id or files lead out, or that names a local file", async () => {
    const card = Catalog.bundled().get(VOICE)!;
    const cases: [Partial<ModelCard>, RegExp][] = [
      [{ model_id: "../.." }, /model_id: has a '\.' or '\.\.' part/],
      [
        { model_id: "org/fresh", gguf_file: `../../../${escapeName}` },
        /gguf_file: has a '\.' or '\.\.' part/,
      ],
      [{ model_id: "org/fresh", gguf_path: "/etc/passwd" }, /names a local file/],
      [{ model_id: "org/fresh", mmproj_file: "/etc/passwd" }, /mmprojFile names a local file/],
    ];
    for (const [over, why] of cases) {
      const res = await fetch(`${plain.url}/download/start`, {
        method: "POST",
        body: JSON.stringify({ targetNodeId: plain.nodeId, shardMetadata: fullShard({ ...card, ...over }) }),
      });
      expect400({ status: res.status, body: await res.text() }, why);
    }
    await expectIntact(plain, `${plain.dataDir}/models`);
  });

  it("deletes only folders skulk wrote: a shared --models-dir keeps its other folders and files", async () => {
    Deno.mkdirSync(`${customModels}/Documents`);
    Deno.writeTextFileSync(`${customModels}/Documents/letter.txt`, "mine");
    Deno.mkdirSync(`${customModels}/someone--else`);
    for (const id of ["Documents", "keep.txt", "someone/else"]) {
      const res = await raw(custom.port, "DELETE", `/store/models/${id}`);
      expect(res.status, `${id}: ${res.body}`).toBe(404);
    }
    expect(Deno.readTextFileSync(`${customModels}/Documents/letter.txt`)).toBe("mine");
    expect(Deno.statSync(`${customModels}/someone--else`).isDirectory).toBe(true);
    await expectIntact(custom, customModels);
  });

  it("starts past a model folder with a link out, never reading through it, and deletes the link, not its target", async () => {
    await waitFor("the start-up scan to pass the folder", () => plain.log().includes("not advertising"));
    expect(plain.log()).toMatch(/not advertising .*leads outside/);
    const res = await raw(plain.port, "DELETE", `/store/models/${VOICE}`);
    expect(res.status, res.body).toBe(200);
    expect(Deno.readTextFileSync(`${root}/trap-target/voice.onnx`)).toBe("outside");
    await expectIntact(plain, `${plain.dataDir}/models`);
  });

  it("refuses to delete through a model folder that is a link to somewhere else", async () => {
    const outside = `${root}/outside`;
    Deno.mkdirSync(outside);
    Deno.writeTextFileSync(`${outside}/precious.txt`, "precious");
    Deno.symlinkSync(outside, `${customModels}/org--linked`);
    expect400(await raw(custom.port, "DELETE", "/store/models/org/linked"), /leads outside/);
    expect(Deno.readTextFileSync(`${outside}/precious.txt`)).toBe("precious");
    await expectIntact(custom, customModels);
  });
});

describe("paths from a hub listing", () => {
  it(
    "fails a download whose listing names ../../../x and writes nothing outside the models folder",
    async () => {
      const res = await fetch(`${custom.url}/store/models/${VOICE}/download`, { method: "POST" });
      expect(res.status, await res.text()).toBe(200);
      const status = await waitFor("the download to end", async () => {
        const s = await (await fetch(`${custom.url}/store/models/${VOICE}/download/status`)).json() as {
          status: string;
          error: string | null;
        };
        return s.status === "failed" || s.status === "complete" ? s : null;
      }, 60_000);
      expect(status.status).toBe("failed");
      expect(status.error).toMatch(
        /names a file .*\.\.\/\.\.\/\.\.\/escape-.* that has a '\.' or '\.\.' part/,
      );
      for (const base of [root, `${root}/shared`, customModels, `${root}/..`]) {
        for (const suffix of ["", ".partial"]) {
          expect(() => Deno.statSync(`${base}/${escapeName}${suffix}`), `${base}/${escapeName}${suffix}`)
            .toThrow(Deno.errors.NotFound);
        }
      }
      await expectIntact(custom, customModels);
    },
    90_000,
  );
});

describe("ids on the command line", () => {
  it("skulk models rm .. with no daemon refuses, naming the problem, and the data dir stays", async () => {
    const dataDir = `${root}/offline`;
    Deno.mkdirSync(`${dataDir}/models`, { recursive: true });
    Deno.writeTextFileSync(`${dataDir}/models/keep.txt`, "keep");
    Deno.writeTextFileSync(`${dataDir}/keep.txt`, "keep");
    for (const id of ["..", ".", "org/.."]) {
      const r = await skulk(["models", "rm", id, "--data-dir", dataDir]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/'\.' or '\.\.' part/);
    }
    const pull = await skulk(["models", "pull", VOICE, "--gguf-file", "../../x", "--data-dir", dataDir]);
    expect(pull.code, pull.stderr).toBe(2);
    expect(Deno.readTextFileSync(`${dataDir}/keep.txt`)).toBe("keep");
    expect(Deno.readTextFileSync(`${dataDir}/models/keep.txt`)).toBe("keep");
  }, 60_000);
});
