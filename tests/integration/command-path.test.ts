/**
 * The command path on two real daemons: mutating requests go to the master, which decides them one at a
 * time against its own state; the node that was asked answers once it has applied the result itself.
 */
import { afterAll, describe, expect, it } from "vitest";
import { type Daemon, startDaemon } from "../helpers/daemon.ts";
import { allVoters, json, oneMaster, waitFor } from "../helpers/multinode.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { postJson, runnerTag, stateOf, waitForState } from "../helpers/cluster.ts";

const MODEL = "skulk-test/command-tiny";
// Measured: the tiny model's shard needs ~0.28 GB (weights, KV for its context, the engine's 256 MiB floor),
// so a node lending 450 MiB holds exactly one and two do not fit.
const MEMORY_LIMIT = "450MiB";
const running: Daemon[] = [];
afterAll(async () => {
  await Promise.all(running.map((d) => d.kill()));
});

async function node(args: string[]): Promise<Daemon> {
  const d = await startDaemon({
    args: ["--no-mdns", ...args],
    env: {
      SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"),
      SKULK_MEMORY_LIMIT: MEMORY_LIMIT,
      SKULK_LLAMA_THREADS: "1",
    },
  });
  running.push(d);
  return d;
}

const post = postJson;

type Body = { instance_id?: string; error?: { message: string; code: string | number } };
const nodesOf = (inst: unknown): string[] =>
  Object.keys(
    (Object.values(inst as object)[0] as { shardAssignments: { nodeToRunner: object } })
      .shardAssignments.nodeToRunner,
  );
const runnersOf = (inst: unknown): string[] =>
  Object.values(
    (Object.values(inst as object)[0] as { shardAssignments: { nodeToRunner: object } })
      .shardAssignments.nodeToRunner,
  ) as string[];

describe("commands to the master", () => {
  let a: Daemon;
  let b: Daemon;
  let follower: Daemon;
  let master: Daemon;

  it("reads a card added through a follower back at once on that follower", async () => {
    a = await node(["--force-master"]);
    b = await node(["--peer", `127.0.0.1:${a.port}`]);
    await oneMaster([a.url, b.url], 60_000);
    await allVoters([a.url, b.url], 60_000);
    const masterId = (await json<{ session: { master: string } }>(`${a.url}/cluster/view`)).session.master;
    [master, follower] = masterId === a.nodeId ? [a, b] : [b, a];
    await waitFor(
      "both nodes' memory in the master's view",
      async () => Object.keys((await stateOf(master.url)).nodeMemory ?? {}).length === 2,
      60_000,
    );

    // Several cards, each read back the moment its answer arrives (one could win the race by luck).
    const gguf = await tinyModel();
    for (const id of [`${MODEL}-1`, `${MODEL}-2`, `${MODEL}-3`, `${MODEL}-4`, MODEL]) {
      const res = await post(follower.url, "/models/add", { model_id: id, gguf_path: gguf });
      const body = await res.json();
      expect(res.status, JSON.stringify(body)).toBe(200);
      const listed = await (await fetch(`${follower.url}/models`)).json();
      expect(listed.data.map((m: { id: string }) => m.id)).toContain(id);
    }
  }, 120_000);

  it("four placements at once through both nodes: accepted = running, no node booked twice", async () => {
    const vias = [a, b, a, b];
    const answers = await Promise.all(vias.map(async (via) => {
      const res = await post(via.url, "/place_instance", { model_id: MODEL });
      const body = (await res.json()) as Body;
      // Read back on the node that was asked, right after its answer.
      const seen = res.ok ? Boolean((await stateOf(via.url)).instances[body.instance_id!]) : null;
      return { via: via.url, status: res.status, body, seen };
    }));
    console.log("placements:", JSON.stringify(answers.map((x) => [x.status, x.body.error?.message ?? ""])));
    const accepted = answers.filter((x) => x.status === 200);
    const refused = answers.filter((x) => x.status !== 200);
    expect(accepted.length).toBe(2);
    for (const x of accepted) expect(x.seen, `${x.via} lists its placement on return`).toBe(true);
    for (const x of refused) {
      expect(x.status).toBeGreaterThanOrEqual(400);
      expect(x.status).toBeLessThan(500);
      expect(x.body.error?.message).toMatch(/GB/);
    }
    const ids = accepted.map((x) => x.body.instance_id!);
    const s = await waitForState(
      master.url,
      (st) =>
        Object.keys(st.instances).length === ids.length &&
        Object.values(st.instances).every((i) =>
          runnersOf(i).every((r) => runnerTag(st, r) === "RunnerReady")
        ),
      "every accepted placement to run",
      120_000,
    );
    expect(Object.keys(s.instances).sort()).toEqual([...ids].sort());
    const booked = Object.values(s.instances).flatMap(nodesOf);
    expect(new Set(booked).size, `nodes booked: ${booked.join(", ")}`).toBe(booked.length);

    // With both engines loaded (their memory no longer reserved, the readings still capped at the limit),
    // one more placement is still refused with numbers.
    const late = await post(follower.url, "/place_instance", { model_id: MODEL });
    const lateBody = (await late.json()) as Body;
    expect(late.status, JSON.stringify(lateBody)).toBe(400);
    expect(lateBody.error?.message).toMatch(/GB/);
  }, 240_000);

  it("a delete through the follower is gone from its /state on return", async () => {
    const s = await stateOf(follower.url);
    const id = Object.keys(s.instances)[0];
    const res = await fetch(`${follower.url}/instance/${id}`, { method: "DELETE" });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(Object.keys((await stateOf(follower.url)).instances)).not.toContain(id);
  }, 60_000);

  it("a stopped master gets the client a retryable error, never a 200 for something not placed", async () => {
    const before = Object.keys((await stateOf(follower.url)).instances);
    Deno.kill(master.pid, "SIGSTOP");
    try {
      const res = await post(follower.url, "/place_instance", { model_id: MODEL });
      const body = (await res.json()) as Body;
      expect(res.status, JSON.stringify(body)).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(String(body.error?.code)).toMatch(/^(master_changed|no_master|no_quorum)$/);
    } finally {
      Deno.kill(master.pid, "SIGCONT");
    }
    // Once the master is back, the cluster holds no instance the client was not told about.
    await oneMaster([a.url, b.url], 60_000);
    await waitFor("the follower in step", async () => {
      const [m, f] = await Promise.all([stateOf(master.url), stateOf(follower.url)]);
      return m.lastEventAppliedIdx === f.lastEventAppliedIdx;
    }, 60_000);
    const after = Object.keys((await stateOf(master.url)).instances);
    expect(after.sort()).toEqual(before.sort());
    // And the freed node takes a placement again through the follower.
    const res = await post(follower.url, "/place_instance", { model_id: MODEL });
    expect(res.status, await res.clone().text()).toBe(200);
  }, 180_000);
});

describe("the default model", () => {
  it("is registered and placed through the same commands as a client's", async () => {
    const gguf = await tinyModel();
    const d = await startDaemon({
      args: ["--no-mdns"],
      env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), SKULK_DEFAULT_MODEL: gguf },
    });
    running.push(d);
    const s = await waitForState(
      d.url,
      (st) =>
        Object.values(st.instances).length === 1 &&
        Object.values(st.instances).every((i) =>
          runnersOf(i).every((r) => runnerTag(st, r) === "RunnerReady")
        ),
      "the default model to run",
      120_000,
    );
    expect(nodesOf(Object.values(s.instances)[0])).toEqual([d.nodeId]);
    expect(d.log()).toMatch(/placed the default model/);
  }, 180_000);
});
