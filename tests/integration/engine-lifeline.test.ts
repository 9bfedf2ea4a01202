/**
 * Engines die with their node: real processes started through EngineProcess under each lifeline die
 * within seconds of their daemon's kill -9, and the reaping at the next start still knows them.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  chooseLifeline,
  engineArgv,
  findSetpriv,
  isOurs,
  launchArgv,
  type Lifeline,
} from "../../src/engines/lifeline.ts";
import { EngineProcess } from "../../src/engines/process.ts";
import { childrenOf, reapOrphans, sqliteRegistry } from "../../src/engines/registry.ts";
import { ownCommand, selfProgram } from "../../src/node/self.ts";
import { openStore, type Store } from "../../src/store/db.ts";
import { pidAlive } from "../helpers/cluster.ts";
import { DENO, tempDir } from "../helpers/daemon.ts";
import { waitFor } from "../helpers/multinode.ts";

const HOLDER = new URL("../helpers/engine-holder.ts", import.meta.url).pathname;
const SETPRIV = findSetpriv();

function cmdline(pid: number): string[] | null {
  try {
    return Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0").filter(Boolean);
  } catch {
    return null;
  }
}

/** The engine's own pid: the process itself, or the watchdog's one child once it has spawned it. */
async function enginePid(pid: number, lifeline: string): Promise<number> {
  if (lifeline !== "supervise") return pid;
  return await waitFor(
    `the watchdog ${pid} to start its engine`,
    () => {
      const [child] = childrenOf(pid);
      return child && /(^|\/)sleep$/.test(cmdline(child)?.[0] ?? "") ? child : null;
    },
    60_000,
    50,
  );
}

const cleanup: (() => void)[] = [];
afterEach(() => cleanup.splice(0).forEach((f) => f()));

function killLater(pid: number) {
  cleanup.push(() => {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone */ }
  });
}

describe("the lifeline's command lines", () => {
  const pd: Lifeline = { kind: "pdeathsig", setpriv: "/usr/bin/setpriv" };
  const sv: Lifeline = { kind: "supervise", self: ["/opt/skulk"] };
  const engine = ["/e/llama-server", "--port", "24001", "--", "x"];

  it("chooses the parent-death signal on Linux with setpriv, the watchdog otherwise or when asked", () => {
    expect(chooseLifeline("auto", "linux", "/usr/bin/setpriv", ["s"]).kind).toBe("pdeathsig");
    expect(chooseLifeline("auto", "linux", null, ["s"]).kind).toBe("supervise");
    expect(chooseLifeline("auto", "darwin", "/usr/bin/setpriv", ["s"]).kind).toBe("supervise");
    expect(chooseLifeline("pdeathsig", "darwin", null, ["s"]).kind).toBe("supervise");
    expect(chooseLifeline("supervise", "linux", "/usr/bin/setpriv", ["s"]).kind).toBe("supervise");
    expect(chooseLifeline("off", "linux", "/usr/bin/setpriv", ["s"]).kind).toBe("none");
  });

  it("finds the engine inside each wrapper, even one whose own args contain --", () => {
    expect(launchArgv(pd, engine, 5000)).toEqual([
      "/usr/bin/setpriv",
      "--pdeathsig",
      "KILL",
      "--",
      ...engine,
    ]);
    expect(launchArgv(sv, engine, 5000)).toEqual([
      "/opt/skulk",
      "engine",
      "supervise",
      "--grace-ms",
      "5000",
      "--",
      ...engine,
    ]);
    expect(engineArgv(launchArgv(pd, engine, 5000))).toEqual(engine);
    expect(engineArgv(launchArgv(sv, engine, 5000))).toEqual(engine);
    expect(engineArgv(engine)).toEqual(engine);
  });

  it("runs the compiled executable itself as the watchdog, and deno with main.ts from source", () => {
    const compiled = chooseLifeline(
      "supervise",
      "darwin",
      null,
      ownCommand("/usr/local/bin/skulk", "file:///b/src/main.ts", []),
    );
    expect(launchArgv(compiled, ["/e/rpc"], 3000)).toEqual([
      "/usr/local/bin/skulk",
      "engine",
      "supervise",
      "--grace-ms",
      "3000",
      "--",
      "/e/rpc",
    ]);
    const source = chooseLifeline(
      "supervise",
      "linux",
      null,
      ownCommand("/x/deno", "file:///r/src/main.ts", []),
    );
    expect(launchArgv(source, ["/e/rpc"], 3000).slice(0, 7)).toEqual([
      "/x/deno",
      "run",
      "-A",
      "--quiet",
      "/r/src/main.ts",
      "engine",
      "supervise",
    ]);
  });

  it("takes a process for ours only when it runs the launched or the engine's command line", () => {
    const launched = launchArgv(pd, engine, 5000);
    expect(isOurs(launched, launched)).toBe(true);
    expect(isOurs(launched, engine)).toBe(true);
    expect(isOurs(engine, engine)).toBe(true);
    expect(isOurs(launched, ["/e/llama-server", "--port", "24002"])).toBe(false);
    expect(isOurs(launched, ["/usr/bin/python3", "x.py"])).toBe(false);
    // A bare name is found through PATH: /proc shows the full path Deno passed as argv[0].
    expect(isOurs(["sleep", "5"], ["/usr/bin/sleep", "5"])).toBe(true);
    expect(isOurs(["sleep", "5"], ["/usr/bin/nosleep", "5"])).toBe(false);
    expect(isOurs(launched, null)).toBe(false);
  });
});

