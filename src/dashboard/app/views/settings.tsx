/** @jsxImportSource hono/jsx/dom */
/**
 * Settings: the node's skulk.yaml as a form (`GET /config`), saved with `PUT /config`; a refused value
 * is shown next to its field, using the key the server names in `param`.
 */
import { useEffect, useState } from "hono/jsx/dom";
import { ApiFailure, type ConfigView, getJson, sendJson, type SettingView } from "../api.ts";
import type { ExtensionsStatus } from "../../../extensions/api.ts";
import { Empty, Notice } from "../ui.tsx";

type Values = Record<string, string>;

function fileValue(config: Record<string, unknown>, key: string): unknown {
  let cur: unknown = config;
  for (const part of key.split(".")) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function show(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (Array.isArray(v)) return v.join(", ");
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

/** The form's text back into typed YAML values; an empty field removes the key from the file. */
function typed(kind: SettingView["kind"], text: string): unknown {
  const t = text.trim();
  if (kind === "number" && /^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if (kind === "boolean" && (t === "true" || t === "false")) return t === "true";
  if (kind === "list") return t.split(",").map((x) => x.trim()).filter(Boolean);
  return t;
}

export function buildConfig(
  base: Record<string, unknown>,
  settings: SettingView[],
  values: Values,
): Record<string, unknown> {
  const out: Record<string, unknown> = structuredClone(base);
  for (const s of settings) {
    // A mapping is edited in skulk.yaml itself: the file's value (in base) is written back as it was.
    if (s.kind === "mapping") continue;
    const parts = s.key.split(".");
    const text = values[s.key] ?? "";
    let section = out;
    for (const p of parts.slice(0, -1)) {
      if (typeof section[p] !== "object" || section[p] === null) section[p] = {};
      section = section[p] as Record<string, unknown>;
    }
    const leaf = parts.at(-1)!;
    if (text.trim() === "") delete section[leaf];
    else section[leaf] = typed(s.kind, text);
  }
  for (const [k, v] of Object.entries(out)) {
    if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0) delete out[k];
  }
  return out;
}

const SECTION_NAMES: Record<string, string> = {
  api: "API",
  node: "This node",
  cluster: "Cluster",
  logging: "Logging",
  inference: "Inference",
  extensions: "Extensions",
};

const HELP: Record<string, string> = {
  "api.port": "HTTP port of the API and this dashboard (0 = any free port).",
  "api.host": "Address the API binds.",
  "api.key": "Bearer key clients must send (at least 16 characters).",
  "node.data_dir": "Where state and identity live.",
  "node.models_dir": "Where model files are stored.",
  "node.friendly_name": "The name shown for this node.",
  "node.worker": "Whether this node runs models (true or false).",
  "cluster.namespace": "Nodes only join others in the same namespace.",
  "cluster.peers": "Static peers as host:port, comma-separated.",
  "cluster.node_timeout_seconds": "A node silent this long is timed out.",
  "logging.level": "trace, debug, info, warning or error.",
  "logging.format": "auto, json or pretty.",
  "inference.default_model": "Placed at start when nothing is placed.",
  "extensions.modules": "Extension modules loaded at start: paths, URLs or npm: specifiers, comma-separated.",
  "extensions.config": "Each extension's own settings; edit them in skulk.yaml.",
  "extensions.disable": "true turns every extension off.",
};

/** The extensions this node runs and those it refused (`GET /v1/extensions`). */
function ExtensionsPanel() {
  const [status, setStatus] = useState<ExtensionsStatus | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    getJson<ExtensionsStatus>("/v1/extensions").then(setStatus).catch((e) =>
      setError(e instanceof ApiFailure ? e.message : String(e))
    );
  }, []);
  if (error) return <Notice tone="error">Could not read the extensions: {error}</Notice>;
  if (!status) return null;
  const none = status.loaded.length === 0 && status.refused.length === 0;
  return (
    <section class="panel extensions" aria-label="Extensions">
      <h2>Extensions</h2>
      {!status.enabled && <p class="muted">Disabled on this node (SKULK_EXTENSIONS_DISABLE).</p>}
      {status.enabled && none && <p class="muted">None loaded.</p>}
      <ul class="extension-list">
        {status.loaded.map((e) => (
          <li key={e.name}>
            <strong>{e.name}</strong> <span class="badge tone-ok">loaded</span>{" "}
            <span class="muted small mono">{e.source}</span>
            <div class="small">
              {e.hooks.join(", ") || "no hooks"} · {e.calls.onChatRequest} requests, {e.calls.onChatResponse}
              {" "}
              answers seen · {e.errors} errors, {e.timeouts} timeouts
              {e.lastError && <span class="field-error">last: {e.lastError.hook}: {e.lastError.message}
              </span>}
            </div>
          </li>
        ))}
        {status.refused.map((r) => (
          <li key={r.source}>
            <strong>{r.name ?? r.source}</strong> <span class="badge tone-error">refused</span>{" "}
            <span class="muted small mono">{r.source}</span>
            <div class="small field-error">{r.reason}</div>
          </li>
        ))}
      </ul>
    </section>
  );
}

