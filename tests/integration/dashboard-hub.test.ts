/**
 * A hub model from search to a served chat answer through the dashboard: headless Chromium against a real node
 * pointed (HF_ENDPOINT) at a loopback hub serving real tiny GGUF files; the hub's refusals shown in words.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytes } from "../../src/dashboard/app/format.ts";
import { Catalog } from "../../src/models/catalog.ts";
import { chromiumInstalled, launchBrowser, type TestBrowser, waitInPage } from "../helpers/browser.ts";
import { runnerTag, waitForState } from "../helpers/cluster.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { type FakeHub, startFakeHub } from "../helpers/fake-hub.ts";
import { engineBinary, tinyModel } from "../helpers/models.ts";

const REPO = "acme/Tiny-GGUF";
/** A bundled card whose size is open (the dashboard test checks it reads "size unknown"). */
const OPEN = "microsoft/Phi-3-mini-4k-instruct-gguf";
const SHOTS = Deno.env.get("SKULK_SCREENSHOTS");

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  Deno.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png` });
}

/** Whether a model id has a ready runner in `/state`. */
const ready = (modelId: string) => (st: Awaited<ReturnType<typeof waitForState>>) =>
  Object.values(st.instances).some((i) => {
    const body = Object.values(i as Record<string, { shardAssignments: Record<string, unknown> }>)[0];
    if (body.shardAssignments.modelId !== modelId) return false;
    const runners = Object.values(body.shardAssignments.nodeToRunner as Record<string, string>);
    return runners.every((r) => runnerTag(st, r) === "RunnerReady");
  });

const dir = tempDir("skulk-dashboard-hub-");
let hub: FakeHub;
let node: Daemon;
let small: number;
let other: number;

beforeAll(async () => {
  const q4 = await tinyModel({ layers: 2, seed: 9 });
  const q8 = await tinyModel({ layers: 3, seed: 21 });
  small = Deno.statSync(q4).size;
  other = Deno.statSync(q8).size;
  const repo = (name: string, files: Record<string, string>) => {
    const root = `${dir}/repos/${name.replace("/", "--")}`;
    Deno.mkdirSync(root, { recursive: true });
    for (const [file, from] of Object.entries(files)) Deno.copyFileSync(from, `${root}/${file}`);
    return root;
  };
  const openFile = Catalog.bundled().get(OPEN)!.gguf_file!;
  hub = await startFakeHub({
    repos: {
      [REPO]: repo(REPO, { "Tiny-Q4_K_M.gguf": q4, "Tiny-Q8_0.gguf": q8 }),
      [OPEN]: repo(OPEN, { [openFile]: q4 }),
    },
    listed: {
      [REPO]: { downloads: 4321, likes: 17, tags: ["gguf", "llama"] },
      // Listed by the search but with no files behind it: the add answers 404.
      "acme/Tiny-Gone-GGUF": { downloads: 12, tags: ["gguf"] },
    },
  });
  node = await startDaemon({
    dataDir: `${dir}/node`,
    env: { SKULK_LLAMA_SERVER_BIN: await engineBinary("llama-server"), HF_ENDPOINT: hub.url },
  });
}, 120_000);

afterAll(async () => {
  await node?.kill();
  await hub?.close().catch(() => undefined);
  await Deno.remove(dir, { recursive: true }).catch(() => undefined);
});

async function removeInstances(): Promise<void> {
  const st = await (await fetch(`${node.url}/state`)).json();
  for (const id of Object.keys(st.instances)) await fetch(`${node.url}/instance/${id}`, { method: "DELETE" });
  await waitForState(node.url, (s) => Object.keys(s.instances).length === 0, "the instances to go", 60_000);
}

describe.skipIf(!chromiumInstalled())("a hub model through the dashboard's model store", () => {
  let browser: TestBrowser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it(
    "searches, adds (with a quantisation choice), launches and chats with a hub GGUF repo; no card shows 0 B",
    async () => {
      const page = await browser.page({ width: 1280, height: 1000 });
      try {
        await page.goto(`${node.url}/model-store`);
        await page.locator(".model-card").first().waitFor();
        const before = hub.requests.filter((r) => r.path === "/api/models").length;
        // Typed a letter at a time, the search waits for the last key: one hub request, not one per letter.
        await page.getByRole("searchbox", { name: "Find on the hub" }).pressSequentially("tiny", {
          delay: 40,
        });
        const result = page.locator(`[data-hub-id="${REPO}"]`);
        await result.waitFor();
        expect(hub.requests.filter((r) => r.path === "/api/models").length - before).toBe(1);
        await expect(result.textContent()).resolves.toContain("4,321 downloads · 17 likes");
        // The most downloaded first, as the hub sorts them.
        await expect(page.locator(".hub-result").first().getAttribute("data-hub-id")).resolves.toBe(REPO);

        await result.getByRole("button", { name: `Add ${REPO}` }).click();
        await result.getByText("Added as Tiny-Q4_K_M.gguf").waitFor();
        const facts = result.locator(".model-facts");
        await expect(facts.textContent()).resolves.toMatch(/fits/);
        await expect(facts.textContent()).resolves.toContain(bytes(small));
        // The other quantisation on offer: choosing it adds that file instead, with its own size.
        const quant = result.getByRole("combobox", { name: `Quantisation of ${REPO}` });
        await expect(quant.locator("option").allTextContents()).resolves.toEqual(["Q4_K_M", "Q8_0"]);
        await quant.selectOption("Q8_0");
        await result.getByText("Added as Tiny-Q8_0.gguf").waitFor();
        const listed = async () =>
          (await (await fetch(`${node.url}/models`)).json()).data.find((m: { id: string }) => m.id === REPO);
        expect(await listed()).toMatchObject({ storage_size_bytes: other });
        await quant.selectOption("Q4_K_M");
        await result.getByText("Added as Tiny-Q4_K_M.gguf").waitFor();
        expect(await listed()).toMatchObject({ storage_size_bytes: small, is_custom: true });
        // The catalogue re-reads and lists the added card too.
        await page.locator(`.model-card[data-model-id="${REPO}"]`).waitFor();
        await page.getByRole("region", { name: "Search the hub" }).scrollIntoViewIfNeeded();
        await shot(page, "model-store-hub");

        // Launch goes through the store's placement preview, as a catalogue card does.
        await result.getByRole("button", { name: `Launch ${REPO}` }).click();
        const panel = page.getByRole("region", { name: /^Placement for / });
        await panel.waitFor();
        await panel.getByRole("button", { name: /^Launch on 1 node/ }).first().click();
        await panel.getByText("Launch requested").waitFor();
        const instance = page.locator(".instance").filter({ hasText: REPO });
        await instance.getByText("ready", { exact: true }).waitFor({ timeout: 180_000 });
        await waitForState(node.url, ready(REPO), "the hub model to serve", 30_000);
        expect(Deno.statSync(`${node.dataDir}/models/acme--Tiny-GGUF/Tiny-Q4_K_M.gguf`).size).toBe(small);

        // Nothing in the store says 0 B (open sizes read "size unknown").
        await expect(page.locator(".model-card, .hub-result").filter({ hasText: /\b0 B\b/ }).count()).resolves
          .toBe(0);
        await expect(page.locator(".view").textContent()).resolves.not.toMatch(/\b0 B\b/);

        // A served answer, in the dashboard's chat.
        await page.getByRole("link", { name: "Chat" }).click();
        await page.getByLabel("Model").selectOption(REPO);
        await page.getByLabel("Message").fill("Say hello.");
        await page.getByRole("button", { name: "Send" }).click();
        const answer = page.locator('[data-role="assistant"] .msg-text').last();
        await answer.waitFor({ timeout: 60_000 });
        await waitInPage(
          page,
          `(document.querySelector('[data-role="assistant"] .msg-text')?.textContent?.trim().length ?? 0) > 0`,
          60_000,
        );
        // Random weights rarely stop on their own and the chat sets no token limit: the streamed words are the answer.
        const stop = page.getByRole("button", { name: "Stop" });
        if (await stop.isVisible()) await stop.click();
        await page.getByRole("button", { name: "Send" }).waitFor({ timeout: 60_000 });
        await expect(page.locator('[data-role="assistant"]').last().getByRole("alert").count()).resolves.toBe(
          0,
        );
        expect((await answer.textContent())!.trim().length).toBeGreaterThan(0);
      } finally {
        await page.close();
      }
    },
    300_000,
  );
});

describe("Ollama's model lists for a card whose size is open", () => {
  it("report the size resolved on placement, never 0", async () => {
    expect(Catalog.bundled().get(OPEN)?.storage_size).toBeUndefined();
    await removeInstances();
    const place = await fetch(`${node.url}/place_instance`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model_id: OPEN }),
    });
    expect(place.status, await place.clone().text()).toBe(200);
    try {
      for (const path of ["/ollama/api/tags", "/ollama/api/ps"]) {
        const { models } = await (await fetch(`${node.url}${path}`)).json();
        const entry = models.find((m: { name: string }) => m.name === OPEN);
        expect(entry, path).toMatchObject({ size: small });
      }
    } finally {
      await removeInstances();
    }
  }, 120_000);
});

describe.skipIf(!chromiumInstalled())("the hub's refusals in the dashboard's model store", () => {
  let browser: TestBrowser;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it(
    "shows the hub's refusals as readable messages: a missing repo (404) and an unreachable hub (503)",
    async () => {
      const page = await browser.page({ width: 1280, height: 1000 });
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(e.message));
      try {
        await page.goto(`${node.url}/model-store`);
        const box = page.getByRole("searchbox", { name: "Find on the hub" });
        await box.fill("gone");
        const gone = page.locator('[data-hub-id="acme/Tiny-Gone-GGUF"]');
        await gone.waitFor();
        await gone.getByRole("button", { name: "Add acme/Tiny-Gone-GGUF" }).click();
        await expect(gone.getByRole("alert").textContent()).resolves.toMatch(
          /^The hub has no such repo: .*acme\/Tiny-Gone-GGUF.*not found on the hub \(404\)/,
        );
        await expect(gone.getByRole("button", { name: "Launch acme/Tiny-Gone-GGUF" }).count()).resolves.toBe(
          0,
        );

        await hub.close();
        await box.fill("tiny");
        const alert = page.getByRole("region", { name: "Search the hub" }).getByRole("alert").filter({
          hasText: "unreachable",
        });
        await alert.waitFor();
        await expect(alert.textContent()).resolves.toMatch(
          new RegExp(`^The model hub is offline or unreachable: the model hub at ${hub.url} is unreachable`),
        );
        await expect(alert.getByRole("button", { name: "Retry" }).count()).resolves.toBe(1);
        // The rest of the store still works, and nothing in it says 0 B (a download of an open size still pending).
        await expect(page.locator(".view").textContent()).resolves.not.toMatch(/\b0 B\b/);
        await expect(page.locator(".model-card").count()).resolves.toBeGreaterThan(0);
        expect(errors).toEqual([]);
      } finally {
        await page.close();
      }
    },
    60_000,
  );
});
