/**
 * Measuring instruments of the chaos suite: a steady chat load with a client-side hang deadline, event
 * writers inside each node's namespace, the acknowledged-then-lost check over every node's SQLite log,
 * orphan engines found by network namespace and process ancestry, and the one line of figures per scenario.
 */
import { queryReadOnly } from "../../src/store/readonly.ts";
import { DENO } from "../helpers/daemon.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

// ---------------------------------------------------------------- chat load

export interface ChatResult {
  start: number;
  end: number;
  stream: boolean;
  /** null when the chat succeeded, else the kind of failure. */
  failure: string | null;
}

/** Past this a chat counts as a hang: the client gives up, as a real one would. */
export const HANG_MS = 10_000;

/** One small chat; null when it succeeded, else the kind of failure. */
export async function oneChat(url: string, model: string, stream: boolean): Promise<string | null> {
  let res: Response;
  const signal = AbortSignal.timeout(HANG_MS);
  try {
    res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model,
        messages: [{ role: "user", content: "Say hello" }],
        max_tokens: 8,
        stream,
      }),
      signal,
    });
  } catch (e) {
    return signal.aborted ? "hang" : `connect(${(e as Error).name})`;
  }
  let text: string;
  try {
    text = await res.text();
  } catch {
    return signal.aborted ? "hang" : "body-cut";
  }
  if (!res.ok) return `http-${res.status}`;
  if (!stream) {
    try {
      const body = JSON.parse(text) as { choices?: { message?: unknown }[] };
      return body.choices?.[0]?.message ? null : "bad-body";
    } catch {
      return "bad-body";
    }
  }
  // A stream that failed must say so in one error event; one that just stops is the worst kind.
  if (/^data: \{"error"/m.test(text)) return "stream-error-event";
  if (!/^data: \[DONE\]/m.test(text)) return "stream-cut";
  return null;
}

/** Starts one small chat every `everyMs` through `url` (alternately streamed and not) until stopped. */
export class ChatLoad {
  readonly results: ChatResult[] = [];
  #inflight = new Set<Promise<void>>();
  #timer: ReturnType<typeof setInterval>;
  #n = 0;

  constructor(url: string, model: string, everyMs = 200) {
    this.#timer = setInterval(() => {
      // Bounded: with the hang deadline, at most HANG_MS / everyMs chats can be in flight anyway.
      if (this.#inflight.size >= 2 * HANG_MS / everyMs) return;
      const stream = this.#n++ % 2 === 1;
      const start = Date.now();
      const p = oneChat(url, model, stream).then((failure) => {
        this.results.push({ start, end: Date.now(), stream, failure });
      });
      this.#inflight.add(p);
      void p.finally(() => this.#inflight.delete(p));
    }, everyMs);
  }

