/** @jsxImportSource hono/jsx/dom */
/**
 * Cluster view: every node with its name, role, memory, accelerators, typed network interfaces and
 * links, and the instances and runners on it; refreshed by the shell's live poll of `/state`.
 */
import type { ClusterStateWire } from "../api.ts";
import { bytes, instanceView, percent, runnerState } from "../format.ts";
import type { Live } from "../api.ts";
import { acceleratorsOf, isTimedOut, masterOf, memoryOf, nodeIds, nodeName, shortId } from "../nodes.ts";
import { Badge, Empty, MemoryMeter, Meter, Notice } from "../ui.tsx";

const IFACE_LABEL: Record<string, string> = {
  ethernet: "Ethernet",
  maybe_ethernet: "Ethernet?",
  wifi: "Wi-Fi",
  thunderbolt: "Thunderbolt",
  vpn: "VPN",
  unknown: "unknown",
};

function measured(v: number | null | undefined, unit: string, digits = 0): string {
  return v === null || v === undefined ? "not measured" : `${v.toFixed(digits)} ${unit}`;
}

function Accelerators(props: { s: ClusterStateWire; id: string }) {
  const accs = acceleratorsOf(props.s, props.id);
  const sys = props.s.nodeSystem[props.id];
  if (accs.length === 0) {
    return (
      <div class="kv">
        <span>Accelerator</span>
        <span class="muted">not measured{sys?.temp != null ? ` · CPU ${sys.temp.toFixed(0)} °C` : ""}</span>
      </div>
    );
  }
  return (
    <div class="accs">
      {accs.map((a) => (
        <div class="acc">
          <div class="acc-name">{a.vendor} {a.name}</div>
          {a.vramTotalBytes
            ? (
              <Meter
                label="VRAM"
                ratio={(a.vramUsedBytes ?? 0) / a.vramTotalBytes}
                text={`${bytes(a.vramUsedBytes)} / ${bytes(a.vramTotalBytes)}`}
              />
            )
            : (
              <div class="kv">
                <span>VRAM</span>
                <span class="muted">{a.unifiedMemory ? "shared with RAM" : "not measured"}</span>
              </div>
            )}
          <div class="stats">
            <div>
              <span>Utilisation</span>
              <strong>
                {a.utilizationRatio === null
                  ? <span class="muted">not measured</span>
                  : percent(a.utilizationRatio)}
              </strong>
            </div>
            <div>
              <span>Temperature</span>
              <strong>
                {a.temperatureCelsius === null
                  ? <span class="muted">not measured</span>
                  : `${a.temperatureCelsius.toFixed(0)} °C`}
              </strong>
            </div>
            <div>
              <span>Power</span>
              <strong>
                {a.powerWatts === null
                  ? <span class="muted">not measured</span>
                  : measured(a.powerWatts, "W")}
              </strong>
            </div>
          </div>
        </div>
      ))}
    </div>
  );
}

function NodeCard(props: { s: ClusterStateWire; id: string; local: string | null }) {
  const { s, id } = props;
  const ident = s.nodeIdentities[id];
  const health = s.nodeHealth[id];
  const timedOut = isTimedOut(s, id);
  const mem = memoryOf(s, id);
  const master = masterOf(s);
  const ifaces = s.nodeNetwork[id]?.interfaces ?? [];
  const instances = Object.entries(s.instances).map(([iid, i]) => instanceView(iid, i, s.runners)).filter((
    v,
  ) => v.shards.some((sh) => sh.nodeId === id));
  return (
    <article
      class={`card node ${timedOut ? "node-down" : ""}`}
      aria-labelledby={`node-${id}`}
      data-node-id={id}
    >
      <header class="card-head">
        <div>
          <h3 id={`node-${id}`}>{nodeName(s, id)}</h3>
          <div class="mono muted" title={id}>{shortId(id)}{ident ? ` · ${ident.osVersion}` : ""}</div>
        </div>
        <div class="badges">
          {master === id && <Badge tone="ok">master</Badge>}
          {master !== null && master !== id && <Badge tone="idle">worker</Badge>}
          {props.local === id && <Badge tone="idle">this node</Badge>}
          {timedOut
            ? <Badge tone="error">timed out</Badge>
            : health && health.level !== "ok"
            ? <Badge tone={health.level === "error" ? "error" : "warn"}>{health.level}</Badge>
            : <Badge tone="ok">online</Badge>}
        </div>
      </header>
      {health && health.reasons.length > 0 && (
        <ul class="reasons">
          {health.reasons.map((r) => (
            <li>
              <strong>{r.message}</strong> — {r.remediation}
            </li>
          ))}
        </ul>
      )}
      <MemoryMeter mem={mem} />
      <Accelerators s={s} id={id} />
      <div class="section-label">Network</div>
      {ifaces.length === 0 ? <div class="muted small">no interfaces reported</div> : (
        <ul class="chips">
          {ifaces.map((i) => (
            <li class={`chip chip-${i.interfaceType}`}>
              <span class="chip-type">{IFACE_LABEL[i.interfaceType] ?? i.interfaceType}</span> {i.name}{" "}
              <span class="mono">{i.ipAddress}</span>
            </li>
          ))}
        </ul>
      )}
      <div class="section-label">Instances</div>
      {instances.length === 0 ? <div class="muted small">nothing placed here</div> : (
        <ul class="runners">
          {instances.map((v) => {
            const shard = v.shards.find((sh) => sh.nodeId === id)!;
            const st = runnerState(shard.status);
            return (
              <li>
                <span class="model-name">{v.modelId}</span>
                <span class="muted small">{shard.layers}</span>
                <Badge tone={st.tone} title={st.detail}>{st.label}{st.detail ? ` · ${st.detail}` : ""}</Badge>
              </li>
            );
          })}
        </ul>
      )}
    </article>
  );
}

