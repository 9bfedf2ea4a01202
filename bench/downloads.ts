/**
 * Download benchmark, measured side by side in one run against the loopback fake hub (a separate process):
 * throughput of the DownloadManager (verified, renamed into place; its fsync runs after, off the critical path,
 * as curl leaves its writeback to the kernel) vs `curl` of the same file, and RSS while downloading
 * a large sparse file (memory must stay flat: the body is streamed, never buffered). Runs are interleaved (the
 * order alternates each round); every run's figure is printed, then medians and the median of per-round ratios.
 *   deno run -A bench/downloads.ts [--size-mb 1024] [--large-gb 3 (0 skips)] [--rounds 5]
 */
import process from "node:process";
import { parseArgs } from "node:util";
import { DownloadManager } from "../src/downloads/manager.ts";
import { Catalog } from "../src/models/catalog.ts";
import { HubClient } from "../src/models/hub.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    "size-mb": { type: "string", default: "1024" },
    "large-gb": { type: "string", default: "3" },
    rounds: { type: "string", default: "5" },
  },
});
const SIZE_MB = Number(values["size-mb"]);
const LARGE_GB = Number(values["large-gb"]);
const ROUNDS = Number(values.rounds);
const REPO = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf";
const card = Catalog.bundled().get(REPO)!;

const work = Deno.makeTempDirSync({ prefix: "skulk-bench-downloads-" });
const mb = (n: number) => (n / 1e6).toFixed(1);

