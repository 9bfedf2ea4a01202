/** @jsxImportSource hono/jsx/dom */
/**
 * The dashboard's shell: the page router (one path per view, history API), the live `/state` poll
 * shared by every view, and the navigation. Built by scripts/build-dashboard.ts into static assets.
 */
import { ErrorBoundary, render, useEffect, useState } from "hono/jsx/dom";
import { ApiFailure, apiKey, type ClusterStateWire, getJson, type Live, setApiKey } from "./api.ts";
import "./styles.css";
import { ChatView } from "./views/chat.tsx";
import { ClusterView } from "./views/cluster.tsx";
import { ObservabilityView } from "./views/observability.tsx";
import { OperatorView } from "./views/operator.tsx";
import { SettingsView } from "./views/settings.tsx";
import { StoreView } from "./views/store.tsx";

const VIEWS = [
  { path: "/cluster", label: "Cluster" },
  { path: "/model-store", label: "Model store" },
  { path: "/chat", label: "Chat" },
  { path: "/operator", label: "Operator" },
  { path: "/observability", label: "Observability" },
  { path: "/settings", label: "Settings" },
] as const;
type ViewPath = (typeof VIEWS)[number]["path"];

function currentView(): ViewPath {
  const p = location.pathname.replace(/\/+$/, "");
  return VIEWS.find((v) => v.path === p)?.path ?? "/cluster";
}

const POLL_MS = 1500;

function useLiveState(): Live {
  const [state, setState] = useState<ClusterStateWire | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [needsKey, setNeedsKey] = useState(false);
  const [updatedAt, setUpdatedAt] = useState<number | null>(null);
  const [localNodeId, setLocal] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    getJson<string>("/node_id").then(setLocal).catch(() => undefined);
  }, [tick]);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const s = await getJson<ClusterStateWire>("/state");
        if (stopped) return;
        setState(s);
        setError(null);
        setNeedsKey(false);
        setUpdatedAt(Date.now());
      } catch (e) {
        if (!stopped) {
          setError(e instanceof ApiFailure ? e.message : String(e));
          setNeedsKey(e instanceof ApiFailure && e.status === 401);
        }
      }
      if (!stopped) timer = setTimeout(poll, document.hidden ? POLL_MS * 4 : POLL_MS);
    };
    poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [tick]);
  return { state, error, needsKey, updatedAt, localNodeId, refresh: () => setTick((t) => t + 1) };
}

/** Asks for the node's API key when it refuses requests without one; the key stays in this browser. */
function KeyPrompt(props: { onSaved: () => void }) {
  const [value, setValue] = useState("");
  const had = apiKey() !== null;
  return (
    <form
      class="panel key-prompt"
      aria-labelledby="key-h"
      onSubmit={(e: Event) => {
        e.preventDefault();
        setApiKey(value.trim() || null);
        props.onSaved();
      }}
    >
      <h2 id="key-h">This node needs its API key</h2>
      <p class="muted">
        {had ? "The key saved in this browser was refused. " : ""}
        The node was started with{" "}
        <span class="mono">api.key</span>; enter that key to use the dashboard. It is kept in this browser
        only.
      </p>
      <div class="key-row">
        <label class="sr-only" for="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autocomplete="current-password"
          value={value}
          onInput={(e: Event) => setValue((e.target as HTMLInputElement).value)}
        />
        <button type="submit" class="btn btn-primary" disabled={!value.trim()}>Use key</button>
      </div>
    </form>
  );
}

/** A view that threw while rendering says so instead of freezing the page. */
function ViewCrashed(props: { error: Error }) {
  console.error(props.error);
  return (
    <div class="notice notice-error" role="alert">
      <div>
        This view failed to draw:{" "}
        {props.error.message}. Reload the page; if it persists, report it with the browser console.
      </div>
      <button type="button" class="btn btn-small" onClick={() => location.reload()}>Reload</button>
    </div>
  );
}

function App() {
  const [view, setView] = useState<ViewPath>(currentView());
  const live = useLiveState();
  useEffect(() => {
    const onPop = () => setView(currentView());
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);
  useEffect(() => {
    const label = VIEWS.find((v) => v.path === view)?.label ?? "";
    document.title = `${label} · Skulk`;
  }, [view]);
  const go = (e: MouseEvent, path: ViewPath) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    if (path !== location.pathname) history.pushState(null, "", path);
    setView(path);
    document.getElementById("main")?.focus();
  };
  const nodes = live.state ? live.state.topology.nodes.length : 0;
  return (
    <div class="shell">
      <a class="skip" href="#main">Skip to content</a>
      <header class="topbar">
        <a
          class="brand"
          href="/cluster"
          onClick={(e: MouseEvent) => go(e, "/cluster")}
          aria-label="Skulk home"
        >
          <svg viewBox="0 0 32 32" width="26" height="26" aria-hidden="true">
            <rect width="32" height="32" rx="7" fill="#1e293b" />
            <path
              d="M7 23l4-13 5 6 5-6 4 13"
              fill="none"
              stroke="#fb923c"
              stroke-width="3"
              stroke-linecap="round"
              stroke-linejoin="round"
            />
          </svg>
          <span>Skulk</span>
        </a>
        <nav aria-label="Views">
          <ul>
            {VIEWS.map((v) => (
              <li>
                <a
                  href={v.path}
                  aria-current={view === v.path ? "page" : undefined}
                  onClick={(e: MouseEvent) => go(e, v.path)}
                >
                  {v.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div
          class={`conn ${live.error ? "conn-down" : live.state ? "conn-up" : ""}`}
          role="status"
          aria-live="polite"
        >
          <span class="dot" aria-hidden="true" />
          {live.error
            ? "node unreachable"
            : live.state
            ? `${nodes} node${nodes === 1 ? "" : "s"} · live`
            : "connecting…"}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {live.needsKey && <KeyPrompt onSaved={live.refresh} />}
        <ErrorBoundary fallbackRender={(e: Error) => <ViewCrashed error={e} />}>
          {view === "/cluster" && <ClusterView live={live} />}
          {view === "/model-store" && <StoreView live={live} />}
          {view === "/chat" && <ChatView live={live} />}
          {view === "/operator" && <OperatorView live={live} />}
          {view === "/observability" && <ObservabilityView live={live} />}
          {view === "/settings" && <SettingsView />}
        </ErrorBoundary>
      </main>
    </div>
  );
}

render(<App />, document.getElementById("root")!);
