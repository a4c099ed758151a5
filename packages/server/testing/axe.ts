import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";

/**
 * axe-core run inside a console page without loosening its CSP: `page.addScriptTag` would add an inline
 * script, which `script-src 'self'` refuses, so the source is evaluated through the DevTools protocol
 * (page.evaluate → Runtime.evaluate), which the page's CSP does not govern.
 */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** The rules the console is held to: WCAG 2.0 and 2.1, levels A and AA. */
const TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"];

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[]; summary: string }[];
}

/** Runs axe on the page (or inside `within`, a CSS selector) and answers every violation. */
export async function axeViolations(page: Page, within?: string): Promise<AxeViolation[]> {
  if (!(await page.evaluate("typeof window.axe === 'object'"))) await page.evaluate(AXE_SOURCE);
  return (await page.evaluate(
    `(async () => {
      const r = await window.axe.run(${within ? JSON.stringify(within) : "document"}, {
        runOnly: { type: "tag", values: ${JSON.stringify(TAGS)} },
        resultTypes: ["violations"],
      });
      return r.violations.map((v) => ({
        id: v.id,
        impact: v.impact,
        help: v.help,
        nodes: v.nodes.map((n) => ({ target: n.target.map(String), summary: n.failureSummary || "" })),
      }));
    })()`,
  )) as AxeViolation[];
}

/** Only the serious and critical ones, each as one readable line (what fails a test). */
export async function seriousViolations(page: Page, where: string, within?: string): Promise<string[]> {
  const all = await axeViolations(page, within);
  return all
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) =>
      v.nodes.map(
        (n) => `${where}: [${v.impact}] ${v.id} (${v.help}) at ${n.target.join(" ")}: ${n.summary}`,
      ),
    );
}
