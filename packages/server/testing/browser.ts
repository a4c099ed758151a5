import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";

/**
 * Console tests drive Debian's Chromium through playwright-core. The console is built once per test
 * process (scripts/build-console.mjs, which skips an up-to-date build).
 */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const repoRoot = join(import.meta.dirname, "..", "..", "..");
export const CONSOLE_DIST = join(repoRoot, "packages", "console", "dist");

/** Why console tests cannot run here, or undefined. In CI a missing browser is a failure, not a skip. */
export function browserUnavailable(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  const why = `no Chromium at ${CHROMIUM} (apt-get install chromium)`;
  if (process.env.CI === "true") throw new Error(why);
  return why;
}

let built = false;
export function buildConsole(): void {
  if (built) return;
  const r = spawnSync(process.execPath, [join(repoRoot, "scripts", "build-console.mjs")], {
    cwd: repoRoot,
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`console build failed: ${r.stderr || r.stdout}`);
  built = true;
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    // The flags keep Chromium off the network this machine does not have.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** A page that records what should never happen: uncaught errors and CSP violations. */
export async function openPage(
  browser: Browser,
  viewport: { width: number; height: number } = { width: 1280, height: 860 },
): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: viewport.width, height: viewport.height } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    const text = m.text();
    if (m.type() !== "error") return;
    if (/Content Security Policy|Refused to/i.test(text)) problems.push(`CSP: ${text}`);
  });
  return { page, problems };
}

export async function signIn(page: Page, baseUrl: string, email: string, password: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "Console" }).waitFor();
}

/**
 * Polls a predicate in the page until it holds. page.waitForFunction would poll a string predicate with
 * eval inside the page, which the console's CSP (script-src 'self') refuses once the first check fails;
 * page.evaluate hands the expression to the DevTools protocol, which the CSP does not govern.
 */
export async function untilInPage(page: Page, expression: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (await page.evaluate(expression)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting in the page for ${expression}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
