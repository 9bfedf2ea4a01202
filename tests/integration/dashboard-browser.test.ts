/**
 * The dashboard end to end: a real node (with a tiny GGUF standing in for a catalogue model) driven by
 * headless Chromium. Set SKULK_SCREENSHOTS=docs/img to also save the screenshots the docs show.
 */
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Catalog } from "../../src/models/catalog.ts";
import { cardToWire, normalizeModelId } from "../../src/models/card.ts";
import { chromiumInstalled, launchBrowser, type TestBrowser, waitInPage } from "../helpers/browser.ts";
import { type Daemon, startDaemon, tempDir } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";
import { singleNodeInstance } from "../helpers/cluster.ts";

const MODEL = "unsloth/Llama-3.2-1B-Instruct-GGUF";
const SHOTS = Deno.env.get("SKULK_SCREENSHOTS");
const PHONE = { width: 390, height: 844 };

async function shot(page: Page, name: string, fullPage = false): Promise<void> {
  if (!SHOTS) return;
  Deno.mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage });
}

/** Whether the node serves a route: an unknown route answers 404 with "no route for …". */
async function hasRoute(url: string, method: string, path: string): Promise<boolean> {
  const res = await fetch(`${url}${path}`, { method, body: method === "GET" ? undefined : "{}" });
  const text = await res.text();
  return !(res.status === 404 && text.includes("no route for"));
}

