/** @jsxImportSource hono/jsx/dom */
/**
 * Model store: the catalogue (`/models`) with search and filters, the hub's models (`/models/search`, added with
 * `POST /models/add`), a placement preview in words with Launch (`/instance/previews`, `POST /place_instance`),
 * download progress, and running instances with Delete.
 */
import { useEffect, useState } from "hono/jsx/dom";
import type { Instance } from "../../../cluster/instances.ts";
import { instanceName, placementKindName } from "../../../engines/instance-name.ts";
import {
  ApiFailure,
  type ClusterStateWire,
  getJson,
  type HubAdded,
  type HubModel,
  type ModelListEntry,
  type Preview,
  sendJson,
} from "../api.ts";
import {
  bytes,
  downloadText,
  downloadView,
  instanceView,
  runnerState,
  runningByInstance,
  SIZE_BUCKETS,
  sizeBucket,
} from "../format.ts";
import type { Live } from "../api.ts";
import { freeMemory, nodeName } from "../nodes.ts";
import { linuxOnly, type Runnable, runnableHere } from "../runnable.ts";
import { Badge, Empty, Meter, Notice, Select } from "../ui.tsx";

const PAGE = 24;

const CAPABILITIES: { id: string; label: string; has: (m: ModelListEntry) => boolean }[] = [
  { id: "thinking", label: "Thinking", has: (m) => m.resolved_capabilities.supports_thinking },
  { id: "tools", label: "Tool calling", has: (m) => m.resolved_capabilities.supports_tool_calling },
  { id: "vision", label: "Image input", has: (m) => m.resolved_capabilities.supports_image_input },
  { id: "embedding", label: "Embeddings", has: (m) => m.tasks.includes("TextEmbedding") },
];

function errorText(e: unknown): string {
  return e instanceof ApiFailure ? e.message : String(e);
}

function previewNodes(p: Preview): string[] {
  if (p.memory_delta_by_node) return Object.keys(p.memory_delta_by_node);
  const body = p.instance
    ? Object.values(p.instance)[0] as { shardAssignments?: { nodeToRunner?: Record<string, string> } }
    : undefined;
  return Object.keys(body?.shardAssignments?.nodeToRunner ?? {});
}

function speedText(p: Preview): string | null {
  const v = p.expected_tokens_per_second ?? p.expected_speed ?? p.estimated_tokens_per_second ?? null;
  if (v === null || v === undefined) return null;
  return typeof v === "number" ? `about ${v.toFixed(v < 10 ? 1 : 0)} tokens/s` : v;
}

function PreviewRow(
  props: { p: Preview; s: ClusterStateWire | null; onLaunch: (p: Preview) => void; busy: boolean },
) {
  const { p, s } = props;
  const nodes = previewNodes(p);
  const name = (id: string) => (s ? nodeName(s, id) : id.slice(0, 8));
  if (p.error) {
    return (
      <li class="preview preview-refused">
        <div>
          <strong>{p.sharding} sharding as {placementKindName(p.instance_meta)}</strong>{" "}
          <Badge tone="error">cannot place</Badge>
        </div>
        <p>{p.error}</p>
      </li>
    );
  }
  const speed = speedText(p);
  return (
    <li class="preview">
      <div>
        <strong>
          {nodes.length === 1 ? "One node" : `${nodes.length} nodes`}, {p.sharding.toLowerCase()} sharding
        </strong>
        <span class="muted">
          · {p.instance ? instanceName(p.instance as Instance) : placementKindName(p.instance_meta)}
        </span>
      </div>
      <p>
        {nodes.length === 1 ? "Runs entirely on " : "Splits the model across "}
        {nodes.map((id, i) => (
          <span>
            {i > 0 && (i === nodes.length - 1 ? " and " : ", ")}
            <strong>{name(id)}</strong>
            {p.memory_delta_by_node ? ` (${bytes(p.memory_delta_by_node[id])})` : ""}
          </span>
        ))}
        .{p.context_token_limit ? ` Context up to ${p.context_token_limit.toLocaleString()} tokens.` : ""}
        {speed ? ` Expected speed ${speed}.` : ""}
      </p>
      <button
        type="button"
        class="btn btn-primary"
        disabled={props.busy}
        onClick={() => props.onLaunch(p)}
        aria-label={`Launch on ${nodes.length} node${
          nodes.length === 1 ? "" : "s"
        } with ${p.sharding} sharding`}
      >
        {props.busy ? "Launching…" : "Launch"}
      </button>
    </li>
  );
}