export function SettingsView() {
  const [view, setView] = useState<ConfigView | null>(null);
  const [values, setValues] = useState<Values>({});
  const [loadError, setLoadError] = useState<string | null>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [formError, setFormError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    getJson<ConfigView>("/config").then((v) => {
      setView(v);
      setValues(
        Object.fromEntries(
          // A cluster-wide key lives in the cluster's log, not the file: the form shows the cluster's value.
          (v.effective.settings ?? []).map((s) => [
            s.key,
            show(s.scope === "cluster" ? v.effective.cluster?.[s.key] : fileValue(v.config, s.key)),
          ]),
        ),
      );
    }).catch((e) => setLoadError(e instanceof ApiFailure ? e.message : String(e)));
  }, [attempt]);
  if (loadError) {
    return (
      <Notice
        tone="error"
        onRetry={() => {
          setLoadError(null);
          setAttempt((a) => a + 1);
        }}
      >
        Could not read the config: {loadError}
      </Notice>
    );
  }
  if (!view) return <Empty>Reading the config…</Empty>;
  const settings = view.effective.settings ?? [];
  const sections = [...new Set(settings.map((s) => s.key.split(".")[0]))];
  const save = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setSaved(null);
    setErrors({});
    setFormError(null);
    try {
      const r = await sendJson<{ message: string }>("PUT", "/config", {
        config: buildConfig(view.config, settings, values),
      });
      setSaved(r.message);
    } catch (err) {
      if (err instanceof ApiFailure && err.status === 422) {
        const body = err.body as { problems?: { param: string; message: string }[] } | null;
        const list = body?.problems ?? (err.param ? [{ param: err.param, message: err.message }] : []);
        const byField: Record<string, string> = {};
        for (const p of list) if (settings.some((s) => s.key === p.param)) byField[p.param] ??= p.message;
        setErrors(byField);
        const unplaced = list.filter((p) => !byField[p.param] || byField[p.param] !== p.message);
        if (Object.keys(byField).length === 0 || unplaced.length) {
          setFormError(unplaced.map((p) => p.message).join("; ") || err.message);
        }
        const first = Object.keys(byField)[0];
        if (first) document.getElementById(`set-${first}`)?.focus();
      } else setFormError(err instanceof ApiFailure ? err.message : String(err));
    } finally {
      setSaving(false);
    }
  };
  return (
    <div class="view settings">
      <div class="view-head">
        <h1>Settings</h1>
        <p class="muted">
          <span class="mono">{view.configPath}</span>{" "}
          {view.fileExists ? "" : "(not created yet; saving creates it)"}
          {view.effective.has_hf_token ? " · Hugging Face token set" : ""}
        </p>
      </div>
      <form class="panel settings-form" onSubmit={save} noValidate>
        {sections.map((sec) => (
          <fieldset key={sec}>
            <legend>{SECTION_NAMES[sec] ?? sec}</legend>
            {settings.filter((s) => s.key.startsWith(`${sec}.`)).map((s) => {
              const id = `set-${s.key}`;
              const err = errors[s.key];
              const running = show(s.running);
              return (
                <div key={s.key} class={`setting ${err ? "has-error" : ""}`}>
                  <label for={id}>{s.key.split(".").slice(1).join(".").replace(/_/g, " ")}</label>
                  {s.kind === "mapping"
                    ? <pre id={id} class="mono small">{values[s.key] || "(none)"}</pre>
                    : (
                      <input
                        id={id}
                        name={s.key}
                        value={values[s.key] ?? ""}
                        placeholder={running ? `running: ${running}` : "not set"}
                        inputMode={s.kind === "number" ? "decimal" : undefined}
                        aria-invalid={err ? "true" : undefined}
                        aria-describedby={`${id}-help${err ? ` ${id}-err` : ""}`}
                        onInput={(e: Event) =>
                          setValues({ ...values, [s.key]: (e.target as HTMLInputElement).value })}
                      />
                    )}
                  <p id={`${id}-help`} class="help">
                    {HELP[s.key] ?? ""}
                    {s.scope === "cluster"
                      ? <span class="scope">cluster-wide: saving sets it on every node</span>
                      : null}
                    {s.env
                      ? (
                        <span class="env">
                          env <span class="mono">{s.env}</span>
                        </span>
                      )
                      : null}
                  </p>
                  {err && <p id={`${id}-err`} class="field-error" role="alert">{err}</p>}
                </div>
              );
            })}
          </fieldset>
        ))}
        {formError && <Notice tone="error">{formError}</Notice>}
        {saved && <Notice tone="info">{saved}</Notice>}
        <div class="form-actions">
          <button type="submit" class="btn btn-primary" disabled={saving}>
            {saving ? "Saving…" : "Save settings"}
          </button>
          <span class="muted small">Flags and environment variables override the file.</span>
        </div>
      </form>
      <ExtensionsPanel />
    </div>
  );
}
