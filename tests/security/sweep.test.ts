/**
 * The security sweep: one real node (API key, a placed tiny model, a loopback hub) has every route of its own
 * `/api/openapi.json` walked with hostile input; no answer may be a 5xx or take over 10 s, and the data dir survives.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queryReadOnly } from "../../src/store/readonly.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { rawRequest } from "../helpers/raw-http.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const KEY = "sweep-key-0123456789";
const MODEL = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf";
const HANG_MS = 10_000;
/** The cross product is sampled down to about this many requests (a seeded choice: a failure reproduces). */
const MAX_REQUESTS = 3000;
const PER_ROUTE = 400;
const CONCURRENCY = 6;
/** Routes that reach the engine (llama-server generates one request at a time). */
const ENGINE_ROUTES = new Set(["POST /v1/chat/completions", "POST /v1/completions", "POST /v1/embeddings"]);
/** Routes that would stop the node if they succeeded: listed as skipped, never sent. */
const SKIPPED = new Set(["POST /admin/restart", "POST /shutdown", "POST /admin/shutdown"]);

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

interface Probe {
  /** `METHOD /template` as the OpenAPI document names it. */
  route: string;
  method: string;
  target: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** What was sent, for the failure message. */
  what: string;
  /** Statuses this probe must get, where set: no or wrong key (401), unsigned peer (403), unlisted method (404). */
  expect?: number[];
  /** An id that names a place outside its root (traversal, absolute, NUL, over-long): any 2xx is a failure. */
  refuse?: boolean;
}

/** mulberry32: a small seeded generator, so the sampled cross product is the same on every run. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sample<T>(items: T[], n: number, rand: () => number): T[] {
  if (items.length <= n) return items;
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy.slice(0, n);
}

const deepArray = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
const deepObject = (levels: number) => '{"a":'.repeat(levels) + "1" + "}".repeat(levels);
const TEN_MB = "x".repeat(10 * 1024 * 1024);
const LONG_ID = "a".repeat(8000);

/** Segments no id may be, whatever the route (traversal in every spelling, absolute, NUL, over-long, empty): accepting one (2xx) is the containment failure the sweep looks for. */
const TRAVERSAL_SEGMENTS = [
  "..",
  ".",
  "%2E%2E",
  "%2e%2e",
  "..%2F..%2F..%2Fetc%2Fpasswd",
  "../../etc/passwd",
  "%2Fetc%2Fpasswd",
  "/etc/passwd",
  "..\\..\\windows",
  "..%5C..%5Cwindows",
  "C:%5CWindows",
  "a%00b",
  "%00",
  LONG_ID,
  "",
];
/** Path segments sent raw: the above, broken escapes, and strings that are only odd. */
const BAD_SEGMENTS = [
  ...TRAVERSAL_SEGMENTS,
  "%",
  "%ZZ",
  "%C0%AE%C0%AE",
  "%F0%9F%92%A9",
  "-1",
  "1e308",
  "NaN",
  "null",
  "%7B%7D",
];
/** The same for model ids sent in a body (not URL-decoded, so no percent spellings). */
const TRAVERSAL_VALUES = new Set([
  '".."',
  '"../../etc/passwd"',
  '"/etc/passwd"',
  '"/dev/zero"',
  "backslashes",
  "NUL",
  "8000 chars",
]);
const MODEL_ID_FIELD = /^(model_?id)$/i;

/** Query values: wrong types, huge and negative numbers, NaN, traversal, NUL, over-long. */
const BAD_QUERY = [
  "",
  "-1",
  "0",
  "1.5",
  "1e308",
  "-1e308",
  "NaN",
  "Infinity",
  "99999999999999999999999",
  "abc",
  "%00",
  "%ZZ",
  "..%2F..%2Fetc%2Fpasswd",
  "%2Fetc%2Fpasswd",
  LONG_ID,
  "true",
  "%5B%5D",
];

