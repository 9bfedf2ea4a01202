/**
 * ggml-rpc-server as a supervised engine: a pooled instance's donor, lending this node's memory to a
 * driver's llama-server. Bound to the one address the driver reaches it by, ready when it accepts TCP.
 */
import { parseIpLiteral, wildcardReason } from "./bind-address.ts";
import { EngineProcess, type ProcessRegistry } from "./process.ts";

export interface RpcServerOptions {
  bin: string;
  /** The literal address the driver reaches this donor by; never a wildcard (llama.cpp RPC is unauthenticated). */
  host: string;
  port: number;
  /** `-c`: keep a local cache of tensors so a re-placement does not resend the weights. */
  cache?: boolean;
  threads?: number;
  readyDeadlineMs?: number;
}

export class UnsafeBind extends Error {
  constructor(host: string, why: string) {
    super(
      `refusing to bind ggml-rpc-server to '${
        host.slice(0, 64)
      }': ${why}; llama.cpp RPC is unauthenticated, bind it to the link the driver uses`,
    );
    this.name = "UnsafeBind";
  }
}

export function rpcServerArgs(o: RpcServerOptions): string[] {
  // The last line before the command line: whatever reached here, only a literal non-wildcard address
  // goes to -H (ggml-rpc-server resolves a name or shorthand like `0x0` to the wildcard itself).
  const ip = parseIpLiteral(o.host);
  if ("error" in ip) throw new UnsafeBind(o.host, ip.error);
  const wild = wildcardReason(ip);
  if (wild) throw new UnsafeBind(o.host, wild);
  const args = ["-H", ip.address, "-p", String(o.port)];
  if (o.cache ?? true) args.push("-c");
  if (o.threads) args.push("-t", String(o.threads));
  return args;
}

/** True when something accepts a TCP connection at host:port within the timeout. */
export async function tcpAccepts(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const connecting = Deno.connect({ hostname: host, port });
  const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)));
  try {
    const conn = await Promise.race([connecting, timeout]);
    if (!conn) {
      void connecting.then((c) => c.close(), () => undefined);
      return false;
    }
    conn.close();
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** `/proc/net/tcp`'s "0100007F:5DC0" for 127.0.0.1:24000 (IPv4 little-endian, port big-endian hex). */
export function procNetAddress(host: string, port: number): string {
  const ip = host.split(".").map((o) => Number(o).toString(16).toUpperCase().padStart(2, "0")).reverse().join(
    "",
  );
  return `${ip}:${port.toString(16).toUpperCase().padStart(4, "0")}`;
}

/** True when `/proc/net/tcp` text shows a listening socket (state 0A) at host:port. */
export function listensIn(procNetTcp: string, host: string, port: number): boolean {
  const want = procNetAddress(host, port);
  return procNetTcp.split("\n").some((line) => {
    const f = line.trim().split(/\s+/);
    return f[1] === want && f[3] === "0A";
  });
}

/**
 * Liveness without a connection: ggml-rpc-server serves one client at a time with a backlog of one, so a
 * probe connection while the driver is attached would queue and, repeated, fill the backlog. On Linux
 * the socket table says whether it still listens; elsewhere the process being alive is what we know.
 */
async function stillListening(host: string, port: number): Promise<boolean> {
  // /proc/net/tcp lists IPv4 sockets only; an IPv6 donor is judged by its process being alive.
  if (host.includes(":")) return true;
  try {
    return listensIn(await Deno.readTextFile("/proc/net/tcp"), host, port);
  } catch {
    return true;
  }
}

export function rpcServerProcess(o: RpcServerOptions, registry?: ProcessRegistry): EngineProcess {
  return new EngineProcess({
    kind: "ggml-rpc-server",
    bin: o.bin,
    args: rpcServerArgs(o),
    probe: () => tcpAccepts(o.host, o.port),
    liveness: () => stillListening(o.host, o.port),
    readyDeadlineMs: o.readyDeadlineMs ?? 20_000,
    livenessIntervalMs: 2000,
    livenessFailures: 3,
  }, registry);
}
