/** Shared pieces of the CLI: finding a running node's URL, the data dir, and printing errors. */
import { loadConfig } from "../config/load.ts";
import { liveOwner } from "../node/lock.ts";

export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
    this.name = "CliError";
  }
}

export function resolveDataDir(flags: { dataDir?: string; config?: string }): string {
  return loadConfig({ dataDir: flags.dataDir, config: flags.config }).config.dataDir;
}

/** The API URL of a node: --url, else the daemon that holds the data dir, else the configured port on loopback. */
export function nodeUrl(
  flags: { url?: string; dataDir?: string; apiPort?: string; config?: string },
): string {
  if (flags.url) return flags.url.replace(/\/$/, "");
  const { config } = loadConfig({ dataDir: flags.dataDir, apiPort: flags.apiPort, config: flags.config });
  const owner = liveOwner(config.dataDir);
  // A lock's port is 0 for the moment between taking the lock and binding an OS-chosen port.
  const port = flags.apiPort ?? (owner?.apiPort || undefined) ?? config.apiPort;
  const host = owner && !["0.0.0.0", "::"].includes(owner.apiHost) ? owner.apiHost : "127.0.0.1";
  return `http://${host}:${port}`;
}

export async function getJson<T>(url: string, init?: RequestInit): Promise<T> {
  let res: Response;
  try {
    const headers = new Headers(init?.headers);
    // The node's own api.key (SKULK_API_KEY or skulk.yaml), so a CLI beside a protected node is let in.
    const key = loadConfig({}).config.apiKey;
    if (key) headers.set("authorization", `Bearer ${key}`);
    res = await fetch(url, { ...init, headers, signal: init?.signal ?? AbortSignal.timeout(10_000) });
  } catch (e) {
    throw new CliError(
      `no node answers at ${new URL(url).origin} (${
        (e as Error).message.split("\n")[0]
      }); is 'skulk run' running?`,
    );
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new CliError(`${url} answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const msg = (body as { error?: { message?: string } })?.error?.message ?? text;
    throw new CliError(`${res.status}: ${msg}`);
  }
  return body as T;
}

export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "not measured";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}