/** Values a JSON field gets in place of a good one. */
const BAD_VALUES: { label: string; value: Json | (() => string) }[] = [
  { label: "null", value: null },
  { label: "true", value: true },
  // A small number: a big one where a count is asked for (max_tokens) is a legitimate long generation, not a fault.
  { label: "7", value: 7 },
  { label: "1e308", value: 1e308 },
  { label: "-1", value: -1 },
  { label: "-1e308", value: -1e308 },
  { label: "1.5", value: 1.5 },
  { label: "2^53+2", value: 2 ** 53 + 2 },
  { label: '"NaN"', value: "NaN" },
  { label: '"Infinity"', value: "Infinity" },
  { label: '"-1"', value: "-1" },
  { label: '"a string"', value: "a string" },
  { label: "[]", value: [] },
  { label: "{}", value: {} },
  { label: "[1,2]", value: [1, 2] },
  { label: '{"a":1}', value: { a: 1 } },
  { label: '".."', value: ".." },
  { label: '"../../etc/passwd"', value: "../../etc/passwd" },
  { label: '"%2E%2E"', value: "%2E%2E" },
  { label: '"/etc/passwd"', value: "/etc/passwd" },
  { label: '"/dev/zero"', value: "/dev/zero" },
  { label: "backslashes", value: "..\\..\\windows\\system32" },
  { label: "NUL", value: "a\u0000b" },
  { label: "8000 chars", value: LONG_ID },
  { label: "emoji", value: "\u{1F4A9}" },
  { label: "10k nested arrays", value: () => deepArray(10_000) },
];

/** Whole bodies that are not the JSON a route wants. */
const BAD_BODIES: { label: string; body: string | Uint8Array }[] = [
  { label: "empty body", body: "" },
  { label: "whitespace body", body: "   \n" },
  { label: "malformed JSON '{'", body: "{" },
  { label: "malformed JSON '{\"a\":}'", body: '{"a":}' },
  { label: "trailing comma", body: '{"model": "x",}' },
  { label: "not JSON", body: "not json at all" },
  { label: "JSON null", body: "null" },
  { label: "JSON array", body: "[]" },
  { label: "JSON number", body: "1e308" },
  { label: "JSON string", body: '"s"' },
  { label: "BOM then {}", body: "\uFEFF{}" },
  { label: "10k nested arrays", body: deepArray(10_000) },
  { label: "10k nested objects", body: deepObject(10_000) },
  { label: "invalid UTF-8", body: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]) },
  { label: "NUL bytes", body: new Uint8Array([0x7b, 0x00, 0x00, 0x7d]) },
  {
    label: "__proto__ pollution",
    body: '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"x": 1}}}',
  },
];

const CONTENT_TYPES = [
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=sweep",
  "application/json; charset=utf-16",
  "application/octet-stream",
  "image/png",
];

// deno-lint-ignore no-explicit-any
type Schema = Record<string, any>;

/** A value that satisfies a JSON schema well enough to get past the first checks (first branch of unions). */
function exampleOf(s: Schema | undefined, root: Schema, depth = 0): Json {
  if (!s || depth > 12) return null;
  if (s.$ref) return exampleOf(resolveRef(root, s.$ref), root, depth + 1);
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.default !== undefined) return s.default;
  const union = s.anyOf ?? s.oneOf;
  if (union) return exampleOf(union.find((b: Schema) => b.type !== "null") ?? union[0], root, depth + 1);
  if (s.allOf) return exampleOf(s.allOf[0], root, depth + 1);
  const type = Array.isArray(s.type) ? s.type.find((t: string) => t !== "null") : s.type;
  switch (type) {
    case "object": {
      const out: { [k: string]: Json } = {};
      for (const [k, v] of Object.entries(s.properties ?? {})) {
        if ((s.required ?? []).includes(k)) out[k] = exampleOf(v as Schema, root, depth + 1);
      }
      if (!s.properties && s.additionalProperties && typeof s.additionalProperties === "object") {
        out.key = exampleOf(s.additionalProperties, root, depth + 1);
      }
      return out;
    }
    case "array":
      return [exampleOf(s.items, root, depth + 1)];
    case "string":
      return "sweep";
    case "integer":
    case "number":
      return Math.max(1, s.minimum ?? 1);
    case "boolean":
      return true;
    default:
      return null;
  }
}

function resolveRef(root: Schema, ref: string): Schema | undefined {
  if (!ref.startsWith("#/")) return undefined;
  // deno-lint-ignore no-explicit-any
  return ref.slice(2).split("/").reduce<any>((o, k) => o?.[k], root);
}

