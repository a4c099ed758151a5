/**
 * docs/operations.md followed with Debian's Prometheus: it scrapes svc with the operator token on the
 * main listener and without one on SVC_METRICS_LISTEN, a job without the token is refused, and the
 * mixin's rules load, evaluate without error and raise nothing on the healthy svc.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { testDialects } from "../../testing/dialects.ts";
import { engineSkipReason } from "../../testing/engines.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../../testing/harness.ts";
import { freePort } from "../net/free-port.ts";

const ALERTS = fileURLToPath(new URL("../../../../deploy/monitoring/alerts.yml", import.meta.url));
const skip = engineSkipReason("prometheus");

interface Target {
  labels: { job: string };
  health: string;
  lastError: string;
}

describe("Debian's Prometheus scrapes svc as docs/operations.md says", { skip }, () => {
  let t: TestApp;
  let prom: ChildProcess | undefined;
  let dir: string;
  let api: string;

  before(async () => {
    const [{ dialect }] = await testDialects();
    // Running as deployed (the evaluator and the dispatcher on their timers, the wall clock), so the
    // mixin sees a healthy svc, not one a test drives by hand.
    t = await startTestApp(
      dialect,
      {
        metricsListen: { host: "127.0.0.1", port: 0 },
        evaluatorAutoStart: true,
        notify: { dispatcherAutoStart: true, options: {} },
      },
      { wallClock: true },
    );
    dir = mkdtempSync(join(tmpdir(), "svc-prom-scrape-"));
    copyFileSync(ALERTS, join(dir, "svc-alerts.yml"));
    writeFileSync(join(dir, "svc-admin-token"), `${ADMIN_TOKEN}\n`, { mode: 0o600 });
    const main = new URL(t.baseUrl).host;
    writeFileSync(
      join(dir, "prometheus.yml"),
      [
        "global: { scrape_interval: 1s, evaluation_interval: 1s }",
        "rule_files: [svc-alerts.yml]",
        "scrape_configs:",
        "  - job_name: svc",
        "    authorization: { type: Bearer, credentials_file: svc-admin-token }",
        `    static_configs: [{ targets: ["${main}"] }]`,
        "  - job_name: svc-listener",
        `    static_configs: [{ targets: ["127.0.0.1:${t.app.metricsPort}"] }]`,
        "  - job_name: svc-anonymous",
        `    static_configs: [{ targets: ["${main}"] }]`,
        "",
      ].join("\n"),
    );
    const port = await freePort("127.0.0.1");
    api = `http://127.0.0.1:${port}/api/v1`;
    prom = spawn(
      "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: "ignore" },
    );
  });
  after(async () => {
    if (prom && prom.exitCode === null) {
      const exited = new Promise((r) => prom?.once("exit", r));
      prom.kill("SIGTERM");
      await exited;
    }
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Polls until `check` returns a value, or fails after 60 s. */
  async function until<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
    const t0 = Date.now();
    for (;;) {
      try {
        const v = await check();
        if (v !== undefined) return v;
      } catch {
        // not answering yet
      }
      if (Date.now() - t0 > 60_000) assert.fail(`${what}: not within 60 s`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  it("scrapes with the operator token and on the metrics listener, refuses the anonymous job, evaluates the rules, raises no alert", async () => {
    const targets = await until("three scraped targets", async () => {
      const body = (await (await fetch(`${api}/targets`)).json()) as { data: { activeTargets: Target[] } };
      const list = body.data.activeTargets;
      return list.length === 3 && list.every((x) => x.health !== "unknown") ? list : undefined;
    });
    const byJob = new Map(targets.map((x) => [x.labels.job, x]));
    assert.equal(byJob.get("svc")?.health, "up", byJob.get("svc")?.lastError);
    assert.equal(byJob.get("svc-listener")?.health, "up", byJob.get("svc-listener")?.lastError);
    assert.equal(byJob.get("svc-anonymous")?.health, "down");
    assert.match(byJob.get("svc-anonymous")?.lastError ?? "", /401/);
    // svc's own series arrive, from both authorized jobs.
    const jobs = await until("svc_db_schema_version from both jobs", async () => {
      const q = encodeURIComponent("count by (job) (svc_db_schema_version)");
      const body = (await (await fetch(`${api}/query?query=${q}`)).json()) as {
        data: { result: { metric: { job: string } }[] };
      };
      return body.data.result.length === 2 ? body.data.result.map((r) => r.metric.job).sort() : undefined;
    });
    assert.deepEqual(jobs, ["svc", "svc-listener"]);
    // Every rule of the mixin loaded and evaluated without an error.
    const rules = await until("the rules evaluated", async () => {
      const body = (await (await fetch(`${api}/rules`)).json()) as {
        data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
      };
      const list = body.data.groups.flatMap((g) => g.rules);
      return list.length > 0 && list.every((r) => r.health !== "unknown") ? list : undefined;
    });
    const mixin = parseYaml(readFileSync(ALERTS, "utf8")) as { groups: { rules: unknown[] }[] };
    assert.equal(rules.length, mixin.groups.flatMap((g) => g.rules).length);
    for (const r of rules) assert.equal(r.health, "ok", `${r.name}: ${r.lastError}`);

    // A healthy svc raises nothing: after a few more evaluations no alert is pending or firing. The two
    // disk alerts depend on this machine's filesystem, so they may only when it is that full.
    await new Promise((r) => setTimeout(r, 3000));
    const body = (await (await fetch(`${api}/alerts`)).json()) as {
      data: { alerts: { labels: { alertname: string }; state: string }[] };
    };
    const fs = statfsSync(t.app.config.dataDir);
    const free = fs.bavail / fs.blocks;
    const hostFull = (name: string) =>
      (name === "SvcDataDiskFull" && free < 0.05) || (name === "SvcDataDiskFillingUp" && free < 0.25);
    const active = body.data.alerts.filter((a) => !hostFull(a.labels.alertname));
    assert.deepEqual(
      active.map((a) => `${a.labels.alertname} ${a.state}`),
      [],
      "alerts pending or firing on a healthy svc",
    );
  });
});
