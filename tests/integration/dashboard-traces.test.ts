/**
 * The observability view in headless Chromium against a real node serving a tiny model: tracing turned on
 * from the page, a real chat's trace listed and opened as a waterfall whose bars are the spans the API
 * holds, the timeline answering or saying it is unavailable, and the node's gauges.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumInstalled, launchBrowser, type TestBrowser } from "../helpers/browser.ts";
import { llamaNodes, localCardWire, placeOnNode } from "../helpers/cluster.ts";
import type { Daemon } from "../helpers/daemon.ts";
import { tinyModel } from "../helpers/models.ts";
import { json, waitFor } from "../helpers/multinode.ts";

const MODEL = "skulk-test/dashboard-traces";
const nodes = llamaNodes();
/** SKULK_SCREENSHOTS=docs/img saves the screenshot docs/dashboard.md shows. */
const SHOTS = Deno.env.get("SKULK_SCREENSHOTS");

describe.skipIf(!chromiumInstalled())("the observability view in headless Chromium", () => {
  let node: Daemon;
  let browser: TestBrowser;

  beforeAll(async () => {
    node = await nodes.start();
    await placeOnNode(node, localCardWire(MODEL, await tinyModel()), 2048, 240_000);
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await nodes.killAll();
  });

  it("turns tracing on and opens a real request's trace as a waterfall", async () => {
    const page = await browser.page();
    try {
      await page.goto(`${node.url}/observability`);
      await page.getByRole("button", { name: "Turn tracing on" }).click();
      await page.getByRole("button", { name: "Turn tracing off" }).waitFor();
      expect(await json(`${node.url}/v1/tracing`)).toEqual({ enabled: true });

      const res = await fetch(`${node.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 6,
          stream: true,
        }),
      });
      const taskId = res.headers.get("x-skulk-task-id")!;
      await res.text();
      const spans = await waitFor("the trace stored", async () => {
        const r = await fetch(`${node.url}/v1/traces/${taskId}`);
        return r.ok ? (await r.json()).traces as { category: string }[] : null;
      });

      // The list refreshes by itself; its row opens the waterfall.
      const row = page.locator(`tr[data-task-id="${taskId}"]`);
      await row.waitFor({ timeout: 20_000 });
      await row.getByRole("link").click();
      const wf = page.locator(`.obs-waterfall[data-task-id="${taskId}"]`);
      await wf.locator(".bar").first().waitFor();
      expect(page.url()).toContain(`?trace=${taskId}`);
      const lanes = wf.locator(".lane");
      expect(await lanes.count()).toBe(1);
      expect(await lanes.first().getAttribute("data-node-id")).toBe(node.nodeId);
      const drawn = await wf.locator(".bar").evaluateAll((els) =>
        els.map((e) => e.getAttribute("data-category"))
      );
      expect(drawn.sort()).toEqual(spans.map((s) => s.category).sort());
      expect(drawn).toEqual(expect.arrayContaining(["route", "prefill", "decode"]));
      // Every bar lies inside its lane.
      const geometry = await wf.locator(".bar").evaluateAll((els) =>
        els.map((e) => {
          const b = e.getBoundingClientRect();
          const lane = e.closest(".lane-bars")!.getBoundingClientRect();
          return b.left >= lane.left - 1 && b.right <= lane.right + 1 && b.width > 0;
        })
      );
      expect(geometry.every(Boolean)).toBe(true);

      if (SHOTS) {
        Deno.mkdirSync(SHOTS, { recursive: true });
        await page.screenshot({ path: `${SHOTS}/observability.png`, fullPage: true });
      }

      // Opened again from a link: the trace is in the URL.
      await page.goto(`${node.url}/observability?trace=${taskId}`);
      await page.locator(`.obs-waterfall[data-task-id="${taskId}"] .bar`).first().waitFor();

      // The timeline: the merged events, or a plain note where this build has no timeline route.
      const timeline = await fetch(`${node.url}/v1/diagnostics/cluster/timeline`);
      await timeline.body?.cancel();
      if (timeline.status === 404) await page.getByText("Timeline unavailable on this node.").waitFor();
      else await page.locator(".obs-timeline, #timeline-h ~ .empty").first().waitFor();

      // Gauges: the node's memory meter from the live state.
      const gauge = page.locator(`.obs-gauges [data-node-id="${node.nodeId}"]`);
      await expect(gauge.getByRole("meter", { name: "Memory" }).getAttribute("aria-valuetext")).resolves
        .toMatch(
          /\d.* \/ \d/,
        );
    } finally {
      await page.close();
    }
  }, 180_000);
});