  /** Stops starting chats and waits for those in flight (each ends by its deadline). */
  async stop(): Promise<ChatResult[]> {
    clearInterval(this.#timer);
    await Promise.all([...this.#inflight]);
    return this.results.sort((a, b) => a.start - b.start);
  }
}

/**
 * Seconds from the fault to the model serving again: the end of the first successful chat started after
 * the last failed one. 0 when no chat failed; null when the last chat failed (not serving at the end).
 */
export function recoverySeconds(results: ChatResult[], faultAt: number): number | null {
  const bad = results.filter((r) => r.failure !== null && r.end >= faultAt);
  if (bad.length === 0) return 0;
  const lastBad = Math.max(...bad.map((r) => r.start));
  const good = results.find((r) => r.failure === null && r.start > lastBad);
  return good ? Math.max(0, (good.end - faultAt) / 1000) : null;
}

// ---------------------------------------------------------------- event writers

export interface Ack {
  node: number;
  at: number;
  id: string;
}

export interface Writer {
  stop(): Promise<Ack[]>;
}

/** One writer per node, each inside that node's namespace so a cut link does not hide its acks from us. */
export function startWriter(netns: string, node: number, port: number, seconds: number): Writer {
  const child = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      netns,
      DENO,
      "run",
      "-A",
      "--quiet",
      `${ROOT}tests/chaos/writer.ts`,
      String(port),
      String(seconds),
      "200",
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const out = child.output();
  return {
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* finished on its own */ }
      const text = new TextDecoder().decode((await out).stdout);
      return [...text.matchAll(/^ack (\d+) (\S+)$/gm)].map((m) => ({ node, at: Number(m[1]), id: m[2] }));
    },
  };
}

// ---------------------------------------------------------------- lost events

export interface NodeLog {
  idxOf: Map<string, number>;
  idAt: Map<number, string>;
  snapshot: { idx: number; eventId: string | null } | null;
}

/** A node's log as it persisted it: its events table plus the snapshot it may have restarted from. */
export async function readLog(dataDir: string): Promise<NodeLog> {
  const db = `${dataDir}/skulk.db`;
  const { rows } = await queryReadOnly(db, "SELECT idx, payload FROM events");
  const idxOf = new Map<string, number>();
  const idAt = new Map<number, string>();
  for (const r of rows) {
    const body = Object.values(JSON.parse(String(r.payload)) as Record<string, { eventId: string }>)[0];
    idxOf.set(body.eventId, Number(r.idx));
    idAt.set(Number(r.idx), body.eventId);
  }
  const snap = await queryReadOnly(db, "SELECT value FROM kv WHERE key = 'cluster.snapshot'");
  const snapshot = snap.rows[0]
    ? JSON.parse(String(snap.rows[0].value)) as { idx: number; eventId: string | null }
    : null;
  return { idxOf, idAt, snapshot };
}

/**
 * Whether `log` holds event `id`: in its table, or folded into its snapshot (a node that started over from
 * the master's snapshot drops the rows before it), which another node's table proves by sharing the
 * snapshot's event at its index and holding `id` at or before it.
 */
function holds(log: NodeLog, id: string, all: NodeLog[]): boolean {
  if (log.idxOf.has(id)) return true;
  const s = log.snapshot;
  if (!s?.eventId) return false;
  return all.some((o) => o.idAt.get(s.idx) === s.eventId && (o.idxOf.get(id) ?? Infinity) <= s.idx);
}

/** Acknowledged event ids missing from at least one of the given nodes' logs, and how many each misses. */
export function lostEvents(acks: Ack[], logs: NodeLog[]): { lost: string[]; missing: number[] } {
  const ids = [...new Set(acks.map((a) => a.id))];
  const missing = logs.map((l) => ids.filter((id) => !holds(l, id, logs)).length);
  return { lost: ids.filter((id) => !logs.every((l) => holds(l, id, logs))), missing };
}

// ---------------------------------------------------------------- processes in the namespaces

export interface Proc {
  pid: number;
  ppid: number;
  exe: string;
}

function ppidOf(pid: number): number | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // The command name may hold spaces and parentheses: the fields after it start at the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" ? null : Number(fields[1]);
  } catch {
    return null;
  }
}

