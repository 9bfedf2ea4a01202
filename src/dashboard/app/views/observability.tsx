/** @jsxImportSource hono/jsx/dom */
/**
 * Observability: the cluster tracing switch, recent traces, one trace as a waterfall across the nodes it
 * crossed, the merged cluster timeline, and per-node gauges from the live `/state`.
 */
import { useEffect, useState } from "hono/jsx/dom";
import { ApiFailure, getJson, headers, type Live, sendJson } from "../api.ts";
import { percent } from "../format.ts";
import { acceleratorsOf, isTimedOut, memoryOf, nodeIds, nodeName, temperatureOf } from "../nodes.ts";
import {
  micros,
  type TimelineEvent,
  timelineEvents,
  type TraceListEntry,
  type TraceWire,
  waterfall,
} from "../traces.ts";
import { Badge, Empty, MemoryMeter, Meter, Notice } from "../ui.tsx";

const REFRESH_MS = 5000;
const message = (e: unknown) => e instanceof ApiFailure ? e.message : String(e);

/** The trace the page shows, kept in `?trace=` so a trace can be linked to. */
function traceInUrl(): string | null {
  return new URLSearchParams(location.search).get("trace");
}

function TracingSwitch() {
  const [enabled, setEnabled] = useState<boolean | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    getJson<{ enabled: boolean }>("/v1/tracing").then((r) => setEnabled(r.enabled)).catch((e) =>
      setError(message(e))
    );
  }, []);
  const toggle = async () => {
    setBusy(true);
    try {
      const r = await sendJson<{ enabled: boolean }>("PUT", "/v1/tracing", { enabled: !enabled });
      setEnabled(r.enabled);
      setError(null);
    } catch (e) {
      setError(message(e));
    }
    setBusy(false);
  };
  return (
    <div class="panel obs-switch">
      <div class="panel-head">
        <h2>Request tracing</h2>
        {enabled === null ? null : enabled ? <Badge tone="ok">on</Badge> : <Badge tone="idle">off</Badge>}
      </div>
      <p class="muted">
        Cluster-wide: every node records spans of new requests (receive, route, forward, queue, prefill,
        decode, stream).
      </p>
      <button type="button" class="btn" disabled={enabled === null || busy} onClick={toggle}>
        {enabled ? "Turn tracing off" : "Turn tracing on"}
      </button>
      {error && <Notice tone="error">{error}</Notice>}
    </div>
  );
}

