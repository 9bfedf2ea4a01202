/** @jsxImportSource hono/jsx/dom */
/**
 * Small shared pieces of the dashboard's look: meters, badges, notices, the filter drop-down.
 * (Reading nodes out of `/state` is nodes.ts.)
 */
import type { Child } from "hono/jsx";
import { bytes, type Tone } from "./format.ts";

export function Meter(props: { label: string; ratio: number; text: string; tone?: Tone }) {
  const pct = Math.max(0, Math.min(1, Number.isFinite(props.ratio) ? props.ratio : 0)) * 100;
  const tone = props.tone ?? (pct > 90 ? "error" : pct > 75 ? "warn" : "ok");
  return (
    <div class="meter">
      <div class="meter-head">
        <span>{props.label}</span>
        <span class="meter-text">{props.text}</span>
      </div>
      <div
        class={`meter-track tone-${tone}`}
        role="meter"
        aria-label={props.label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={Math.round(pct)}
        aria-valuetext={props.text}
      >
        <div class="meter-fill" style={`width:${pct.toFixed(1)}%`} />
      </div>
    </div>
  );
}

export function MemoryMeter(props: { mem: { used: number; total: number } | null }) {
  const { mem } = props;
  if (!mem) {
    return (
      <div class="kv">
        <span>Memory</span>
        <span class="muted">not measured</span>
      </div>
    );
  }
  return (
    <Meter label="Memory" ratio={mem.used / mem.total} text={`${bytes(mem.used)} / ${bytes(mem.total)}`} />
  );
}

export function Badge(props: { tone: Tone; children: Child; title?: string }) {
  return <span class={`badge tone-${props.tone}`} title={props.title}>{props.children}</span>;
}

export function Notice(props: { tone: "error" | "warn" | "info"; children: Child; onRetry?: () => void }) {
  return (
    <div class={`notice notice-${props.tone}`} role={props.tone === "error" ? "alert" : "status"}>
      <div>{props.children}</div>
      {props.onRetry && <button type="button" class="btn btn-small" onClick={props.onRetry}>Retry</button>}
    </div>
  );
}

/** A labelled drop-down whose first option means "no filter". */
export function Select(
  props: {
    label: string;
    value: string;
    any: string;
    options: { id: string; label: string }[];
    onChange: (v: string) => void;
  },
) {
  return (
    <label class="field">
      <span>{props.label}</span>
      <select
        value={props.value}
        onChange={(e: Event) => props.onChange((e.target as HTMLSelectElement).value)}
      >
        <option value="">{props.any}</option>
        {props.options.map((o) => (
          <option key={o.id} value={o.id} selected={o.id === props.value}>{o.label}</option>
        ))}
      </select>
    </label>
  );
}

export function Empty(props: { children: Child }) {
  return <p class="empty">{props.children}</p>;
}