/** Every path to a value in a body (objects and arrays included), shallowest first. */
function pathsOf(v: Json, prefix: (string | number)[] = [], out: (string | number)[][] = []) {
  if (prefix.length) out.push(prefix);
  if (prefix.length >= 8) return out;
  if (Array.isArray(v)) v.forEach((x, i) => pathsOf(x, [...prefix, i], out));
  else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) pathsOf(x, [...prefix, k], out);
  }
  return out;
}

/** The body as JSON text with the value at `path` replaced by raw JSON text. */
function replaced(body: Json, path: (string | number)[], rawValue: string): string {
  const marker = `__sweep_${Math.random().toString(36).slice(2)}__`;
  const copy = structuredClone(body);
  // deno-lint-ignore no-explicit-any
  let o: any = copy;
  for (const k of path.slice(0, -1)) o = o[k];
  o[path[path.length - 1]] = marker;
  return JSON.stringify(copy).replace(JSON.stringify(marker), rawValue);
}

/** What a well-formed request to each route looks like on this node; the probes vary one part of it. */
interface Context {
  /** By route; POST /instance re-sends the placed instance as /state shows it (its id already exists). */
  goodBodies: Record<string, Json>;
  goodParams: Record<string, string>;
  goodQuery: Record<string, string>;
}

function fill(template: string, params: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (_, name) => params[name] ?? "sweep");
}

function withQuery(path: string, q: Record<string, string>): string {
  const s = Object.entries(q).map(([k, v]) => `${k}=${v}`).join("&");
  return s ? `${path}?${s}` : path;
}