function TraceList(props: { selected: string | null; onSelect: (id: string) => void }) {
  const [list, setList] = useState<TraceListEntry[] | null>(null);
  const [partial, setPartial] = useState<{ nodeId: string; error: string }[]>([]);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const r = await getJson<{ traces: TraceListEntry[]; partial?: { nodeId: string; error: string }[] }>(
          "/v1/traces/cluster?limit=50",
        );
        if (stopped) return;
        setList(r.traces);
        setPartial(r.partial ?? []);
        setError(null);
      } catch (e) {
        if (!stopped) setError(message(e));
      }
      if (!stopped) timer = setTimeout(load, REFRESH_MS);
    };
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  return (
    <section class="panel" aria-labelledby="traces-h">
      <div class="panel-head">
        <h2 id="traces-h">Recent traces</h2>
      </div>
      {error && <Notice tone="error">{error}</Notice>}
      {partial.length > 0 && (
        <Notice tone="warn">
          Not every node answered: {partial.map((p) => `${p.nodeId.slice(0, 12)} (${p.error})`).join(", ")}
        </Notice>
      )}
      {list === null
        ? <Empty>Reading traces…</Empty>
        : list.length === 0
        ? <Empty>No traces yet. Turn tracing on and send a request.</Empty>
        : (
          <table class="table obs-traces">
            <thead>
              <tr>
                <th>When</th>
                <th>Model</th>
                <th>Nodes</th>
                <th>Wall time</th>
              </tr>
            </thead>
            <tbody>
              {list.map((t) => (
                <tr
                  key={t.taskId}
                  class={t.taskId === props.selected ? "selected" : ""}
                  data-task-id={t.taskId}
                >
                  <td>
                    <a
                      href={`?trace=${t.taskId}`}
                      onClick={(e: MouseEvent) => {
                        e.preventDefault();
                        props.onSelect(t.taskId);
                      }}
                    >
                      {new Date(t.createdAt).toLocaleTimeString()}
                    </a>
                  </td>
                  <td class="mono">{t.modelId ?? "—"}</td>
                  <td>{t.sourceNodes.map((n) => n.friendlyName ?? n.nodeId.slice(0, 12)).join(" → ")}</td>
                  <td>{micros(t.totalWallTimeUs)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </section>
  );
}

function Waterfall(props: { taskId: string }) {
  const [trace, setTrace] = useState<TraceWire | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setTrace(null);
    setError(null);
    getJson<TraceWire>(`/v1/traces/cluster/${encodeURIComponent(props.taskId)}`).then(setTrace).catch((e) =>
      setError(message(e))
    );
  }, [props.taskId]);
  const download = async () => {
    const res = await fetch(`/v1/traces/cluster/${encodeURIComponent(props.taskId)}/raw`, {
      headers: headers(),
    });
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = `trace_${props.taskId}.json`;
    a.click();
    URL.revokeObjectURL(url);
  };
  const w = trace ? waterfall(trace) : null;
  return (
    <section class="panel obs-waterfall" aria-labelledby="waterfall-h" data-task-id={props.taskId}>
      <div class="panel-head">
        <h2 id="waterfall-h">
          Trace <span class="mono">{props.taskId.slice(0, 8)}</span>
        </h2>
        {w && <span class="muted">{micros(w.totalUs)} end to end</span>}
        <button type="button" class="btn btn-small" onClick={download}>Chrome trace file</button>
      </div>
      {error && <Notice tone="error">{error}</Notice>}
      {trace?.partial?.length
        ? (
          <Notice tone="warn">
            Missing spans of: {trace.partial.map((p) => p.nodeId.slice(0, 12)).join(", ")}
          </Notice>
        )
        : null}
      {!w ? (!error && <Empty>Reading the trace…</Empty>) : (
        <div class="waterfall" role="list">
          {w.lanes.map((lane) => (
            <div class="lane" key={lane.nodeId} data-node-id={lane.nodeId} role="listitem">
              <div class="lane-label" title={lane.nodeId}>{lane.label}</div>
              <div class="lane-bars">
                {lane.bars.map((b) => (
                  <div class="bar-row">
                    <div
                      class={`bar cat-${b.category}`}
                      data-category={b.category}
                      style={`margin-left:${b.left.toFixed(2)}%;width:${b.width.toFixed(2)}%`}
                      title={`${b.name}: ${micros(b.durationUs)} at +${micros(b.offsetUs)}`}
                    />
                    <span class="bar-text">{b.name} · {micros(b.durationUs)}</span>
                  </div>
                ))}
              </div>
            </div>
          ))}
        </div>
      )}
    </section>
  );
}

function Timeline() {
  const [events, setEvents] = useState<TimelineEvent[] | null>(null);
  const [partial, setPartial] = useState<string[]>([]);
  const [status, setStatus] = useState<string | null>(null);
  useEffect(() => {
    getJson<unknown>("/v1/diagnostics/cluster/timeline").then((raw) => {
      const t = timelineEvents(raw);
      setEvents(t.events.slice(-200).reverse());
      setPartial(t.partial);
    }).catch((e) =>
      setStatus(
        e instanceof ApiFailure && e.status === 404 ? "Timeline unavailable on this node." : message(e),
      )
    );
  }, []);
  return (
    <section class="panel" aria-labelledby="timeline-h">
      <div class="panel-head">
        <h2 id="timeline-h">Cluster timeline</h2>
      </div>
      {status && <Notice tone="info">{status}</Notice>}
      {partial.length > 0 && <Notice tone="warn">Not every node answered: {partial.join(", ")}</Notice>}
      {events === null
        ? (!status && <Empty>Reading the timeline…</Empty>)
        : events.length === 0
        ? <Empty>No events recorded.</Empty>
        : (
          <ol class="obs-timeline">
            {events.map((e) => (
              <li>
                <span class="mono muted">{new Date(e.at).toLocaleTimeString()}</span>{" "}
                <span class="mono">{e.nodeId.slice(0, 12)}</span> <Badge tone="idle">{e.kind}</Badge>{" "}
                {e.summary}
              </li>
            ))}
          </ol>
        )}
    </section>
  );
}

function Gauges(props: { live: Live }) {
  const s = props.live.state;
  if (!s) return <Empty>Reading the cluster…</Empty>;
  return (
    <section class="panel" aria-labelledby="gauges-h">
      <div class="panel-head">
        <h2 id="gauges-h">Nodes</h2>
      </div>
      <ul class="op-list obs-gauges">
        {nodeIds(s).map((id) => {
          const acc = acceleratorsOf(s, id)[0];
          const temp = temperatureOf(s, id);
          return (
            <li key={id} class="card" data-node-id={id}>
              <div class="card-head">
                <h3>{nodeName(s, id)}</h3>
                {isTimedOut(s, id) ? <Badge tone="error">timed out</Badge> : <Badge tone="ok">online</Badge>}
              </div>
              <MemoryMeter mem={memoryOf(s, id)} />
              {acc && acc.utilizationRatio !== null
                ? <Meter label="GPU" ratio={acc.utilizationRatio} text={percent(acc.utilizationRatio)} />
                : null}
              <div class="kv">
                <span>Temperature</span>
                <span>{temp === null ? "not measured" : `${temp.toFixed(0)} °C`}</span>
              </div>
            </li>
          );
        })}
      </ul>
    </section>
  );
}

export function ObservabilityView(props: { live: Live }) {
  const [selected, setSelected] = useState<string | null>(traceInUrl());
  const select = (id: string) => {
    history.replaceState(null, "", `?trace=${encodeURIComponent(id)}`);
    setSelected(id);
  };
  return (
    <div class="view observability">
      <div class="view-head">
        <h1>Observability</h1>
        <p class="muted">Traces, the cluster timeline and live gauges</p>
      </div>
      <TracingSwitch />
      <TraceList selected={selected} onSelect={select} />
      {selected && <Waterfall taskId={selected} />}
      <Timeline />
      <Gauges live={props.live} />
    </div>
  );
}