function PreviewPanel(props: { model: ModelListEntry; live: Live; onClose: () => void }) {
  const { model } = props;
  const [previews, setPreviews] = useState<Preview[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [launching, setLaunching] = useState(false);
  const [result, setResult] = useState<{ tone: "info" | "error"; text: string } | null>(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    setPreviews(null);
    setError(null);
    getJson<{ previews: Preview[] }>(`/instance/previews?model_id=${encodeURIComponent(model.id)}`)
      .then((r) => setPreviews(r.previews))
      .catch((e) => setError(errorText(e)));
  }, [model.id, attempt]);
  const launch = async (p: Preview) => {
    setLaunching(true);
    setResult(null);
    try {
      await sendJson("POST", "/place_instance", {
        model_id: p.model_id,
        sharding: p.sharding,
        instance_meta: p.instance_meta,
        min_nodes: Math.max(1, previewNodes(p).length),
      });
      setResult({
        tone: "info",
        text:
          `Launch requested. ${model.name} appears under Running instances; it is ready when every runner says ready.`,
      });
      props.live.refresh();
    } catch (e) {
      setResult({ tone: "error", text: `Launch refused: ${errorText(e)}` });
    } finally {
      setLaunching(false);
    }
  };
  return (
    <section class="panel preview-panel" aria-labelledby="preview-h">
      <div class="panel-head">
        <h2 id="preview-h">Placement for {model.name}</h2>
        <button
          type="button"
          class="btn btn-ghost"
          onClick={props.onClose}
          aria-label="Close placement preview"
        >
          Close
        </button>
      </div>
      <p class="muted">
        {model.id} · {model.storage_size_bytes === null ? "size unknown" : bytes(model.storage_size_bytes)} ·
        {" "}
        {model.quantization || "unknown quantisation"}
      </p>
      {error && (
        <Notice tone="error" onRetry={() => setAttempt((a) => a + 1)}>Preview unavailable: {error}</Notice>
      )}
      {!error && !previews && <Empty>Asking the cluster where it fits…</Empty>}
      {previews && previews.length === 0 && (
        <Empty>
          No node has reported yet, so nothing can be placed.
        </Empty>
      )}
      {previews && previews.length > 0 && (
        <ul class="previews">
          {previews.map((p) => (
            <PreviewRow
              key={`${p.sharding}-${p.instance_meta}-${previewNodes(p).length}-${p.error ?? ""}`}
              p={p}
              s={props.live.state}
              busy={launching}
              onLaunch={launch}
            />
          ))}
        </ul>
      )}
      {result && <Notice tone={result.tone}>{result.text}</Notice>}
    </section>
  );
}

/**
 * A model's size and its verdict on this cluster, the same for a catalogue card and a model just added from the
 * hub: an open size reads "size unknown" with no "fits" (never 0 B), a runner the nodes lack says why.
 */
function ModelFacts(
  props: { m: ModelListEntry; s: ClusterStateWire | null; free: number; verdict: Runnable | undefined },
) {
  const { m, s, verdict } = props;
  const sizeB = m.storage_size_bytes;
  const tooBig = s !== null && sizeB !== null && sizeB > props.free;
  const cannot = verdict && !verdict.ok ? verdict.reason : null;
  return (
    <>
      <div class="model-facts">
        <span>
          <strong>{sizeB === null ? "size unknown" : bytes(sizeB)}</strong>
        </span>
        {m.context_length > 0 && <span>{(m.context_length / 1024).toFixed(0)}K context</span>}
        {cannot
          ? <Badge tone="warn">cannot run here</Badge>
          : tooBig
          ? <Badge tone="warn">larger than free memory</Badge>
          : s && sizeB !== null && <Badge tone="ok">fits</Badge>}
      </div>
      {cannot && <p class="muted small model-why">{cannot}</p>}
    </>
  );
}

