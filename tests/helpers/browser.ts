/**
 * Headless Chromium for end-to-end tests: Debian's `chromium` (installed by scripts/test-deps) driven by
 * playwright-core, with flags for a closed network and a fresh profile that `close()` removes.
 */
import { type BrowserContext, chromium, type Frame, type Page } from "playwright-core";
import { tempDir } from "./daemon.ts";

export const CHROMIUM = Deno.env.get("SKULK_CHROMIUM") ?? "/usr/bin/chromium";

export function chromiumInstalled(): boolean {
  try {
    return Deno.statSync(CHROMIUM).isFile;
  } catch {
    return false;
  }
}

export interface TestBrowser {
  context: BrowserContext;
  /** A new tab of the given size (desktop by default). */
  page(viewport?: { width: number; height: number }): Promise<Page>;
  close(): Promise<void>;
}

/** `args`: extra Chromium flags (e.g. a fake microphone for the voice tests). */
export async function launchBrowser(args: string[] = []): Promise<TestBrowser> {
  const profile = tempDir("skulk-chromium-");
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-quic",
      "--disable-sync",
      ...args,
    ],
  });
  return {
    context,
    page: async (viewport = { width: 1280, height: 860 }) => {
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      return page;
    },
    close: async () => {
      await context.close().catch(() => undefined);
      await Deno.remove(profile, { recursive: true }).catch(() => undefined);
    },
  };
}

/**
 * Waits until `expression` is truthy in the page and returns its value. Polls with Playwright's evaluate (the
 * DevTools protocol, which a page's CSP does not govern): `waitForFunction` compiles its predicate inside the
 * page, which the dashboard's Content-Security-Policy (no eval) refuses once the first check fails.
 */
export async function waitInPage<T = unknown>(
  page: Page | Frame,
  expression: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await page.evaluate<T>(expression);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${expression}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
