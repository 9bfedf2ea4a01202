/**
 * Test harness for real node processes: spawns `skulk run` from source on a free port with a temporary
 * data dir, waits until it serves, and stops (or kills) it. Every test cleans up through `stop()`.
 */
import { isOurs } from "../../src/engines/lifeline.ts";
import { queryReadOnly } from "../../src/store/readonly.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
export const DENO = Deno.env.get("DENO_BIN") ?? Deno.execPath();
export const MAIN = `${ROOT}src/main.ts`;

export function tempDir(prefix = "skulk-test-"): string {
  Deno.mkdirSync(`${ROOT}tests/.tmp`, { recursive: true });
  return Deno.makeTempDirSync({ dir: `${ROOT}tests/.tmp`, prefix });
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the skulk CLI to completion. */
export async function skulk(
  args: string[],
  env: Record<string, string> = {},
  cwd?: string,
): Promise<CliResult> {
  const out = await new Deno.Command(DENO, {
    args: ["run", "-A", "--quiet", MAIN, ...args],
    env: { SKULK_LOG_FORMAT: "json", ...env },
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Ports of the engines (of one kind, or all) a daemon recorded in its data dir, read-only. */
export async function enginePorts(dataDir: string, kind?: string): Promise<number[]> {
  const { rows } = await queryReadOnly(
    `${dataDir}/skulk.db`,
    kind ? "SELECT port FROM engine_processes WHERE kind = ?" : "SELECT port FROM engine_processes",
    kind ? [kind] : [],
  );
  return rows.map((r) => Number(r.port));
}

/** Kills the engines a daemon recorded in its data dir, checked by command line like the daemon's own reaper. */
export async function killEngines(dataDir: string): Promise<void> {
  let rows: { pid: number; command: string }[];
  try {
    rows = (await queryReadOnly(`${dataDir}/skulk.db`, "SELECT pid, command FROM engine_processes"))
      .rows as typeof rows;
  } catch {
    return; // no database yet, or nothing recorded
  }
  for (const { pid, command } of rows) {
    let running: string[];
    try {
      running = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0").filter(Boolean);
    } catch {
      continue;
    }
    if (!isOurs(JSON.parse(command) as string[], running)) continue;
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone meanwhile */ }
  }
}

export interface Daemon {
  url: string;
  port: number;
  nodeId: string;
  dataDir: string;
  pid: number;
  /** Everything the process wrote to stderr so far (the JSON log). */
  log(): string;
  /** SIGTERM, then wait for exit; returns the exit code. */
  stop(): Promise<number>;
  /** SIGKILL, then wait for exit. */
  /**
   * SIGKILL, then wait for exit. The engines it started are killed too (as if its machine went down),
   * unless `orphanEngines` keeps them for a test of reaping.
   */
  kill(opts?: { orphanEngines?: boolean }): Promise<void>;
  exited: Promise<Deno.CommandStatus>;
}

export interface DaemonOptions {
  dataDir?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  timeoutMs?: number;
  /** Runs the node inside this network namespace (`ip netns exec`); the test made it and removes it. */
  netns?: string;
  /** The address tests reach the node at, replacing the host of the URL it prints (e.g. its namespace address). */
  urlHost?: string;
}

export async function startDaemon(opts: DaemonOptions = {}): Promise<Daemon> {
  const dataDir = opts.dataDir ?? tempDir();
  const args = [
    "run",
    "-A",
    "--quiet",
    MAIN,
    "run",
    "--api-port",
    "0",
    "--api-host",
    "127.0.0.1",
    "--data-dir",
    dataDir,
    ...(opts.args ?? []),
  ];
  const child = new Deno.Command(opts.netns ? "ip" : DENO, {
    args: opts.netns ? ["netns", "exec", opts.netns, DENO, ...args] : args,
    // Test mode serves the test-only routes (POST /cluster/test_events); a test can pass SKULK_TEST_MODE=0.
    env: { SKULK_LOG_FORMAT: "json", SKULK_LOG_LEVEL: "debug", SKULK_TEST_MODE: "1", ...opts.env },
    cwd: opts.cwd,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stdout = "";
  let stderr = "";
  const dec = new TextDecoder();
  const pump = async (s: ReadableStream<Uint8Array>, onText: (t: string) => void) => {
    for await (const chunk of s) onText(dec.decode(chunk, { stream: true }));
  };
  const ready = Promise.withResolvers<{ url: string; nodeId: string }>();
  void pump(child.stdout, (t) => {
    stdout += t;
    const m = stdout.match(/skulk node (\S+) serving at (http:\/\/\S+)/);
    if (m) {
      ready.resolve({
        nodeId: m[1],
        url: opts.urlHost ? m[2].replace(/\/\/[^:/]+/, `//${opts.urlHost}`) : m[2],
      });
    }
  });
  void pump(child.stderr, (t) => (stderr += t));
  const exited = child.status;
  void exited.then((s) => ready.reject(new Error(`daemon exited with ${s.code} before serving:\n${stderr}`)));
  const timeout = setTimeout(
    () => ready.reject(new Error(`daemon did not serve within ${opts.timeoutMs ?? 20000} ms:\n${stderr}`)),
    opts.timeoutMs ?? 20000,
  );
  let info: { url: string; nodeId: string };
  try {
    info = await ready.promise;
  } catch (e) {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    throw e;
  } finally {
    clearTimeout(timeout);
  }
  return {
    ...info,
    port: Number(new URL(info.url).port),
    dataDir,
    pid: child.pid,
    log: () => stderr,
    exited,
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      return (await exited).code;
    },
    kill: async (killOpts = {}) => {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
      await exited;
      if (!killOpts.orphanEngines) await killEngines(dataDir);
    },
  };
}