function Links(props: { s: ClusterStateWire }) {
  const { s } = props;
  const rows: { from: string; to: string; how: string }[] = [];
  for (
    const [src, sinks] of Object.entries(
      s.topology.connections as Record<string, Record<string, Record<string, unknown>[]>>,
    )
  ) {
    for (const [sink, edges] of Object.entries(sinks)) {
      for (const e of edges) {
        const ma = e.sinkMultiaddr as { ip_address?: string; port?: number } | undefined;
        // rttMs is ours: the round trip the source measured on its last gossip exchange over the link.
        const rtt = typeof e.rttMs === "number" ? ` · ${e.rttMs} ms` : "";
        const how = ma
          ? `TCP ${ma.ip_address}:${ma.port}${rtt}`
          : e.sourceRdmaIface
          ? `RDMA ${e.sourceRdmaIface} → ${e.sinkRdmaIface}`
          : "link";
        rows.push({ from: nodeName(s, src), to: nodeName(s, sink), how });
      }
    }
  }
  if (rows.length === 0) return null;
  return (
    <section aria-labelledby="links-h" class="panel">
      <h2 id="links-h">Links</h2>
      <table class="table">
        <thead>
          <tr>
            <th scope="col">From</th>
            <th scope="col">To</th>
            <th scope="col">Over</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr>
              <td>{r.from}</td>
              <td>{r.to}</td>
              <td class="mono">{r.how}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function ClusterView(props: { live: Live }) {
  const { state: s, error, updatedAt, localNodeId } = props.live;
  if (!s) {
    return error
      ? <Notice tone="error" onRetry={props.live.refresh}>{error}</Notice>
      : <Empty>Reading the cluster…</Empty>;
  }
  const ids = nodeIds(s);
  const totals = ids.reduce((t, id) => {
    const m = memoryOf(s, id);
    return m ? { used: t.used + m.used, total: t.total + m.total } : t;
  }, { used: 0, total: 0 });
  const instances = Object.keys(s.instances).length;
  return (
    <div class="view">
      <div class="view-head">
        <h1>Cluster</h1>
        <p class="muted">
          Updated {updatedAt ? new Date(updatedAt).toLocaleTimeString() : "—"} · refreshes every 1.5 s
        </p>
      </div>
      {error && <Notice tone="warn">Lost contact with the node: {error}. Showing the last state.</Notice>}
      <section class="summary" aria-label="Cluster summary">
        <div class="stat">
          <span>Nodes</span>
          <strong>{ids.length}</strong>
        </div>
        <div class="stat">
          <span>Memory in use</span>
          <strong>
            {bytes(totals.used)} <small>of {bytes(totals.total)}</small>
          </strong>
        </div>
        <div class="stat">
          <span>Instances</span>
          <strong>{instances}</strong>
        </div>
        <div class="stat">
          <span>Runners</span>
          <strong>{Object.keys(s.runners).length}</strong>
        </div>
      </section>
      <section aria-label="Nodes" class="grid">
        {ids.length === 0
          ? <Empty>No node has reported yet.</Empty>
          : ids.map((id) => <NodeCard key={id} s={s} id={id} local={localNodeId} />)}
      </section>
      <Links s={s} />
    </div>
  );
}
