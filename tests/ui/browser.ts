/**
 * The system Chromium driven by playwright-core (shared/testing/README.md): launched once per test file with the
 * flags that keep it off the network. A missing Chromium fails the suite (it never passes silently).
 */
import { existsSync } from "node:fs";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = process.env.TAPWIRE_CHROMIUM ?? "/usr/bin/chromium";

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install it (apt-get install -y --no-install-recommends chromium) or set TAPWIRE_CHROMIUM`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
}

/** A fresh context (own sessionStorage) with the page open on the UI of the service at `apiPort`. */
export async function openUi(browser: Browser, apiPort: number, token: string | null, opts: { colorScheme?: "light" | "dark"; viewport?: { width: number; height: number } } = {}): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ colorScheme: opts.colorScheme ?? "light", viewport: opts.viewport ?? { width: 1400, height: 860 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  await page.goto(`http://127.0.0.1:${apiPort}/ui/${token === null ? "" : `#token=${encodeURIComponent(token)}`}`);
  return { context, page, errors };
}