describe.skipIf(!chromiumInstalled())("the dashboard in headless Chromium against a real node", () => {
  let dir: string;
  let node: Daemon;
  let browser: TestBrowser;
  let configFile: string;

  beforeAll(async () => {
    dir = tempDir("skulk-dashboard-e2e-");
    configFile = `${dir}/skulk.yaml`;
    Deno.writeTextFileSync(configFile, "node:\n  friendly_name: e2e-node\n");
    // The tiny random-weight GGUF sits where the catalogue card's file would be downloaded to.
    const card = Catalog.bundled().get(MODEL)!;
    const modelDir = `${dir}/models/${normalizeModelId(MODEL)}`;
    Deno.mkdirSync(modelDir, { recursive: true });
    Deno.copyFileSync(await tinyModel(), `${modelDir}/${card.gguf_file}`);
    node = await startDaemon({
      dataDir: `${dir}/data`,
      args: ["--config", configFile, "--models-dir", `${dir}/models`],
    });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await node?.stop();
    await Deno.remove(dir, { recursive: true }).catch(() => undefined);
  });

  it("shows the local node with its name and memory, updating live", async () => {
    const page = await browser.page();
    try {
      await page.goto(`${node.url}/`);
      const card = page.locator(`[data-node-id="${node.nodeId}"]`);
      await card.waitFor();
      await expect(card.locator("h3").textContent()).resolves.toBe("e2e-node");
      await expect(card.getByText("this node").count()).resolves.toBe(1);
      await expect(card.getByRole("meter", { name: "Memory" }).getAttribute("aria-valuetext")).resolves
        .toMatch(/\d.* \/ \d/);
      // Live: the "Updated …" line changes without a reload.
      const updated = page.locator(".view-head p");
      const first = await updated.textContent();
      await waitInPage(
        page,
        `document.querySelector(".view-head p")?.textContent !== ${JSON.stringify(first)}`,
        10_000,
      );
      await expect(page.evaluate(() => performance.getEntriesByType("navigation").length)).resolves.toBe(1);
    } finally {
      await page.close();
    }
  });

  it("fits the operator panel in 390 px and asks before restarting", async () => {
    const page = await browser.page(PHONE);
    try {
      await page.goto(`${node.url}/operator`);
      const card = page.locator(`[data-node-id="${node.nodeId}"]`);
      await card.waitFor();
      await expect(card.getByRole("meter", { name: "Memory" }).isVisible()).resolves.toBe(true);
      await expect(card.getByText("Temperature").isVisible()).resolves.toBe(true);
      const overflow = await page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      );
      expect(overflow as number).toBeLessThanOrEqual(0);
      const restart = card.getByRole("button", { name: "Restart e2e-node" });
      const box = (await restart.boundingBox())!;
      expect(box.height).toBeGreaterThanOrEqual(44); // a comfortable tap target
      await shot(page, "operator-390");
      await restart.click();
      const dialog = card.getByRole("alertdialog", { name: "Confirm restart of e2e-node" });
      await dialog.waitFor();
      await dialog.getByRole("button", { name: "Cancel" }).click();
      await expect(dialog.count()).resolves.toBe(0);
      await expect(restart.isVisible()).resolves.toBe(true);
    } finally {
      await page.close();
    }
  });

  it("shows a refused setting's error next to its field and keeps the file", async () => {
    const before = Deno.readTextFileSync(configFile);
    const page = await browser.page({ width: 1280, height: 1180 });
    try {
      await page.goto(`${node.url}/settings`);
      const port = page.getByLabel("port", { exact: true });
      await port.fill("99999");
      await page.getByRole("button", { name: "Save settings" }).click();
      const err = page.locator('[id="set-api.port-err"]');
      await err.waitFor();
      await expect(err.textContent()).resolves.toMatch(/api\.port.*65535/);
      await expect(port.getAttribute("aria-invalid")).resolves.toBe("true");
      await expect(port.getAttribute("aria-describedby")).resolves.toContain("set-api.port-err");
      expect(Deno.readTextFileSync(configFile)).toBe(before);
      await page.evaluate("window.scrollTo(0, 0)");
      await shot(page, "settings");
      // A good value saves and clears the error.
      await port.fill("");
      await page.getByLabel("friendly name").fill("e2e-renamed");
      await page.getByRole("button", { name: "Save settings" }).click();
      await page.getByText(/saved .*skulk\.yaml/).waitFor();
      await expect(err.count()).resolves.toBe(0);
      expect(Deno.readTextFileSync(configFile)).toContain("friendly_name: e2e-renamed");
    } finally {
      await page.close();
    }
  });

  it("lists the catalogue, filters it, and previews a placement (or shows the server's refusal)", async () => {
    const page = await browser.page({ width: 1280, height: 1000 });
    try {
      await page.goto(`${node.url}/model-store`);
      await page.locator(".model-card").first().waitFor();
      const all = await page.locator(".model-card").count();
      expect(all).toBeGreaterThan(3);
      await page.getByRole("searchbox", { name: "Search" }).fill("Llama-3.2-1B-Instruct-GGUF");
      const card = page.locator(`[data-model-id="${MODEL}"]`);
      await card.waitFor();
      await expect(page.locator(".model-card").count()).resolves.toBeLessThan(all);
      await card.getByRole("button", { name: /Preview placement/ }).click();
      const panel = page.getByRole("region", { name: /Placement for/ });
      await panel.waitFor();
      await waitInPage(
        page,
        `!document.querySelector(".preview-panel")?.textContent?.includes("Asking the cluster")`,
      );
      const direct = await fetch(`${node.url}/instance/previews?model_id=${encodeURIComponent(MODEL)}`);
      if (direct.ok) {
        await direct.body?.cancel();
        await expect(panel.locator(".preview").count()).resolves.toBeGreaterThan(0);
        // Options say what would run, never a wire tag.
        await expect(panel.textContent()).resolves.toContain("llama.cpp on one node");
        await expect(panel.textContent()).resolves.not.toMatch(/MlxRing|LlamaRpc|MlxJaccl/);
      } else {
        // The node refuses previews (the planner may not be merged): the UI shows the server's own words and a retry.
        const message = (await direct.json()).error.message as string;
        await expect(panel.getByRole("alert").textContent()).resolves.toContain(message);
        await expect(panel.getByRole("button", { name: "Retry" }).count()).resolves.toBe(1);
      }
      await shot(page, "model-store-preview");
    } finally {
      await page.close();
    }
  });

  it("shows only what this Linux cluster can run by default, and says why the rest cannot run", async () => {
    const page = await browser.page({ width: 1280, height: 1000 });
    try {
      await page.goto(`${node.url}/model-store`);
      const runs = page.getByRole("checkbox", { name: "Runs on this cluster" });
      await page.locator(".model-card").first().waitFor();
      // This node runs Linux, so the filter starts on.
      await waitInPage(page, `document.querySelector(".hidden-note") !== null`);
      await expect(runs.isChecked()).resolves.toBe(true);
      await page.getByRole("searchbox", { name: "Search" }).fill("Qwen3-0.6B");
      const gguf = page.locator('[data-model-id="Qwen/Qwen3-0.6B-GGUF"]');
      const mlx = page.locator('[data-model-id="mlx-community/Qwen3-0.6B-4bit"]');
      await gguf.waitFor();
      await expect(mlx.count()).resolves.toBe(0);
      await expect(gguf.getByText("cannot run here").count()).resolves.toBe(0);
      const note = page.getByRole("status").filter({ hasText: "Hiding" });
      await expect(note.textContent()).resolves.toMatch(
        /Hiding 2 models this cluster cannot run \(2 need a runner/,
      );
      // Cleared, the MLX cards come back marked, each with the capability table's reason.
      await runs.uncheck();
      await mlx.waitFor();
      await expect(page.locator('[data-model-id^="mlx-community/Qwen3-0.6B-"]').count()).resolves.toBe(2);
      await expect(mlx.getByText("cannot run here").count()).resolves.toBe(1);
      await expect(mlx.locator(".model-why").textContent()).resolves.toMatch(
        /lists only mlx backends; MLX cards need an MLX runner, which Linux nodes lack/,
      );
      await expect(gguf.getByText("cannot run here").count()).resolves.toBe(0);
      await expect(page.getByRole("status").filter({ hasText: "Hiding" }).count()).resolves.toBe(0);
      await shot(page, "model-store-runs-here");
    } finally {
      await page.close();
    }
  });

  it("shows an open size as 'size unknown' with no fit verdict, never 0 B", async () => {
    const open = "microsoft/Phi-3-mini-4k-instruct-gguf";
    expect(Catalog.bundled().get(open)?.storage_size).toBeUndefined();
    const page = await browser.page({ width: 1280, height: 1000 });
    try {
      await page.goto(`${node.url}/model-store`);
      await page.locator(".model-card").first().waitFor();
      await page.getByRole("searchbox", { name: "Search" }).fill("Phi-3-mini-4k-instruct-gguf");
      const card = page.locator(`[data-model-id="${open}"]`);
      await card.waitFor();
      await expect(card.locator(".model-facts").textContent()).resolves.toContain("size unknown");
      await expect(card.textContent()).resolves.not.toMatch(/\b0 B\b|fits|larger than free memory/);
      await expect(page.locator(".model-card").filter({ hasText: /\b0 B\b/ }).count()).resolves.toBe(0);
    } finally {
      await page.close();
    }
  });

  it("launches a model from the store and watches it become ready", async (ctx) => {
    if (!(await hasRoute(node.url, "POST", "/place_instance"))) {
      console.warn(
        "skipped: this node has no POST /place_instance yet (the placement planner is not merged)",
      );
      ctx.skip();
    }
    const page = await browser.page({ width: 1280, height: 1000 });
    try {
      await page.goto(`${node.url}/model-store`);
      await page.getByRole("searchbox", { name: "Search" }).fill("Llama-3.2-1B-Instruct-GGUF");
      await page.locator(`[data-model-id="${MODEL}"]`).getByRole("button", { name: /Preview placement/ })
        .click();
      await page.getByRole("button", { name: /^Launch on 1 node/ }).first().click();
      await page.getByText("Launch requested").waitFor();
      const instance = page.locator(".instance").filter({ hasText: MODEL });
      await instance.getByText("ready", { exact: true }).waitFor({ timeout: 90_000 });
    } finally {
      await page.close();
    }
  }, 150_000);

  it(
    "chats with a placed model: streamed text, Stop, kept across reloads, and a retryable error when it is gone",
    async () => {
      let state = await (await fetch(`${node.url}/state`)).json();
      if (Object.keys(state.instances).length === 0) {
        // Placement by the planner may not be merged: place the instance fully specified instead.
        const instance = singleNodeInstance(node.nodeId, cardToWire(Catalog.bundled().get(MODEL)!));
        const res = await fetch(`${node.url}/instance`, {
          method: "POST",
          body: JSON.stringify({ instance }),
        });
        expect(res.status).toBe(200);
      }
      const page = await browser.page({ width: 1280, height: 800 });
      try {
        // The cluster view shows the instance and its runner becoming ready.
        await page.goto(`${node.url}/cluster`);
        const runner = page.locator(`[data-node-id="${node.nodeId}"] .runners li`).filter({ hasText: MODEL });
        await runner.getByText("ready", { exact: true }).waitFor({ timeout: 90_000 });
        await shot(page, "cluster");
        // The store lists the running instance with its runner's state.
        await page.getByRole("link", { name: "Model store" }).click();
        const running = page.locator(".instance").filter({ hasText: MODEL });
        await running.getByText("ready", { exact: true }).waitFor();
        // It is named by what runs it, not by the wire tag.
        await expect(running.locator(".row-head").textContent()).resolves.toContain("llama.cpp on one node");
        await expect(running.textContent()).resolves.not.toContain("MlxRing");
        await expect(running.getByRole("button", { name: `Delete instance of ${MODEL}` }).count()).resolves
          .toBe(1);
        await shot(page, "model-store");

        await page.getByRole("link", { name: "Chat" }).click();
        await page.getByLabel("Model").selectOption(MODEL);
        await page.getByLabel("Message").fill("Tell me a long story about foxes.");
        await page.getByRole("button", { name: "Send" }).click();
        const stop = page.getByRole("button", { name: "Stop" });
        await stop.waitFor();
        const answer = page.locator('[data-role="assistant"] .msg-text').last();
        await answer.waitFor();
        const early = (await answer.textContent())!.length;
        // Streamed: the answer grows while the Stop button is still up.
        await waitInPage(
          page,
          `(document.querySelector('[data-role="assistant"] .msg-text')?.textContent?.length ?? 0) > ${
            early + 5
          }`,
          60_000,
        );
        await expect(stop.isVisible()).resolves.toBe(true);
        await shot(page, "chat");
        await stop.click();
        await page.getByText("Stopped.").waitFor();
        await page.getByRole("button", { name: "Send" }).waitFor();
        const kept = await answer.textContent();
        expect(kept!.length).toBeGreaterThan(early);

        await page.reload();
        await page.getByRole("button", { name: /^Tell me a long story/ }).click();
        await expect(page.locator('[data-role="assistant"] .msg-text').first().textContent()).resolves.toBe(
          kept,
        );

        // The model goes away: the next message fails with advice and a Retry button.
        state = await (await fetch(`${node.url}/state`)).json();
        for (const id of Object.keys(state.instances)) {
          await fetch(`${node.url}/instance/${id}`, { method: "DELETE" });
        }
        await page.getByLabel("Message").fill("Are you still there?");
        await page.getByRole("button", { name: "Send" }).click();
        const alert = page.locator('[data-role="assistant"]').last().getByRole("alert");
        await alert.waitFor();
        await expect(alert.textContent()).resolves.toMatch(/no longer placed/);
        await expect(alert.getByRole("button", { name: "Retry" }).count()).resolves.toBe(1);
      } finally {
        await page.close();
      }
    },
    180_000,
  );
});