/** The hub's answer to a search or an add, in words a person can act on; the node's own message follows. */
function hubErrorText(e: unknown): string {
  if (!(e instanceof ApiFailure)) return String(e);
  const lead: Record<number, string> = {
    0: "The node did not answer",
    403: "The hub refused this repo (private or gated; the node needs HF_TOKEN)",
    404: "The hub has no such repo",
    502: "The hub gave an answer the node cannot use",
    503: "The model hub is offline or unreachable",
  };
  return lead[e.status] ? `${lead[e.status]}: ${e.message}` : e.message;
}

/** Search-as-you-type waits this long after the last key, so a word is one hub request, not one per letter. */
const SEARCH_DEBOUNCE_MS = 350;
/** How many results one search shows (the node allows up to 100; a list longer than this is not read). */
const SEARCH_LIMIT = 20;
/** The node's bound on a query (SEARCH_LIMITS.maxQuery in the API). */
const SEARCH_MAX_QUERY = 200;

type Added = { state: "adding" } | { state: "added"; entry: HubAdded } | { state: "failed"; error: string };

function HubResult(
  props: {
    r: HubModel;
    live: Live;
    free: number;
    added: Added | undefined;
    onAdd: (id: string, quant?: string) => void;
    onLaunch: (m: ModelListEntry) => void;
  },
) {
  const { r, added } = props;
  const s = props.live.state;
  const entry = added?.state === "added" ? added.entry : null;
  // The quantisation the added file has: the longest listed name in it (Q4_K_M, not a shorter Q4_K).
  const quant = entry?.available_quants.filter((q) => entry.gguf_file?.includes(q))
    .sort((a, b) => b.length - a.length)[0] ?? "";
  return (
    <li class="card hub-result" data-hub-id={r.id}>
      <div class="model-top">
        <h3 class="model-name" title={r.id}>{r.id}</h3>
        <span class="muted small">
          {r.downloads.toLocaleString()} downloads · {r.likes.toLocaleString()} likes
        </span>
      </div>
      <div class="tags">{r.tags.slice(0, 6).map((t) => <span key={t} class="tag">{t}</span>)}</div>
      {entry && (
        <>
          <p class="muted small">
            {entry.gguf_file
              ? `Added as ${entry.gguf_file}`
              : `Added from its config.json${entry.quantization ? ` (${entry.quantization})` : ""}`}
          </p>
          <ModelFacts m={entry} s={s} free={props.free} verdict={s ? runnableHere(entry, s) : undefined} />
          {entry.available_quants.length > 1 && (
            <label class="field">
              <span>Quantisation</span>
              <select
                aria-label={`Quantisation of ${r.id}`}
                value={quant}
                onChange={(e: Event) => props.onAdd(r.id, (e.target as HTMLSelectElement).value)}
              >
                {entry.available_quants.map((q) => (
                  <option key={q} value={q} selected={q === quant}>{q}</option>
                ))}
              </select>
            </label>
          )}
        </>
      )}
      {added?.state === "failed" && <Notice tone="error">{added.error}</Notice>}
      <div class="actions">
        <button
          type="button"
          class="btn"
          // Once added, the quantisation choice re-adds; Add again would silently go back to the default one.
          disabled={added?.state === "adding" || entry !== null}
          onClick={() => props.onAdd(r.id)}
          aria-label={`Add ${r.id}`}
        >
          {added?.state === "adding" ? "Adding…" : entry ? "Added" : "Add"}
        </button>
        {entry && (
          <button
            type="button"
            class="btn btn-primary"
            disabled={entry.servable.ok === false}
            title={entry.servable.reason ?? undefined}
            onClick={() => props.onLaunch(entry)}
            aria-label={`Launch ${r.id}`}
          >
            Launch
          </button>
        )}
      </div>
    </li>
  );
}

