/**
 * Health that tells the truth, on real nodes: a follower whose data dir (a 2 MiB tmpfs) fills answers
 * /healthz 503 `degraded` naming the full disk and the database path, logs the cause at warning a bounded
 * number of times (not every round), and is healthy again once space is freed and it has caught up.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { json, oneMaster, waitFor } from "../helpers/multinode.ts";

const running: Daemon[] = [];
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((d) => d.kill()));
  for (const c of cleanups.splice(0).reverse()) c();
});

function sh(cmd: string, args: string[]): void {
  const r = new Deno.Command(cmd, { args, stderr: "piped" }).outputSync();
  if (!r.success) throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
}

/** A tmpfs of `size`, unmounted and removed after the test (this suite runs as root). */
function smallDisk(size: string): string {
  const dir = tempDir("skulk-fulldisk-");
  sh("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]);
  cleanups.push(() => {
    sh("umount", ["-l", dir]);
    Deno.removeSync(dir, { recursive: true });
  });
  return dir;
}

/** Fills the file system holding `dir` to the last byte; returns the filler's path. */
function fill(dir: string): string {
  const path = `${dir}/filler`;
  const f = Deno.openSync(path, { create: true, write: true });
  const chunk = new Uint8Array(4096);
  try {
    for (;;) f.writeSync(chunk);
  } catch {
    // ENOSPC: full
  } finally {
    f.close();
  }
  return path;
}

type Health = { status: string; reasons: { code: string; message: string }[] };
async function health(d: Daemon): Promise<{ code: number; body: Health }> {
  const r = await fetch(`${d.url}/healthz`);
  return { code: r.status, body: await r.json() };
}

const isRoot = Deno.uid() === 0;

describe.skipIf(!isRoot)("/healthz on a full disk", () => {
  it("says degraded with the cause and the path, logs it at warning with a count, and recovers", async () => {
    const disk = smallDisk("2m");
    const models = tempDir("skulk-models-");
    cleanups.push(() => Deno.removeSync(models, { recursive: true }));
    const a = await startDaemon({ args: ["--no-mdns", "--force-master", "--no-worker"] });
    running.push(a);
    cleanups.push(() => Deno.removeSync(a.dataDir, { recursive: true }));
    const b = await startDaemon({
      args: ["--no-mdns", "--no-worker", "--peer", `127.0.0.1:${a.port}`, "--models-dir", models],
      dataDir: `${disk}/data`,
      env: { SKULK_LOG_LEVEL: "info" },
    });
    running.push(b);
    await oneMaster([a.url, b.url]);
    await waitFor("b healthy", async () => (await health(b)).code === 200);

    const filler = fill(disk);
    // Events keep coming from the master until b can no longer write them.
    const degraded = await waitFor(
      "b degraded",
      async () => {
        await json(`${a.url}/cluster/test_events?count=50`, { method: "POST" });
        const h = await health(b);
        return h.code === 503 && h.body.reasons.some((r) => r.code === "database_unwritable") ? h.body : null;
      },
      60_000,
      500,
    );
    expect(degraded.status).toBe("degraded");
    const db = degraded.reasons.find((r) => r.code === "database_unwritable")!;
    expect(db.message).toBe(
      `cannot write ${disk}/data/skulk.db: the disk is full (SQLITE_FULL: database or disk is full)`,
    );
    // It also trails the master, and says by how much once that lasts.
    const behind = await waitFor(
      "b reported behind",
      async () => {
        const h = await health(b);
        return h.body.reasons.find((r) => r.code === "behind_master")?.message;
      },
      20_000,
      500,
    );
    expect(behind).toMatch(
      new RegExp(`^behind master ${a.nodeId}'s log by \\d+ event\\(s\\) for \\d+\\.\\d s$`),
    );

    // Ten seconds of failing syncs (20 rounds) log at warning once (plus every 20th), never as a bare "Failed query".
    await new Promise((r) => setTimeout(r, 10_000));
    const lines = b.log().split("\n").filter((l) => l.includes("failed") && l.includes("sync from"));
    const warnings = lines.filter((l) => /"level":"warn/i.test(l));
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings.length).toBeLessThanOrEqual(3);
    expect(warnings[0]).toContain(`cannot write ${disk}/data/skulk.db: the disk is full (SQLITE_FULL`);
    expect(warnings[0]).toMatch(/\(1 in a row\)/);
    expect(b.log()).not.toMatch(/"msg":"[^"]*Failed query/);

    Deno.removeSync(filler);
    await waitFor("b healthy again", async () => (await health(b)).code === 200, 60_000, 500);
    expect(b.log()).toMatch(/sync from \S+ works again after \d+ failed attempt\(s\)/);
  }, 180_000);
});
