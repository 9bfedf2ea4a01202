/**
 * bench/startup: time from process start to `/healthz` answering 200, and resident memory after 10 idle
 * seconds, for a real daemon started from source (`deno run`). Targets: ready within 1 s, RSS <= 120 MB.
 *   deno run -A bench/startup.ts [--runs N] [--idle SECONDS]
 */
const ROOT = new URL("..", import.meta.url).pathname;
const args = Deno.args;
const runs = Number(args[args.indexOf("--runs") + 1] || 3) || 3;
const idle = Number(args[args.indexOf("--idle") + 1] || 10) || 10;

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function rssBytes(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) * 1024 : NaN;
}

async function once(withWorker: boolean): Promise<{ readyMs: number; rss: number }> {
  const dataDir = Deno.makeTempDirSync({ prefix: "skulk-bench-" });
  const port = freePort();
  const t0 = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--quiet",
      `${ROOT}src/main.ts`,
      "run",
      "--api-port",
      String(port),
      "--api-host",
      "127.0.0.1",
      "--data-dir",
      dataDir,
      ...(withWorker ? [] : ["--no-worker"]),
    ],
    env: { SKULK_LOG_LEVEL: "warning" },
    stdout: "null",
    stderr: "null",
  }).spawn();
  let readyMs = NaN;
  while (performance.now() - t0 < 30_000) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      await r.body?.cancel();
      if (r.status === 200) {
        readyMs = performance.now() - t0;
        break;
      }
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, idle * 1000));
  const rss = rssBytes(child.pid);
  child.kill("SIGTERM");
  await child.status;
  Deno.removeSync(dataDir, { recursive: true });
  return { readyMs, rss };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`bench/startup: ${runs} runs, ${idle} s idle before reading RSS`);
for (const worker of [true, false]) {
  const results: { readyMs: number; rss: number }[] = [];
  for (let i = 0; i < runs; i++) results.push(await once(worker));
  const ready = median(results.map((r) => r.readyMs));
  const rss = median(results.map((r) => r.rss)) / 1e6;
  console.log(
    `${worker ? "worker node " : "--no-worker "}  ready ${ready.toFixed(0)} ms (target 1000 ms, ratio ${
      (ready / 1000).toFixed(2)
    })  ` +
      `idle RSS ${rss.toFixed(1)} MB (target 120 MB, ratio ${(rss / 120).toFixed(2)})  runs: ${
        results.map((r) => r.readyMs.toFixed(0)).join(", ")
      } ms`,
  );
}