/** The probes of one route: path params, query params, bodies, field mutations, content types, no key. */
function probesOf(
  method: string,
  template: string,
  op: Schema,
  ctx: Context,
  rand: () => number,
): Probe[] {
  const route = `${method} ${template}`;
  const auth = { authorization: `Bearer ${KEY}` };
  const json = { ...auth, "content-type": "application/json" };
  const isPeer = template.startsWith("/cluster/peer/");
  const pathParams: string[] = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
  const queryParams: string[] = (op.parameters ?? []).filter((p: Schema) => p.in === "query").map((
    p: Schema,
  ) => p.name);
  const schema = op.requestBody?.content?.["application/json"]?.schema as Schema | undefined;
  const good: Json = ctx.goodBodies[route] ?? (schema ? exampleOf(schema, schema) : {});
  const goodQuery = Object.fromEntries(
    queryParams.filter((q) => ctx.goodQuery[q] !== undefined).map((q) => [q, ctx.goodQuery[q]]),
  );
  const goodPath = withQuery(fill(template, ctx.goodParams), goodQuery);
  const hasBody = method !== "GET" && method !== "DELETE";
  const goodText = hasBody ? JSON.stringify(good) : undefined;
  const base = { route, method, headers: hasBody ? json : auth };
  const probes: Probe[] = [];
  /** Sent whatever the sample: few, and the ones a body limit exists for. */
  const huge: Probe[] = [];
  const add = (p: Omit<Probe, "route" | "method" | "headers"> & { headers?: Record<string, string> }) =>
    probes.push({
      ...base,
      ...p,
      headers: p.headers ?? base.headers,
      expect: isPeer ? [403, 413] : p.expect,
    });

  add({ target: goodPath, body: goodText, what: "good request" });
  for (const name of pathParams) {
    for (const seg of BAD_SEGMENTS) {
      add({
        target: withQuery(fill(template, { ...ctx.goodParams, [name]: seg }), goodQuery),
        body: goodText,
        refuse: TRAVERSAL_SEGMENTS.includes(seg),
        what: `path ${name}=${JSON.stringify(seg.slice(0, 40))}${seg.length > 40 ? `… (${seg.length})` : ""}`,
      });
    }
  }
  for (const name of queryParams) {
    for (const v of BAD_QUERY) {
      add({
        target: withQuery(fill(template, ctx.goodParams), { ...goodQuery, [name]: v }),
        body: goodText,
        what: `query ${name}=${JSON.stringify(v.slice(0, 40))}${v.length > 40 ? `… (${v.length})` : ""}`,
      });
    }
    add({
      target: `${withQuery(fill(template, ctx.goodParams), goodQuery)}&${name}=1&${name}=x`,
      body: goodText,
      what: `query ${name} repeated`,
    });
  }
  if (hasBody) {
    for (const b of BAD_BODIES) add({ target: goodPath, body: b.body, what: b.label });
    for (const type of CONTENT_TYPES) {
      add({
        target: goodPath,
        body: goodText,
        headers: { ...auth, "content-type": type },
        what: `content-type ${type}`,
      });
    }
    add({ target: goodPath, body: goodText, headers: auth, what: "no content-type" });
    add({
      target: goodPath,
      body:
        '--sweep\r\nContent-Disposition: form-data; name="file"; filename="../../x.wav"\r\n\r\nRIFF\0\0\r\n--sweep--\r\n',
      headers: { ...auth, "content-type": "multipart/form-data; boundary=sweep" },
      what: "multipart with a traversal file name",
    });
    add({
      target: goodPath,
      body: "--other\r\n\r\n",
      headers: { ...auth, "content-type": "multipart/form-data; boundary=sweep" },
      what: "multipart with the wrong boundary",
    });
    const fields = pathsOf(good);
    for (const path of fields) {
      for (const bad of BAD_VALUES) {
        const raw = typeof bad.value === "function" ? bad.value() : JSON.stringify(bad.value);
        add({
          target: goodPath,
          body: replaced(good, path, raw),
          refuse: MODEL_ID_FIELD.test(String(path[path.length - 1])) && TRAVERSAL_VALUES.has(bad.label),
          what: `field ${path.join(".")} = ${bad.label}`,
        });
      }
    }
    // 10 MB in each of the first three string fields: a body limit must refuse it before a handler reads it.
    const strings = fields.filter((p) => {
      // deno-lint-ignore no-explicit-any
      const v = p.reduce<any>((o, k) => o?.[k], good);
      return typeof v === "string";
    }).slice(0, 3);
    for (const path of strings) {
      huge.push({
        ...base,
        target: goodPath,
        body: replaced(good, path, JSON.stringify(TEN_MB)),
        what: `field ${path.join(".")} = 10 MB string`,
        expect: isPeer ? [403, 413] : undefined,
      });
    }
    if (good && typeof good === "object" && !Array.isArray(good)) {
      add({
        target: goodPath,
        body: JSON.stringify({ ...good, unexpected_field: 1 }),
        what: "an unknown field",
      });
    }
  } else {
    add({
      target: goodPath,
      body: '{"unexpected": "body"}',
      headers: json,
      what: "a body on a bodiless method",
    });
  }
  const sampled = [probes[0], ...huge, ...sample(probes.slice(1), PER_ROUTE - 2 - huge.length, rand)];
  // One request without the key: every route but /healthz and the peer routes must refuse it.
  const open = template === "/healthz" || template === "/api/openapi.json";
  sampled.push({
    route,
    method,
    target: goodPath,
    headers: hasBody ? { "content-type": "application/json" } : {},
    body: goodText,
    what: "no API key",
    expect: isPeer ? [403, 413] : open ? undefined : [401],
  });
  if (template === "/state") {
    for (
      const [label, value] of [
        ["a wrong key", "Bearer wrong-key"],
        ["Basic credentials", `Basic ${btoa(`user:${KEY}`)}`],
        ["an 8000-character key", `Bearer ${LONG_ID}`],
        ["the key with a suffix", `Bearer ${KEY}x`],
      ]
    ) {
      sampled.push({
        route,
        method,
        target: goodPath,
        headers: { authorization: value },
        what: label,
        expect: [401],
      });
    }
  }
  return sampled;
}

interface Outcome {
  probe: Probe;
  status: number | "hang" | "error";
  ms: number;
  detail: string;
}

