import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import {
  otelCollectorYaml,
  prometheusAgentYaml,
  tokenFileCommand,
  vmagentFlags,
  vmagentScrapeYaml,
} from "../packages/console/src/guest-sender-configs.ts";

/**
 * The console's "Install expanded monitoring" shows, for each sender, exactly docs/agent.md's
 * configuration for the same base URL (test/node-exporter-senders.test.ts runs the docs' vmagent and
 * Prometheus blocks with the real tools in the Debian 12 root; test/console/vm.test.ts holds the dialog to these
 * functions).
 */
const root = resolve(fileURLToPath(import.meta.url), "../..");
const DOC_BASE = "https://svc.example.com";

/** The fenced blocks of docs/agent.md's "Use the agent you already run" section. */
function sectionBlocks(): string[] {
  const doc = readFileSync(join(root, "docs", "agent.md"), "utf8");
  const section = /\n## Use the agent you already run\n([\s\S]*?)\n## /.exec(doc)?.[1];
  assert.ok(section, 'docs/agent.md has "Use the agent you already run"');
  return [...section.matchAll(/```(?:yaml|sh)\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe("the configurations of the senders a customer already runs", () => {
  it("docs/agent.md shows exactly what the console shows", () => {
    assert.deepEqual(sectionBlocks().slice(0, 5), [
      tokenFileCommand("prometheus"),
      vmagentScrapeYaml(),
      vmagentFlags(DOC_BASE),
      prometheusAgentYaml(DOC_BASE),
      otelCollectorYaml(DOC_BASE),
    ]);
  });

  it("carry the token by file, never as a value on a command line", () => {
    for (const text of [vmagentFlags(DOC_BASE), prometheusAgentYaml(DOC_BASE), otelCollectorYaml(DOC_BASE)]) {
      assert.match(text, /\/etc\/svc-agent\/token/);
      assert.doesNotMatch(text, /svca_|Bearer /);
    }
    assert.match(tokenFileCommand("_victoria-metrics"), /read -rs SVC_AGENT_TOKEN/);
  });
});
