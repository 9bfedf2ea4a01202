/**
 * The processes of this node from /proc (Linux): the daemon and its descendants (engines, watchdogs), with
 * CPU over a sampling window, resident memory and age. Parsing is pure; reading takes a root for tests.
 */

/** Linux's USER_HZ: /proc counts CPU time and start times in these ticks (100 on every mainstream arch). */
const TICKS_PER_SECOND = 100;
const COMMAND_CHARS = 1000;

export interface ProcStat {
  pid: number;
  ppid: number;
  state: string;
  /** utime + stime, in ticks. */
  cpuTicks: number;
  /** Ticks after boot. */
  startTicks: number;
}

/** One line of /proc/<pid>/stat; the command name may hold spaces and parentheses, so fields count from its last `)`. */
export function parseStat(line: string): ProcStat | null {
  const open = line.indexOf("(");
  const close = line.lastIndexOf(")");
  if (open < 0 || close < open) return null;
  const pid = Number(line.slice(0, open).trim());
  const f = line.slice(close + 2).trim().split(/\s+/);
  // f[0] is field 3 (state): field n sits at f[n - 3].
  const n = (i: number) => Number(f[i - 3]);
  if (!Number.isInteger(pid) || f.length < 22) return null;
  return {
    pid,
    ppid: n(4),
    state: f[0],
    cpuTicks: n(14) + n(15),
    startTicks: n(22),
  };
}

const STATE_WORDS: Record<string, string> = {
  R: "running",
  S: "sleeping",
  D: "disk sleep",
  Z: "zombie",
  T: "stopped",
  t: "tracing stop",
  X: "dead",
  I: "idle",
};
export const stateText = (s: string) => `${s} (${STATE_WORDS[s] ?? "unknown"})`;

/** Pids of `root` and all its descendants, from every process's parent. */
export function descendants(root: number, stats: readonly ProcStat[]): Set<number> {
  const children = new Map<number, number[]>();
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s.pid]);
  const out = new Set<number>([root]);
  const todo = [root];
  while (todo.length) {
    for (const c of children.get(todo.pop()!) ?? []) {
      if (!out.has(c)) (out.add(c), todo.push(c));
    }
  }
  return out;
}

export interface ProcSample {
  pid: number;
  ppid: number;
  state: string;
  command: string;
  cpuPercent: number | null;
  rssBytes: number;
  rssStartBytes: number;
  elapsedSeconds: number;
}

const readText = (path: string) => {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return null;
  }
};

function readAllStats(root: string): ProcStat[] {
  const out: ProcStat[] = [];
  for (const e of Deno.readDirSync(root)) {
    if (!/^\d+$/.test(e.name)) continue;
    const line = readText(`${root}/${e.name}/stat`);
    const s = line && parseStat(line);
    if (s) out.push(s);
  }
  return out;
}

/** Resident memory from /proc/<pid>/status (`VmRSS`, kB), which does not depend on the page size. */
export function parseRss(status: string): number | null {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : null;
}

const rssOf = (procRoot: string, pid: number) => parseRss(readText(`${procRoot}/${pid}/status`) ?? "") ?? 0;

/** Whether this host has a /proc to read (Linux). */
export function hasProc(root = "/proc"): boolean {
  return readText(`${root}/self/stat`) !== null;
}

/**
 * Samples `root`'s process tree twice, `windowMs` apart: CPU is the ticks spent between the two readings.
 * A process that ends meanwhile is left out.
 */
export async function sampleTree(
  rootPid: number,
  windowMs: number,
  procRoot = "/proc",
): Promise<ProcSample[]> {
  const first = readAllStats(procRoot);
  const pids = descendants(rootPid, first);
  const before = new Map(first.filter((s) => pids.has(s.pid)).map((s) => [s.pid, s]));
  const rssBefore = new Map([...before.keys()].map((pid) => [pid, rssOf(procRoot, pid)]));
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, windowMs));
  const seconds = (performance.now() - t0) / 1000;
  const uptime = Number((readText(`${procRoot}/uptime`) ?? "0").split(" ")[0]);
  const out: ProcSample[] = [];
  for (const [pid, b] of before) {
    const line = readText(`${procRoot}/${pid}/stat`);
    const a = line && parseStat(line);
    if (!a || a.startTicks !== b.startTicks) continue; // gone, or the pid was reused
    const cmd = (readText(`${procRoot}/${pid}/cmdline`) ?? "").split("\0").filter(Boolean).join(" ");
    out.push({
      pid,
      ppid: a.ppid,
      state: stateText(a.state),
      command: cmd.slice(0, COMMAND_CHARS),
      cpuPercent: Math.round((a.cpuTicks - b.cpuTicks) / TICKS_PER_SECOND / seconds * 1000) / 10,
      rssBytes: rssOf(procRoot, pid),
      rssStartBytes: rssBefore.get(pid) ?? 0,
      elapsedSeconds: Math.max(0, Math.round((uptime - a.startTicks / TICKS_PER_SECOND) * 10) / 10),
    });
  }
  return out.sort((x, y) => x.pid - y.pid);
}