/** "Search the hub": the node's `/models/search`, each result added by id, then placed like a catalogue card. */
function HubSearch(
  props: { live: Live; free: number; onAdded: () => void; onLaunch: (m: ModelListEntry) => void },
) {
  const [q, setQ] = useState("");
  const [results, setResults] = useState<HubModel[] | null>(null);
  const [searching, setSearching] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [added, setAdded] = useState<Record<string, Added>>({});
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    const query = q.trim();
    if (query.length === 0) {
      setResults(null);
      setError(null);
      return;
    }
    // A slower answer to an older query must not overwrite a newer one.
    let current = true;
    const timer = setTimeout(() => {
      setSearching(true);
      getJson<HubModel[]>(`/models/search?query=${encodeURIComponent(query)}&limit=${SEARCH_LIMIT}`)
        .then((r) => {
          if (!current) return;
          setResults(r);
          setError(null);
        })
        .catch((e) => {
          if (!current) return;
          setResults(null);
          setError(hubErrorText(e));
        })
        .finally(() => current && setSearching(false));
    }, SEARCH_DEBOUNCE_MS);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [q, attempt]);
  const add = async (id: string, quant?: string) => {
    setAdded((a) => ({ ...a, [id]: { state: "adding" } }));
    try {
      const entry = await sendJson<HubAdded>("POST", "/models/add", {
        model_id: id,
        ...(quant ? { quant } : {}),
      });
      setAdded((a) => ({ ...a, [id]: { state: "added", entry } }));
      props.onAdded();
    } catch (e) {
      setAdded((a) => ({ ...a, [id]: { state: "failed", error: hubErrorText(e) } }));
    }
  };
  return (
    <section class="panel" aria-labelledby="hub-h">
      <h2 id="hub-h">Search the hub</h2>
      <form class="filters" role="search" aria-label="Hub" onSubmit={(e: Event) => e.preventDefault()}>
        <label class="field grow">
          {/* Not "Search…": the catalogue's own box is "Search", and a label should name one field. */}
          <span>Find on the hub</span>
          <input
            type="search"
            value={q}
            maxLength={SEARCH_MAX_QUERY}
            placeholder="a repo id or words in it, e.g. Qwen3 GGUF"
            onInput={(e: Event) => setQ((e.target as HTMLInputElement).value)}
          />
        </label>
      </form>
      {searching && <p class="muted small" role="status">Searching the hub…</p>}
      {error && <Notice tone="error" onRetry={() => setAttempt((a) => a + 1)}>{error}</Notice>}
      {results && results.length === 0 && <Empty>The hub has no model matching "{q.trim()}".</Empty>}
      {results && results.length > 0 && (
        <ul class="models" aria-label="Hub results">
          {results.map((r) => (
            <HubResult
              key={r.id}
              r={r}
              live={props.live}
              free={props.free}
              added={added[r.id]}
              onAdd={add}
              onLaunch={props.onLaunch}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function Downloads(props: { s: ClusterStateWire }) {
  const rows = Object.values(props.s.downloads).flat().map(downloadView).filter((d) =>
    d.state !== "complete"
  );
  if (rows.length === 0) return null;
  return (
    <section class="panel" aria-labelledby="dl-h">
      <h2 id="dl-h">Downloads</h2>
      <ul class="list">
        {rows.map((d) => (
          <li>
            <div class="row-head">
              <strong>{d.modelId}</strong>
              <span class="muted">on {nodeName(props.s, d.nodeId)}</span>
            </div>
            {d.state === "failed" ? <Notice tone="error">Download failed: {d.error}</Notice> : (
              <Meter
                label={d.state === "pending" ? "Waiting to start" : "Downloading"}
                ratio={d.ratio}
                tone="busy"
                text={downloadText(d)}
              />
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

function Running(props: { live: Live }) {
  const s = props.live.state;
  const [confirm, setConfirm] = useState<string | null>(null);
  const [msg, setMsg] = useState<{ tone: "info" | "error"; text: string } | null>(null);
  if (!s) return null;
  // A model's instances side by side (replicas share its load), each with the requests it runs now.
  const views = Object.entries(s.instances).map(([id, i]) => instanceView(id, i, s.runners))
    .sort((a, b) => a.modelId.localeCompare(b.modelId) || a.id.localeCompare(b.id));
  const perModel = new Map<string, number>();
  const ordinal = new Map<string, number>();
  for (const v of views) {
    perModel.set(v.modelId, (perModel.get(v.modelId) ?? 0) + 1);
    ordinal.set(v.id, perModel.get(v.modelId)!);
  }
  const running = runningByInstance(s.tasks as Record<string, Record<string, unknown>>);
  const remove = async (id: string) => {
    setConfirm(null);
    try {
      await sendJson("DELETE", `/instance/${encodeURIComponent(id)}`);
      setMsg({ tone: "info", text: "Delete requested; the instance disappears once its runners stop." });
      props.live.refresh();
    } catch (e) {
      setMsg({ tone: "error", text: `Delete refused: ${errorText(e)}` });
    }
  };
  return (
    <section class="panel" aria-labelledby="run-h">
      <h2 id="run-h">Running instances</h2>
      {msg && <Notice tone={msg.tone}>{msg.text}</Notice>}
      {views.length === 0
        ? <Empty>Nothing is placed. Pick a model above and launch it.</Empty>
        : (
          <ul class="list">
            {views.map((v) => (
              <li key={v.id} class="instance" data-instance-id={v.id}>
                <div class="row-head">
                  <strong>{v.modelId}</strong>
                  <span class="muted small">
                    {v.kind}
                    {v.contextTokenLimit ? ` · ${v.contextTokenLimit.toLocaleString()} tokens` : ""}
                    {(perModel.get(v.modelId) ?? 1) > 1
                      ? ` · instance ${ordinal.get(v.id)} of ${perModel.get(v.modelId)}`
                      : ""}
                    {` · ${running.get(v.id) ?? 0} running`}
                  </span>
                </div>
                <ul class="runners">
                  {v.shards.map((sh) => {
                    const st = runnerState(sh.status);
                    return (
                      <li>
                        <span>{nodeName(s, sh.nodeId)}</span>
                        <span class="muted small">{sh.layers}</span>
                        <Badge tone={st.tone} title={st.detail}>
                          {st.label}
                          {st.detail ? ` · ${st.detail}` : ""}
                        </Badge>
                      </li>
                    );
                  })}
                </ul>
                {confirm === v.id
                  ? (
                    <div class="confirm" role="group" aria-label="Confirm delete">
                      <span>Stop and delete this instance?</span>
                      <button type="button" class="btn btn-danger" onClick={() => remove(v.id)}>
                        Delete
                      </button>
                      <button type="button" class="btn btn-ghost" onClick={() => setConfirm(null)}>
                        Keep
                      </button>
                    </div>
                  )
                  : (
                    <button
                      type="button"
                      class="btn btn-ghost"
                      aria-label={`Delete instance of ${v.modelId}`}
                      onClick={() => setConfirm(v.id)}
                    >
                      Delete…
                    </button>
                  )}
              </li>
            ))}
          </ul>
        )}
    </section>
  );
}

export function StoreView(props: { live: Live }) {
  const [models, setModels] = useState<ModelListEntry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [q, setQ] = useState("");
  const [family, setFamily] = useState("");
  const [size, setSize] = useState("");
  const [cap, setCap] = useState("");
  const [fits, setFits] = useState(false);
  // null: follow the default, on when every node runs Linux (no MLX card can run there).
  const [runsHere, setRunsHere] = useState<boolean | null>(null);
  const [selected, setSelected] = useState<ModelListEntry | null>(null);
  const [attempt, setAttempt] = useState(0);
  const [limit, setLimit] = useState(PAGE);
  useEffect(() => {
    getJson<{ data: ModelListEntry[] }>("/models").then((r) => setModels(r.data)).catch((e) =>
      setError(errorText(e))
    );
  }, [attempt]);
  const s = props.live.state;
  const free = s ? freeMemory(s) : 0;
  const families = models ? [...new Set(models.map((m) => m.family).filter(Boolean))].sort() : [];
  const runsFilter = runsHere ?? (s !== null && linuxOnly(s));
  const verdicts = new Map<string, Runnable>(
    s ? (models ?? []).map((m) => [m.id, runnableHere(m, s)]) : [],
  );
  let hidden = 0;
  let hiddenForRunner = 0;
  const shown = (models ?? []).filter((m) => {
    const text = `${m.id} ${m.family} ${m.quantization} ${m.base_model}`.toLowerCase();
    if (q && !q.toLowerCase().split(/\s+/).every((w) => text.includes(w))) return false;
    if (family && m.family !== family) return false;
    // An open size has no bucket and no fit verdict: it is shown as "size unknown", never as 0 B.
    if (size && (m.storage_size_bytes === null || sizeBucket(m.storage_size_bytes) !== size)) return false;
    const c = CAPABILITIES.find((c) => c.id === cap);
    if (c && !c.has(m)) return false;
    if (fits && (m.storage_size_bytes === null || m.storage_size_bytes > free)) return false;
    const verdict = verdicts.get(m.id);
    if (runsFilter && verdict && !verdict.ok) {
      hidden++;
      if (verdict.runner) hiddenForRunner++;
      return false;
    }
    return true;
  }).sort((a, b) =>
    (a.storage_size_bytes ?? Number.MAX_SAFE_INTEGER) - (b.storage_size_bytes ?? Number.MAX_SAFE_INTEGER)
  );
  const val = (e: Event) => (e.target as HTMLInputElement).value;
  return (
    <div class="view">
      <div class="view-head">
        <h1>Model store</h1>
        <p class="muted">
          {models ? `${models.length} models in the catalogue` : "Loading the catalogue…"}
          {s ? ` · ${bytes(free)} free across the cluster` : ""}
        </p>
      </div>
      {selected && <PreviewPanel model={selected} live={props.live} onClose={() => setSelected(null)} />}
      {s && <Downloads s={s} />}
      <Running live={props.live} />
      <HubSearch
        live={props.live}
        free={free}
        onAdded={() => setAttempt((a) => a + 1)}
        onLaunch={(m) => {
          setSelected(m);
          scrollTo({ top: 0, behavior: "smooth" });
        }}
      />
      <section class="panel" aria-labelledby="cat-h">
        <h2 id="cat-h">Catalogue</h2>
        <form class="filters" role="search" onSubmit={(e: Event) => e.preventDefault()}>
          <label class="field grow">
            <span>Search</span>
            <input
              type="search"
              value={q}
              placeholder="name, family, quantisation"
              onInput={(e: Event) => setQ(val(e))}
            />
          </label>
          <Select
            label="Family"
            value={family}
            any="All families"
            options={families.map((f) => ({ id: f, label: f }))}
            onChange={setFamily}
          />
          <Select label="Size" value={size} any="Any size" options={SIZE_BUCKETS} onChange={setSize} />
          <Select
            label="Capability"
            value={cap}
            any="Any capability"
            options={CAPABILITIES}
            onChange={setCap}
          />
          <label class="check">
            <input
              type="checkbox"
              checked={fits}
              onChange={(e: Event) => setFits((e.target as HTMLInputElement).checked)}
            />{" "}
            Fits this cluster
          </label>
          <label
            class="check"
            title="Only models a runner on this cluster's nodes serves (the capability table)"
          >
            <input
              type="checkbox"
              checked={runsFilter}
              onChange={(e: Event) => setRunsHere((e.target as HTMLInputElement).checked)}
            />{" "}
            Runs on this cluster
          </label>
        </form>
        {hidden > 0 && (
          <p class="muted small hidden-note" role="status">
            Hiding {hidden} {hidden === 1 ? "model" : "models"} this cluster cannot run
            {hiddenForRunner > 0 &&
              ` (${hiddenForRunner} need a runner these nodes lack, such as MLX)`}
            . Clear "Runs on this cluster" to see them and why.
          </p>
        )}
        {error && (
          <Notice tone="error" onRetry={() => setAttempt((a) => a + 1)}>
            Could not read the catalogue: {error}
          </Notice>
        )}
        {models && shown.length === 0 && <Empty>No model matches these filters.</Empty>}
        <ul class="models" aria-label="Models">
          {shown.slice(0, limit).map((m) => {
            return (
              <li key={m.id} class="card model-card" data-model-id={m.id}>
                <div class="model-top">
                  <h3 class="model-name" title={m.id}>{m.name}</h3>
                  <span class="muted small">
                    {m.family || "other"}
                    {m.quantization ? ` · ${m.quantization}` : ""}
                  </span>
                </div>
                <ModelFacts m={m} s={s} free={free} verdict={verdicts.get(m.id)} />
                <div class="tags">{m.tags.map((t) => <span key={t} class="tag">{t}</span>)}</div>
                <button
                  type="button"
                  class="btn"
                  onClick={() => {
                    setSelected(m);
                    scrollTo({ top: 0, behavior: "smooth" });
                  }}
                  aria-label={`Preview placement of ${m.name}`}
                >
                  Preview &amp; launch
                </button>
              </li>
            );
          })}
        </ul>
        {shown.length > limit && (
          <div class="more">
            <span class="muted">Showing {limit} of {shown.length}.</span>
            <button type="button" class="btn" onClick={() => setLimit(limit + PAGE)}>Show more</button>
          </div>
        )}
      </section>
    </div>
  );
}
