/**
 * A stand-in daemon for lifeline tests: starts `count` engines (`sleep`, which never exits by itself)
 * through EngineProcess under the named lifeline, from different async contexts, prints their pids as
 * one JSON line, then idles until it is killed.
 */
import { chooseLifeline, findSetpriv, LifelineModeSchema } from "../../src/engines/lifeline.ts";
import { EngineProcess } from "../../src/engines/process.ts";
import { selfProgram } from "../../src/node/self.ts";

const mode = LifelineModeSchema.parse(Deno.args[0]);
const count = Number(Deno.args[1] ?? 1);
const lifeline = chooseLifeline(mode, Deno.build.os, findSetpriv(), selfProgram());
const pids: number[] = [];

async function one(): Promise<void> {
  const e = new EngineProcess(
    {
      kind: "sleep",
      bin: "sleep",
      args: ["1000"],
      probe: () => Promise.resolve(true),
      readyDeadlineMs: 30_000,
    },
    undefined,
    lifeline,
  );
  await e.start();
  pids.push(e.pid!);
}

// Spawns after a timer, a fetch, a file read and in a microtask: whatever thread Deno runs each on, the
// children must outlive none of them but the process itself.
const contexts: (() => Promise<unknown>)[] = [
  () => new Promise((r) => setTimeout(r, 5)),
  () => fetch("http://127.0.0.1:9/").catch(() => undefined),
  () => Deno.readTextFile("/proc/self/stat"),
  () => new Promise<void>((r) => queueMicrotask(r)),
];
for (let i = 0; i < count; i++) {
  await contexts[i % contexts.length]();
  await one();
}
console.log(JSON.stringify({ lifeline: lifeline.kind, pids }));
setInterval(() => {}, 1 << 30);
