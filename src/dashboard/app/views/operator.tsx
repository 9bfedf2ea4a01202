/** @jsxImportSource hono/jsx/dom */
/**
 * Operator panel, laid out for a phone first: per-node live memory, GPU and temperature, and a
 * one-tap restart (`POST /admin/restart?node_id=`) behind a confirmation.
 */
import { useState } from "hono/jsx/dom";
import { ApiFailure, sendJson } from "../api.ts";
import { bytes, percent } from "../format.ts";
import type { Live } from "../api.ts";
import { acceleratorsOf, isTimedOut, memoryOf, nodeIds, nodeName, temperatureOf } from "../nodes.ts";
import { Badge, Empty, MemoryMeter, Notice } from "../ui.tsx";

export function OperatorView(props: { live: Live }) {
  const s = props.live.state;
  const [confirm, setConfirm] = useState<string | null>(null);
  const [results, setResults] = useState<Record<string, { tone: "info" | "error"; text: string }>>({});
  if (!s) {
    return props.live.error
      ? <Notice tone="error" onRetry={props.live.refresh}>{props.live.error}</Notice>
      : <Empty>Reading the cluster…</Empty>;
  }
  const restart = async (id: string) => {
    setConfirm(null);
    try {
      const r = await sendJson<{ status: string }>(
        "POST",
        `/admin/restart?node_id=${encodeURIComponent(id)}`,
      );
      setResults((x) => ({
        ...x,
        [id]: {
          tone: "info",
          text: r.status === "restart_sent"
            ? "Restart sent to the node."
            : "Restarting; it will be back shortly.",
        },
      }));
    } catch (e) {
      setResults((x) => ({
        ...x,
        [id]: { tone: "error", text: `Restart refused: ${e instanceof ApiFailure ? e.message : String(e)}` },
      }));
    }
  };
  return (
    <div class="view operator">
      <div class="view-head">
        <h1>Operator</h1>
        <p class="muted">{nodeIds(s).length} node{nodeIds(s).length === 1 ? "" : "s"} · live</p>
      </div>
      <ul class="op-list">
        {nodeIds(s).map((id) => {
          const mem = memoryOf(s, id);
          const acc = acceleratorsOf(s, id)[0];
          const temp = temperatureOf(s, id);
          const down = isTimedOut(s, id);
          const name = nodeName(s, id);
          return (
            <li key={id} class={`card op-node ${down ? "node-down" : ""}`} data-node-id={id}>
              <div class="card-head">
                <h2>{name}</h2>
                {down ? <Badge tone="error">timed out</Badge> : <Badge tone="ok">online</Badge>}
              </div>
              <MemoryMeter mem={mem} />
              <div class="op-stats">
                <div>
                  <span>GPU</span>
                  {acc && acc.utilizationRatio !== null
                    ? <strong>{percent(acc.utilizationRatio)}</strong>
                    : <em>not measured</em>}
                </div>
                <div>
                  <span>VRAM</span>
                  {acc?.vramTotalBytes
                    ? <strong>{bytes(acc.vramUsedBytes)} / {bytes(acc.vramTotalBytes)}</strong>
                    : <em>not measured</em>}
                </div>
                <div>
                  <span>Temperature</span>
                  {temp === null ? <em>not measured</em> : <strong>{temp.toFixed(0)} °C</strong>}
                </div>
              </div>
              {confirm === id
                ? (
                  <div class="confirm" role="alertdialog" aria-label={`Confirm restart of ${name}`}>
                    <p>
                      Restart <strong>{name}</strong>? Its models stop until it is back.
                    </p>
                    <div class="confirm-buttons">
                      <button type="button" class="btn btn-danger big" onClick={() => restart(id)}>
                        Restart now
                      </button>
                      <button type="button" class="btn btn-ghost big" onClick={() => setConfirm(null)}>
                        Cancel
                      </button>
                    </div>
                  </div>
                )
                : (
                  <button
                    type="button"
                    class="btn big wide"
                    onClick={() => setConfirm(id)}
                    aria-label={`Restart ${name}`}
                  >
                    Restart
                  </button>
                )}
              {results[id] && <Notice tone={results[id].tone}>{results[id].text}</Notice>}
            </li>
          );
        })}
      </ul>
    </div>
  );
}