async function startHub(dir: string, noHashes = false): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = new Deno.Command(Deno.execPath(), {
    env: noHashes ? { FAKE_HUB_NO_HASHES: "1" } : {},
    args: [
      "run",
      "-A",
      "--quiet",
      new URL("../tests/helpers/fake-hub.ts", import.meta.url).pathname,
      `${REPO}=${dir}`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("fake hub exited before it served");
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  return {
    url: text.trim(),
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

function manager(url: string, modelsDir: string): DownloadManager {
  return new DownloadManager({
    nodeId: "bench",
    modelsDir,
    hub: new HubClient({ endpoint: url, token: null, revision: "main" }),
    emit: async () => {},
  });
}

interface Run {
  secs: number;
  /** CPU seconds (user + system, all threads) the downloading side spent: a figure the machine's load disturbs less. */
  cpu: number;
}

/** CPU seconds this process's reaped children have used (/proc/self/stat cutime + cstime). */
function childCpu(): number {
  const f = Deno.readTextFileSync("/proc/self/stat").split(") ")[1].split(" ");
  return (Number(f[13]) + Number(f[14])) / 100;
}

async function timeSkulk(url: string, modelsDir: string): Promise<Run> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  await manager(url, modelsDir).ensure(card);
  const c = process.cpuUsage(c0);
  return { secs: (performance.now() - t0) / 1000, cpu: (c.user + c.system) / 1e6 };
}

/** curl of the same file; `then` adds what skulk does after the bytes arrive (fsync, or sha256 and fsync). */
async function timeCurl(
  url: string,
  dest: string,
  then: "nothing" | "fsync" | "sha256+fsync",
): Promise<Run> {
  const t0 = performance.now();
  const c0 = childCpu();
  const out = await new Deno.Command("curl", {
    args: ["-sSf", "-o", dest, `${url}/${REPO}/resolve/main/${FILE}`],
  }).output();
  if (!out.success) throw new Error(`curl failed: ${new TextDecoder().decode(out.stderr)}`);
  if (then === "sha256+fsync") {
    const sum = await new Deno.Command("sha256sum", { args: [dest], stdout: "null" }).output();
    if (!sum.success) throw new Error("sha256sum failed");
  }
  if (then !== "nothing") {
    using f = await Deno.open(dest, { read: true, write: true });
    await f.syncData();
  }
  return { secs: (performance.now() - t0) / 1000, cpu: childCpu() - c0 };
}

const loadavg = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function throughput(): Promise<void> {
  const dir = `${work}/hub-small`;
  Deno.mkdirSync(dir);
  const bytes = SIZE_MB * 1_000_000;
  // Random content: a hash over zeros and a page cache of zeros would flatter both sides.
  const gen = await new Deno.Command("sh", { args: ["-c", `head -c ${bytes} /dev/urandom > ${dir}/${FILE}`] })
    .output();
  if (!gen.success) throw new Error("could not write the fixture");
  const hub = await startHub(dir);
  const sizeOnly = await startHub(dir, true);
  try {
    const names = ["skulk", "curl", "skulk-size-only", "curl+fsync", "curl+sha256+fsync"] as const;
    type Name = typeof names[number];
    const times = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<Name, number[]>;
    const cpus = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<Name, number[]>;
    const rate = (secs: number) => bytes / secs;
    console.log(
      `throughput, ${SIZE_MB} MB random file over loopback, ${ROUNDS} interleaved rounds; MB/s per run:`,
    );
    for (let i = 0; i < ROUNDS; i++) {
      // Alternate the order so neither side always meets a warmer cache or a quieter machine.
      const runs: [Name, () => Promise<Run>][] = [
        ["skulk", () => timeSkulk(hub.url, `${work}/m-${i}`)],
        ["curl", () => timeCurl(hub.url, `${work}/curl-${i}`, "nothing")],
        ["skulk-size-only", () => timeSkulk(sizeOnly.url, `${work}/s-${i}`)],
        ["curl+fsync", () => timeCurl(hub.url, `${work}/curlsync-${i}`, "fsync")],
        ["curl+sha256+fsync", () => timeCurl(hub.url, `${work}/curlsha-${i}`, "sha256+fsync")],
      ];
      if (i % 2 === 1) runs.reverse();
      for (const [name, run] of runs) {
        // Each run starts with no dirty pages left by the one before (curl leaves its file to the kernel's
        // writeback, which would otherwise slow whichever run comes next).
        await new Deno.Command("sync").output();
        const { secs, cpu } = await run();
        times[name].push(secs);
        cpus[name].push(cpu);
      }
      for (const p of ["m", "s", "curl", "curlsync", "curlsha"].map((k) => `${work}/${k}-${i}`)) {
        Deno.removeSync(p, { recursive: true });
      }
      console.log(
        `  round ${i + 1} (load ${loadavg()}): ` +
          names.map((n) => `${n} ${mb(rate(times[n][i]))}`).join(", "),
      );
    }
    const line = (label: string, name: Name) =>
      console.log(
        `  ${label.padEnd(50)} ${mb(rate(median(times[name])))} MB/s (${median(times[name]).toFixed(2)} s)`,
      );
    console.log(`medians of ${ROUNDS} (load average now ${loadavg()}):`);
    line("skulk (sha256 + size verified, rename):", "skulk");
    line("skulk (the hub gives no hash: size, own sha256):", "skulk-size-only");
    line("curl -o file:", "curl");
    line("curl -o file, then fsync:", "curl+fsync");
    line("curl -o file, then sha256sum and fsync:", "curl+sha256+fsync");
    // Each round's runs ran back to back, so a per-round ratio cancels most of the machine's drift.
    const ratio = (a: Name, b: Name) => median(times[a].map((t, i) => times[b][i] / t)).toFixed(2);
    console.log(
      `  ratio (median of per-round ratios): skulk/curl = ${ratio("skulk", "curl")}; ` +
        `skulk/(curl+fsync) = ${ratio("skulk", "curl+fsync")}; ` +
        `skulk/(curl+sha256+fsync) = ${ratio("skulk", "curl+sha256+fsync")}; ` +
        `size-only/curl = ${ratio("skulk-size-only", "curl")}; ` +
        `size-only/(curl+fsync) = ${ratio("skulk-size-only", "curl+fsync")}   (target >= 0.9)`,
    );
    const perGb = (n: Name) => (median(cpus[n]) / (bytes / 1e9)).toFixed(2);
    console.log(
      `  CPU seconds per GB (median; the hub's own CPU not counted): skulk ${perGb("skulk")}, ` +
        `skulk size-only ${perGb("skulk-size-only")}, curl ${perGb("curl")}, ` +
        `curl + sha256sum ${perGb("curl+sha256+fsync")}`,
    );
  } finally {
    await hub.stop();
    await sizeOnly.stop();
    Deno.removeSync(dir, { recursive: true });
  }
}

async function memory(): Promise<void> {
  const dir = `${work}/hub-large`;
  Deno.mkdirSync(dir);
  const bytes = LARGE_GB * 1_000_000_000;
  Deno.writeFileSync(`${dir}/${FILE}`, new Uint8Array());
  Deno.truncateSync(`${dir}/${FILE}`, bytes); // sparse: costs no disk on the server side
  const hub = await startHub(dir);
  const modelsDir = `${work}/m-large`;
  try {
    const before = Deno.memoryUsage().rss;
    const samples: { at: number; rss: number; bytes: number }[] = [];
    const partial = `${modelsDir}/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}.partial`;
    const t0 = performance.now();
    const timer = setInterval(() => {
      let got = 0;
      try {
        got = Deno.statSync(partial).size;
      } catch { /* not yet, or renamed */ }
      samples.push({ at: performance.now() - t0, rss: Deno.memoryUsage().rss, bytes: got });
    }, 100);
    await manager(hub.url, modelsDir).ensure(card);
    clearInterval(timer);
    const secs = (performance.now() - t0) / 1000;
    const during = samples.filter((s) => s.bytes > 0);
    const peak = Math.max(...during.map((s) => s.rss));
    const firstQuarter = during.filter((s) => s.bytes < bytes / 4).map((s) => s.rss);
    const lastQuarter = during.filter((s) => s.bytes > (3 * bytes) / 4).map((s) => s.rss);
    console.log(
      `memory, ${LARGE_GB} GB sparse file (${(bytes / 2 ** 20).toFixed(0)} MiB) streamed in ${
        secs.toFixed(1)
      } s (${mb(bytes / secs)} MB/s):`,
    );
    console.log(
      `  RSS before ${mb(before)} MB; during: peak ${mb(peak)} MB, median first quarter ${
        mb(median(firstQuarter))
      } MB, median last quarter ${mb(median(lastQuarter))} MB`,
    );
    console.log(
      `  peak RSS growth ${mb(peak - before)} MB for ${mb(bytes)} MB downloaded (${
        ((peak - before) / bytes * 100).toFixed(3)
      } % of the file); ${during.length} samples`,
    );
  } finally {
    await hub.stop();
    Deno.removeSync(dir, { recursive: true });
    Deno.removeSync(modelsDir, { recursive: true });
  }
}

try {
  await throughput();
  if (LARGE_GB > 0) await memory();
} finally {
  Deno.removeSync(work, { recursive: true });
}
