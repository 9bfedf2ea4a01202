/**
 * Placement, download and serving together: a bundled hub card placed on a real node is downloaded by the
 * driver from a loopback hub, loaded by llama-server and chatted with; deleting the instance while it is
 * still downloading cancels the download and leaves a resumable partial with no lock.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";
import { runnerTag, waitForState } from "../helpers/cluster.ts";

const MODEL = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const FILE = "Llama-3.2-1B-Instruct-Q4_K_M.gguf";

describe("placing a hub model", () => {
  let hub: FakeHub;
  let node: Daemon;

  beforeAll(async () => {
    // The card names a 0.8 GB file; the loopback hub serves a tiny model under that name instead.
    const repo = tempDir("hub-repo-");
    await Deno.copyFile(await tinyModel(), `${repo}/${FILE}`);
    hub = await startFakeHub({ repos: { [MODEL]: repo } });
    node = await startDaemon({
      env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), HF_ENDPOINT: hub.url },
    });
  });
  afterAll(async () => {
    await node?.stop();
    await hub?.close();
  });

  it("downloads on the driver, then serves", async () => {
    const res = await fetch(`${node.url}/place_instance`, {
      method: "POST",
      body: JSON.stringify({ model_id: MODEL }),
    });
    expect(res.status).toBe(200);
    const { instance_id } = await res.json();
    const s = await waitForState(
      node.url,
      (st) => {
        const inst = st.instances[instance_id];
        if (!inst) return false;
        const runner = Object.values(inst.MlxRingInstance.shardAssignments.nodeToRunner)[0] as string;
        return runnerTag(st, runner) === "RunnerReady";
      },
      "the downloaded model to serve",
      90_000,
    );
    const done = (s.downloads[node.nodeId] ?? []).find((p: Record<string, unknown>) =>
      "DownloadCompleted" in p
    );
    expect(done).toBeDefined();
    expect(hub.requests.some((r) => r.path.endsWith(`/resolve/main/${FILE}`) && r.status < 300)).toBe(true);
    await expect(Deno.stat(`${node.dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF/${FILE}`)).resolves
      .toBeTruthy();
    const chat = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 6 }),
    });
    expect(chat.status).toBe(200);
    expect((await chat.json()).choices[0].message.content.length).toBeGreaterThan(0);
    expect((await fetch(`${node.url}/instance/${instance_id}`, { method: "DELETE" })).status).toBe(200);
    await waitForState(node.url, (st) => !st.instances[instance_id], "the instance to go");
  });

  it("cancels an in-flight download when the placement is torn down", async () => {
    await Deno.remove(`${node.dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF`, { recursive: true });
    hub.always(`${MODEL}/${FILE}`, { kind: "slow", bytesPerSecond: 200_000 });
    const { instance_id } = await (await fetch(`${node.url}/place_instance`, {
      method: "POST",
      body: JSON.stringify({ model_id: MODEL }),
    })).json();
    // Some bytes must have landed before the teardown, or the later download has nothing to resume
    // (on a busy machine the teardown can otherwise beat the first write).
    await waitForState(
      node.url,
      (st) =>
        (st.downloads[node.nodeId] ?? []).some((p: Record<string, unknown>) =>
          ((p.DownloadOngoing as { downloadProgress?: { downloaded: { inBytes: number } } } | undefined)
            ?.downloadProgress?.downloaded.inBytes ?? 0) > 0
        ),
      "the download to write its first bytes",
    );
    expect((await fetch(`${node.url}/instance/${instance_id}`, { method: "DELETE" })).status).toBe(200);
    const dir = `${node.dataDir}/models/unsloth--Llama-3.2-1B-Instruct-GGUF`;
    // The partial stays for a later resume; the final file never appears; nothing is left downloading.
    let partial = false;
    for (let i = 0; i < 100 && !partial; i++) {
      partial = [...Deno.readDirSync(dir)].some((e) => e.name.endsWith(".partial"));
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(partial).toBe(true);
    await waitForState(
      node.url,
      (st) => !(st.downloads[node.nodeId] ?? []).some((p: Record<string, unknown>) => "DownloadOngoing" in p),
      "the download to stop",
    );
    await expect(Deno.stat(`${dir}/${FILE}`)).rejects.toThrow();
    // The partial's lock was released: a later download resumes it from where it stopped.
    hub.always(`${MODEL}/${FILE}`, null);
    const before = hub.requests.length;
    const again = await fetch(`${node.url}/store/models/${MODEL}/download`, { method: "POST", body: "{}" });
    expect(again.status).toBeLessThan(300);
    await waitForState(
      node.url,
      (st) =>
        (st.downloads[node.nodeId] ?? []).some((p: Record<string, unknown>) => "DownloadCompleted" in p),
      "the resumed download to finish",
    );
    const resumed = hub.requests.slice(before).find((r) => r.path.endsWith(FILE) && r.range);
    expect(resumed?.range).toMatch(/^bytes=[1-9]\d*-/);
  });
});
