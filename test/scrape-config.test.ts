import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { scrapeConfigYaml } from "../packages/console/src/scrape-config.ts";

/**
 * The suggested scrape configuration (60 s interval, 10 s timeout, honor_timestamps) is one text: the
 * block of docs/prometheus.md is exactly what the console's "Connect your tools" shows for the same
 * discovery URL (test/console/vm.test.ts holds the page to scrapeConfigYaml), and Prometheus' own
 * `promtool check config` accepts it.
 */
const root = resolve(fileURLToPath(import.meta.url), "../..");
const DOC_DISCOVERY = "https://svc.example.com/v1/monitoring/projects/my-project/scrape-targets";

const promtoolSkip = (() => {
  try {
    execFileSync("promtool", ["--version"], { stdio: "ignore" });
    return undefined;
  } catch {
    if (process.env.CI === "true")
      throw new Error("CI=true but promtool (Debian package prometheus) is missing");
    return "promtool is not installed (apt-get install prometheus); skipped";
  }
})();

function docsBlock(): string {
  const doc = readFileSync(join(root, "docs", "prometheus.md"), "utf8");
  const yaml = /## 2\. The scrape configuration[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(yaml, "docs/prometheus.md has the scrape configuration's yaml block");
  return yaml;
}

describe("the suggested scrape configuration", () => {
  it("docs/prometheus.md shows exactly what the console shows", () => {
    assert.equal(docsBlock(), scrapeConfigYaml(DOC_DISCOVERY));
  });

  it("is a 60 s interval, a 10 s timeout and honor_timestamps", () => {
    for (const text of [docsBlock(), scrapeConfigYaml(DOC_DISCOVERY)]) {
      const job = (parse(text) as { scrape_configs: Record<string, unknown>[] }).scrape_configs[0];
      assert.deepEqual(
        [job.job_name, job.scrape_interval, job.scrape_timeout, job.honor_timestamps],
        ["svc", "60s", "10s", true],
      );
    }
  });

  it("passes promtool check config", { skip: promtoolSkip }, () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-scrape-config-"));
    try {
      const token = join(dir, "svc-token");
      writeFileSync(token, "svcs_placeholder\n", { mode: 0o600 });
      const file = join(dir, "prometheus.yml");
      writeFileSync(file, scrapeConfigYaml(DOC_DISCOVERY).replaceAll("/etc/prometheus/svc-token", token));
      const r = spawnSync("promtool", ["check", "config", file], { encoding: "utf8" });
      assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
      assert.match(`${r.stdout}${r.stderr}`, /SUCCESS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