describe.each(["pdeathsig", "supervise"] as const)("engines under the %s lifeline", (mode) => {
  it.skipIf(mode === "pdeathsig" && !SETPRIV)(
    "die within seconds of their daemon's kill -9, however they were spawned",
    async () => {
      const holder = new Deno.Command(DENO, {
        args: ["run", "-A", "--quiet", HOLDER, mode, "6"],
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      killLater(holder.pid);
      const reader = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
      let out = "";
      while (!out.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`the holder exited before starting its engines: ${out}`);
        out += value;
      }
      const { lifeline, pids } = JSON.parse(out) as { lifeline: string; pids: number[] };
      expect(lifeline).toBe(mode);
      expect(pids).toHaveLength(6);
      const engines = await Promise.all(pids.map((p) => enginePid(p, lifeline)));
      engines.forEach((p) => killLater(p));
      expect(engines.every(pidAlive)).toBe(true);
      const killedAt = Date.now();
      holder.kill("SIGKILL");
      await holder.status;
      await waitFor(
        "every engine to die with its daemon",
        () => engines.every((p) => !pidAlive(p)),
        10_000,
        20,
      );
      const ms = Date.now() - killedAt;
      console.log(`${mode}: 6 engines gone ${ms} ms after their daemon's kill -9`);
      expect(ms).toBeLessThan(5000);
    },
    120_000,
  );

  it.skipIf(mode === "pdeathsig" && !SETPRIV)(
    "are still recognised and stopped by the reaping at the next start (a wedged watchdog's engine too); a reused pid is left alone",
    async () => {
      const dir = tempDir();
      const store: Store = await openStore(dir);
      cleanup.push(() => store.close());
      const lifeline = chooseLifeline(mode, Deno.build.os, SETPRIV, selfProgram());
      const e = new EngineProcess(
        {
          kind: "sleep",
          bin: "sleep",
          args: ["1001"],
          probe: () => Promise.resolve(true),
          readyDeadlineMs: 30_000,
        },
        sqliteRegistry(store.db),
        lifeline,
      );
      await e.start();
      const engine = await enginePid(e.pid!, lifeline.kind);
      killLater(engine);
      killLater(e.pid!);
      // A row whose pid now runs something else (this test itself) must not be killed.
      await store.client.execute({
        sql: "INSERT INTO engine_processes (pid, kind, command, started_at) VALUES (?, 'sleep', ?, ?)",
        args: [Deno.pid, JSON.stringify(["/usr/bin/sleep", "1001"]), new Date().toISOString()],
      });
      // A wedged watchdog cannot pass the stop on: the reaper stops its engine itself.
      if (lifeline.kind === "supervise") Deno.kill(e.pid!, "SIGSTOP");
      expect(await reapOrphans(store.db)).toBe(1);
      await waitFor("the reaped engine to be gone", () => !pidAlive(engine) && !pidAlive(e.pid!), 15_000, 20);
      const left = await store.client.execute("SELECT count(*) AS n FROM engine_processes");
      expect(Number(left.rows[0].n)).toBe(0);
    },
    120_000,
  );
});