describe.skipIf(!chromiumInstalled())("the dashboard on a node that requires an API key", () => {
  const KEY = "dashboard-e2e-key-0123456789";
  let node: Daemon;
  let browser: TestBrowser;
  beforeAll(async () => {
    node = await startDaemon({ env: { SKULK_API_KEY: KEY } });
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await node?.stop();
    await Deno.remove(node.dataDir, { recursive: true }).catch(() => undefined);
  });

  it("serves the page without the key, asks for it, and then shows the cluster", async () => {
    expect((await fetch(`${node.url}/state`)).status).toBe(401);
    const page = await browser.page();
    try {
      await page.goto(`${node.url}/cluster`);
      const prompt = page.getByRole("form", { name: "This node needs its API key" });
      await prompt.waitFor();
      await prompt.getByLabel("API key").fill("not-the-key-at-all");
      await prompt.getByRole("button", { name: "Use key" }).click();
      await page.getByText("The key saved in this browser was refused.").waitFor();
      await prompt.getByLabel("API key").fill(KEY);
      await prompt.getByRole("button", { name: "Use key" }).click();
      await page.locator(`[data-node-id="${node.nodeId}"]`).waitFor();
      await expect(prompt.count()).resolves.toBe(0);
      await expect(page.getByText("this node").count()).resolves.toBe(1);
    } finally {
      await page.close();
    }
  });
});