describe("security sweep over every route of /api/openapi.json", () => {
  let hub: FakeHub;
  let node: Daemon;
  let dir: string;
  let ctx: Context;

  beforeAll(async () => {
    dir = tempDir("skulk-sweep-");
    const repo = `${dir}/hub-repo`;
    Deno.mkdirSync(repo);
    await Deno.copyFile(await tinyModel(), `${repo}/${FILE}`);
    hub = await startFakeHub({ repos: { [MODEL]: repo } });
    Deno.writeTextFileSync(`${dir}/skulk.yaml`, "node:\n  friendly_name: sweep\n");
    node = await startDaemon({
      dataDir: `${dir}/data`,
      args: ["--config", `${dir}/skulk.yaml`],
      env: {
        SKULK_API_KEY: KEY,
        SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
        HF_ENDPOINT: hub.url,
        // The tiny model never ends a sentence: a request that names no max_tokens generates this many.
        SKULK_MAX_OUTPUT_TOKENS: "16",
      },
      timeoutMs: 60_000,
    });
    const auth = { authorization: `Bearer ${KEY}` };
    const placed = await fetch(`${node.url}/place_instance`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ model_id: MODEL }),
    });
    expect(placed.status).toBe(200);
    const { instance_id } = await placed.json();
    // deno-lint-ignore no-explicit-any
    let state: any;
    const deadline = Date.now() + 150_000;
    for (;;) {
      state = await (await fetch(`${node.url}/state`, { headers: auth })).json();
      const inst = state.instances[instance_id]?.MlxRingInstance;
      const runner = inst && (Object.values(inst.shardAssignments.nodeToRunner)[0] as string);
      if (runner && state.runners?.[runner] && "RunnerReady" in state.runners[runner]) break;
      if (Date.now() > deadline) {
        throw new Error(`the tiny model did not become ready: ${JSON.stringify(state.runners)}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const instance = state.instances[instance_id];
    const shard = Object.values(instance.MlxRingInstance.shardAssignments.runnerToShard)[0];
    ctx = {
      goodParams: {
        node_id: node.nodeId,
        model_id: MODEL,
        instance_id,
        command_id: crypto.randomUUID(),
      },
      goodQuery: {
        model_id: MODEL,
        model: MODEL,
        status: "downloaded",
        since: "0",
        limit: "10",
        tail: "5",
        count: "1",
      },
      goodBodies: {
        "POST /instance": { instance },
        "PUT /config": { config: { node: { friendly_name: "sweep" } } },
        "POST /download/start": { targetNodeId: node.nodeId, shardMetadata: shard as Json },
        "POST /place_instance": { model_id: MODEL, min_nodes: 2 },
        "POST /models/add": { model_id: "sweep/custom", gguf_path: `${dir}/hub-repo/${FILE}` },
        "POST /store/models/{model_id}/download": {},
        "POST /v1/chat/completions": {
          model: MODEL,
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 4,
        },
        "POST /v1/completions": { model: MODEL, prompt: "hi", max_tokens: 4 },
        "POST /v1/embeddings": { model: MODEL, input: "hi" },
        "POST /v1/audio/speech": { model: MODEL, input: "hi", voice: "alloy" },
      },
    };
  }, 240_000);

  afterAll(async () => {
    await node?.stop();
    await hub?.close();
    await Deno.remove(dir, { recursive: true }).catch(() => undefined);
  });

  it("answers no 5xx, never hangs, refuses without the key, and leaves the data dir intact", async () => {
    const res = await fetch(`${node.url}/api/openapi.json`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(res.status).toBe(200);
    const doc = await res.json() as Schema;
    const rand = rng(14);
    const skipped: string[] = [];
    let probes: Probe[] = [];
    for (const [template, ops] of Object.entries(doc.paths as Record<string, Schema>)) {
      for (const [m, op] of Object.entries(ops)) {
        const method = m.toUpperCase();
        if (SKIPPED.has(`${method} ${template}`)) {
          skipped.push(`${method} ${template}`);
          continue;
        }
        probes.push(...probesOf(method, template, op, ctx, rand));
      }
      // A method the document does not list for this path is a 404, never a handler run by mistake.
      probes.push({
        route: `PATCH ${template}`,
        method: "PATCH",
        target: fill(template, ctx.goodParams),
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: "{}",
        what: "a method the document does not list",
        expect: template.startsWith("/cluster/peer/") ? [403, 404, 405] : [404, 405],
      });
    }
    expect(probes.length).toBeGreaterThan(100);
    if (probes.length > MAX_REQUESTS) {
      const kept = probes.filter((p) =>
        p.expect !== undefined || p.what === "good request" || p.what.includes("10 MB")
      );
      probes = [
        ...kept,
        ...sample(
          probes.filter((p) => !kept.includes(p)),
          MAX_REQUESTS - kept.length,
          rand,
        ),
      ];
    }

    const outcomes: Outcome[] = [];
    const t0 = performance.now();
    const send = async (list: Probe[], workers: number) => {
      let next = 0;
      await Promise.all(Array.from({ length: workers }, async () => {
        while (next < list.length) {
          const probe = list[next++];
          const r = await rawRequest(node.port, probe, HANG_MS);
          outcomes.push(
            r.kind === "response"
              ? { probe, status: r.status, ms: r.ms, detail: r.body.slice(0, 300) }
              : { probe, status: r.kind, ms: r.ms, detail: r.kind === "error" ? r.message : "" },
          );
        }
      }));
    };
    // The engine serves one generation at a time: its requests go one by one, so a wait in its queue on a
    // busy machine is not taken for a hang. Deletions go last, so they cannot remove what the others reach for.
    const deletions = probes.filter((p) => p.method === "DELETE");
    const rest = probes.filter((p) => p.method !== "DELETE");
    await Promise.all([
      send(rest.filter((p) => ENGINE_ROUTES.has(p.route)), 1),
      send(rest.filter((p) => !ENGINE_ROUTES.has(p.route)), CONCURRENCY - 1),
    ]);
    await send(deletions, CONCURRENCY);
    const seconds = Math.round((performance.now() - t0) / 100) / 10;

    const counts = { "2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0, hang: 0, error: 0 };
    for (const o of outcomes) {
      if (typeof o.status === "number") counts[`${Math.floor(o.status / 100)}xx` as "2xx"]++;
      else counts[o.status]++;
    }
    const line = (o: Outcome) =>
      `  ${o.status} ${o.probe.route} [${o.probe.what}] ${o.probe.target.slice(0, 120)} (${o.ms} ms) ${
        o.detail.replace(/\s+/g, " ").slice(0, 240)
      }`;
    console.log(
      `security sweep: ${outcomes.length} requests over ${
        Object.values(doc.paths as Schema).reduce((a: number, ops: Schema) => a + Object.keys(ops).length, 0)
      } routes in ${seconds} s: ` +
        Object.entries(counts).map(([k, v]) => `${k} ${v}`).join(", ") +
        `\nskipped (would stop the node): ${skipped.join(", ") || "none"}`,
    );

    // Every outcome, for reading after a run: which hostile inputs were accepted, and how slow each route was.
    Deno.writeTextFileSync(
      `${ROOT}tests/.tmp/security-sweep.jsonl`,
      outcomes.map((o) =>
        JSON.stringify({
          route: o.probe.route,
          what: o.probe.what,
          target: o.probe.target.slice(0, 200),
          status: o.status,
          ms: o.ms,
          detail: o.detail,
        })
      ).join("\n") + "\n",
    );
    const bad = outcomes.filter((o) =>
      o.status === "hang" || o.status === "error" || (o.status as number) >= 500
    );
    const wrong = outcomes.filter((o) =>
      typeof o.status === "number" && o.probe.expect && !o.probe.expect.includes(o.status)
    );
    const accepted = outcomes.filter((o) => o.probe.refuse && typeof o.status === "number" && o.status < 300);
    const slow = outcomes.filter((o) => o.ms > HANG_MS && typeof o.status === "number");
    // Soft: one run reports every class of failure, not only the first.
    expect.soft(bad.map(line).join("\n"), `${bad.length} 5xx, hangs or dropped connections`).toBe("");
    expect.soft(accepted.map(line).join("\n"), "traversal, NUL or over-long ids accepted").toBe("");
    expect.soft(slow.map(line).join("\n"), "answers slower than 10 s").toBe("");
    expect.soft(
      wrong.map((o) => `${line(o)} (expected ${o.probe.expect!.join(" or ")})`).join("\n"),
      "statuses",
    )
      .toBe("");

    // The node still serves, and its data dir holds what it held.
    const health = await fetch(`${node.url}/healthz`);
    expect(health.status).toBe(200);
    await health.body?.cancel();
    for (const f of ["skulk.db", "node_key.json", "models"]) {
      await expect.soft(Deno.stat(`${node.dataDir}/${f}`), `${f} in the data dir`).resolves.toBeTruthy();
    }
    const check = await queryReadOnly(`${node.dataDir}/skulk.db`, "PRAGMA integrity_check");
    expect(check.rows).toEqual([{ integrity_check: "ok" }]);
  }, 300_000);
});
