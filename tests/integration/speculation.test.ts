/**
 * Speculative decoding on a real node with real llama-server: a hub card whose drafter lives in another repo
 * (downloaded as a companion from a loopback hub), a local model registered with a drafter beside it, and the
 * opt-in n-gram setting; each starts llama-server with the flags, answers, and reports acceptance per request
 * (usage, through the official openai SDK, streamed and not) and per runner (`/node/runners`).
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localCardWire, placeOnNode, waitForState } from "../helpers/cluster.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";

const LONG = 240_000;
const HUB_MODEL = "skulk-test/spec-GGUF";
const DRAFT_REPO = "skulk-test/spec-draft-GGUF";

interface RunnerInfo {
  modelId: string;
  phase: string;
  engine: { command: string[] } | null;
  speculation: {
    type: string;
    source: string;
    nMax: number | null;
    draftModel: string | null;
    draftTokens: number | null;
    acceptedTokens: number | null;
    acceptance: number | null;
  } | null;
}

async function runnerOf(node: Daemon, modelId: string): Promise<RunnerInfo> {
  const { runners } = await (await fetch(`${node.url}/node/runners`)).json() as { runners: RunnerInfo[] };
  const r = runners.find((x) => x.modelId === modelId);
  if (!r) throw new Error(`no runner for ${modelId} on ${node.url}`);
  return r;
}

type Usage = {
  completion_tokens_details?: { accepted_prediction_tokens?: number; rejected_prediction_tokens?: number };
};

describe("speculative decoding", () => {
  let hub: FakeHub;
  let node: Daemon;
  let ngramNode: Daemon;
  let dir: string;

  beforeAll(async () => {
    // The drafter is the model itself under another name: with greedy sampling every draft is accepted,
    // so acceptance is exact, not a property of random weights.
    const model = await tinyModel();
    const repo = tempDir("spec-hub-model-");
    const draftRepo = tempDir("spec-hub-draft-");
    await Deno.copyFile(model, `${repo}/model.gguf`);
    await Deno.copyFile(model, `${draftRepo}/draft.gguf`);
    hub = await startFakeHub({ repos: { [HUB_MODEL]: repo, [DRAFT_REPO]: draftRepo } });
    dir = tempDir("spec-local-");
    await Deno.copyFile(model, `${dir}/model.gguf`);
    await Deno.copyFile(model, `${dir}/draft.gguf`);
    const bin = await engineBinary("llama-server");
    [node, ngramNode] = await Promise.all([
      startDaemon({
        args: ["--no-mdns"],
        env: { SKULK_LLAMA_SERVER_BIN: bin, HF_ENDPOINT: hub.url, SKULK_LLAMA_THREADS: "1" },
      }),
      startDaemon({
        args: ["--no-mdns"],
        env: {
          SKULK_LLAMA_SERVER_BIN: bin,
          SKULK_SPECULATION_NGRAM: "ngram-map-k",
          SKULK_LLAMA_THREADS: "1",
        },
      }),
    ]);
  }, LONG);
  afterAll(async () => {
    await Promise.all([node?.stop(), ngramNode?.stop()]);
    await hub?.close();
  });

  it("fetches a card's drafter from its own repo as a companion and drafts with it", async () => {
    const { ggufPath: _local, ...wire } = localCardWire(HUB_MODEL, await tinyModel());
    const card: { modelId: string } & Record<string, unknown> = {
      ...wire,
      ggufFile: "model.gguf",
      placement: { compatibleBackends: ["llama_server-cpu"], backendPreference: ["llama_server-cpu"] },
      runtime: {
        servedSpecType: "draft_simple",
        servedSpecNMax: 4,
        servedSpecDraftRepo: DRAFT_REPO,
        servedSpecDraftFile: "draft.gguf",
      },
    };
    await placeOnNode(node, card, 2048, LONG);
    const draftPath = `${node.dataDir}/models/skulk-test--spec-draft-GGUF/draft.gguf`;
    expect(Deno.statSync(draftPath).isFile).toBe(true);
    expect(hub.requests.some((r) => r.path === `/${DRAFT_REPO}/resolve/main/draft.gguf` && r.status < 300))
      .toBe(
        true,
      );
    const r = await runnerOf(node, HUB_MODEL);
    expect(r.engine!.command.join(" ")).toContain(
      `--spec-type draft-simple --spec-draft-n-max 4 --spec-draft-model ${draftPath} --metrics`,
    );

    const openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: LONG });
    const reply = await openai.chat.completions.create({
      model: HUB_MODEL,
      messages: [{ role: "user", content: "count with me" }],
      max_tokens: 40,
      temperature: 0,
    });
    const details = (reply.usage as Usage).completion_tokens_details!;
    expect(details.accepted_prediction_tokens).toBeGreaterThan(0);
    expect(details.rejected_prediction_tokens).toBe(0);

    const after = await runnerOf(node, HUB_MODEL);
    expect(after.speculation).toMatchObject({
      type: "draft-simple",
      source: "card",
      nMax: 4,
      draftModel: `${DRAFT_REPO}/draft.gguf`,
      acceptance: 1,
    });
    expect(after.speculation!.acceptedTokens).toBe(details.accepted_prediction_tokens);
  }, LONG);

  it("registers a local model with a drafter beside it; a streamed answer reports its drafts", async () => {
    const bad = await fetch(`${node.url}/models/add`, {
      method: "POST",
      body: JSON.stringify({
        model_id: "local/spec",
        gguf_path: `${dir}/model.gguf`,
        draft_path: "/etc/passwd",
      }),
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toMatch(/draft_path/);

    const add = await fetch(`${node.url}/models/add`, {
      method: "POST",
      body: JSON.stringify({
        model_id: "local/spec",
        gguf_path: `${dir}/model.gguf`,
        draft_path: `${dir}/draft.gguf`,
      }),
    });
    expect(add.status).toBe(200);
    const place = await fetch(`${node.url}/place_instance`, {
      method: "POST",
      body: JSON.stringify({ model_id: "local/spec" }),
    });
    expect(place.status).toBe(200);
    const { instance_id } = await place.json();
    await waitForState(
      node.url,
      (s) => {
        const inst = s.instances[instance_id];
        const runner = inst && Object.values(inst.MlxRingInstance.shardAssignments.nodeToRunner)[0] as string;
        return !!runner && Object.keys(s.runners[runner] ?? {})[0] === "RunnerReady";
      },
      "local/spec to serve",
      LONG,
    );
    expect((await runnerOf(node, "local/spec")).engine!.command.join(" ")).toContain(
      `--spec-type draft-simple --spec-draft-model ${dir}/draft.gguf`,
    );
    const openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: LONG });
    const stream = await openai.chat.completions.create({
      model: "local/spec",
      messages: [{ role: "user", content: "tell me more" }],
      max_tokens: 30,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: Usage | undefined;
    let text = "";
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage as Usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens_details?.accepted_prediction_tokens).toBeGreaterThan(0);
  }, LONG);

  it("n-gram speculation from the node's setting drafts from the text itself", async () => {
    const card: { modelId: string } & Record<string, unknown> = {
      ...localCardWire("local/ngram", `${dir}/model.gguf`),
      placement: { compatibleBackends: ["llama_server-cpu"], backendPreference: ["llama_server-cpu"] },
    };
    await placeOnNode(ngramNode, card, 2048, LONG);
    const r = await runnerOf(ngramNode, "local/ngram");
    expect(r.engine!.command.join(" ")).toContain("--spec-type ngram-map-k --metrics");
    expect(r.speculation).toMatchObject({ type: "ngram-map-k", source: "setting", draftModel: null });
    // Random weights decode greedily into loops, which an n-gram drafter predicts from the text so far.
    const res = await fetch(`${ngramNode.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: "local/ngram",
        messages: [{ role: "user", content: "the cat sat on the mat. ".repeat(8) }],
        max_tokens: 300,
        temperature: 0,
      }),
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.timings.draft_n).toBeGreaterThan(0);
    expect(body.usage.completion_tokens_details.accepted_prediction_tokens).toBe(
      body.timings.draft_n_accepted,
    );
    const counted = await runnerOf(ngramNode, "local/ngram");
    expect(counted.speculation!.draftTokens).toBe(body.timings.draft_n);
  }, LONG);
});
