/**
 * Headless Chromium for end-to-end tests: Debian's `chromium` (installed by scripts/test-deps) driven by
 * playwright-core, with flags for a closed network and a fresh profile that `close()` removes.
 */
import { type BrowserContext, chromium, type Page } from "playwright-core";
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