/** Live processes whose network namespace is one of these named namespaces (`ip netns add` names). */
export function processesIn(netnsNames: string[]): Proc[] {
  const inodes = new Set<string>();
  for (const n of netnsNames) {
    try {
      inodes.add(`net:[${Deno.statSync(`/run/netns/${n}`).ino}]`);
    } catch { /* already removed */ }
  }
  const out: Proc[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const pid = Number(e.name);
    try {
      if (!inodes.has(Deno.readLinkSync(`/proc/${pid}/ns/net`))) continue;
      const ppid = ppidOf(pid);
      if (ppid === null) continue;
      let exe = "?";
      try {
        exe = Deno.readLinkSync(`/proc/${pid}/exe`);
      } catch { /* exiting */ }
      out.push({ pid, ppid, exe });
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** A skulk daemon: a Deno process running src/main.ts's `run` (however it was started, restarted included). */
function isDaemon(pid: number): boolean {
  try {
    const argv = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0");
    return argv.some((a) => a.endsWith("src/main.ts")) && argv.includes("run");
  } catch {
    return false;
  }
}

function ancestors(pid: number): number[] {
  const out: number[] = [];
  for (let p = ppidOf(pid); p !== null && p > 1 && out.length < 64; p = ppidOf(p)) out.push(p);
  return out;
}

/**
 * Processes in the scenario's namespaces that no live daemon owns: neither a daemon nor below one (directly
 * or through a wrapper), nor this test's own (its writers). A killed node's engines land here.
 */
export function orphans(netnsNames: string[]): Proc[] {
  return processesIn(netnsNames).filter((p) => {
    if (isDaemon(p.pid)) return false;
    const up = ancestors(p.pid);
    return !up.includes(Deno.pid) && !up.some(isDaemon);
  });
}

/** SIGKILLs every process left in the namespaces and waits until none is left (teardown). */
export async function sweep(netnsNames: string[]): Promise<void> {
  for (let round = 0; round < 50; round++) {
    const left = processesIn(netnsNames);
    if (left.length === 0) return;
    for (const p of left) {
      try {
        Deno.kill(p.pid, "SIGKILL");
      } catch { /* gone */ }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------- figures

export interface Figures {
  scenario: string;
  /** Seconds from the fault to the model serving again; null when it was not serving at the end. */
  recovery_s: number | null;
  chats: number;
  failures: number;
  failure_kinds: Record<string, number>;
  hangs: number;
  /** Seconds from the fault to the start of the first and of the last failed chat. */
  failing_s: [number, number] | null;
  acked: number;
  lost: number;
  /** Lost events missing per node (by slot), when any are. */
  lost_by_node: Record<string, number>;
  /** Which node (by slot) had acknowledged the lost events. */
  lost_acked_via: Record<string, number>;
  orphans: number;
  orphan_binaries: string[];
  /** Every live node named the same master and reached the same log index after the heal. */
  converged: boolean;
  notes: string[];
}

export function chatFigures(results: ChatResult[], faultAt: number) {
  const kinds: Record<string, number> = {};
  for (const r of results) if (r.failure) kinds[r.failure] = (kinds[r.failure] ?? 0) + 1;
  const failed = results.filter((r) => r.failure).map((r) => Math.round((r.start - faultAt) / 100) / 10);
  return {
    chats: results.length,
    failures: failed.length,
    failure_kinds: kinds,
    hangs: kinds.hang ?? 0,
    failing_s: failed.length ? [failed[0], failed[failed.length - 1]] as [number, number] : null,
  };
}

/** Where the machine-readable figures go: one JSON object per line, one line per scenario run. */
export const FIGURES_FILE = Deno.env.get("CHAOS_FIGURES") ?? `${ROOT}tests/.tmp/chaos-figures.jsonl`;

/** Prints the scenario's line of figures and its JSON twin, and appends the JSON to FIGURES_FILE. */
const signed = (x: number) => (x >= 0 ? `+${x}` : `${x}`);

export function report(f: Figures): void {
  const byNode = (r: Record<string, number>) =>
    Object.entries(r).map(([n, c]) => `node ${n} ${c}`).join(", ");
  const kinds = Object.entries(f.failure_kinds).map(([k, n]) => `${k}×${n}`).join(", ");
  const parts = [
    `recovery ${f.recovery_s === null ? "not serving at the end" : `${f.recovery_s.toFixed(1)} s`}`,
    `client failures ${f.failures}/${f.chats}${kinds ? ` (${kinds})` : ""}${
      f.failing_s ? ` from ${signed(f.failing_s[0])} s to ${signed(f.failing_s[1])} s` : ""
    }`,
    `hangs>10s ${f.hangs}`,
    `lost ${f.lost}/${f.acked} acked${
      f.lost ? ` (acked via ${byNode(f.lost_acked_via)}; missing on ${byNode(f.lost_by_node)})` : ""
    }`,
    `orphans ${f.orphans}${f.orphans ? ` (${f.orphan_binaries.join(", ")})` : ""}`,
    `converged ${f.converged ? "yes" : "no"}`,
    ...f.notes,
  ];
  console.log(`chaos ${f.scenario.padEnd(19)} ${parts.join(" | ")}`);
  const line = JSON.stringify({ at: new Date().toISOString(), ...f });
  console.log(`CHAOS-FIGURES ${line}`);
  Deno.mkdirSync(FIGURES_FILE.slice(0, FIGURES_FILE.lastIndexOf("/")), { recursive: true });
  Deno.writeTextFileSync(FIGURES_FILE, `${line}\n`, { append: true });
}
