/**
 * svc's own metrics as an operator meets them: who may read /metrics (the operator token on the main
 * listener, anyone on SVC_METRICS_LISTEN), `promtool check metrics` on real scrapes, and the
 * monitoring mixin (deploy/monitoring): its rules pass `promtool check rules` and `promtool test
 * rules`, and every metric its dashboard and rules name exists on a scrape of a running svc after
 * each subsystem has worked, so the mixin cannot drift from the code.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { pushRemoteWrite } from "@svc/remotewrite";
import { parse as parseYaml } from "yaml";
import { testDialects } from "../../testing/dialects.ts";
import { engineSkipReason, startEngine } from "../../testing/engines.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../../testing/harness.ts";
import { makeCertificate, startHttpsPeer } from "../../testing/https-peer.ts";
import { loadProject } from "../../testing/promapi-fixture.ts";
import { promtool, promtoolSkip } from "../../testing/promtool.ts";
import { rwSeries } from "../../testing/remote-write.ts";
import { parse } from "../promql/index.ts";

const S = 1000;
const dialects = await testDialects();
const MIXIN = fileURLToPath(new URL("../../../../deploy/monitoring/", import.meta.url));

async function scrape(url: string, token?: string): Promise<Response> {
  return fetch(url, token ? { headers: { Authorization: `Bearer ${token}` } } : {});
}

/** Metric names with at least one sample in an exposition. */
function sampled(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (m) names.add(m[1]);
  }
  return names;
}

/** Every metric name an expression selects (dashboard variables replaced by something parseable). */
function namesIn(expr: string): string[] {
  const parsed = parse(expr.replaceAll("$__rate_interval", "5m").replaceAll("$instance", ".*"));
  const out: string[] = [];
  const walk = (n: unknown): void => {
    if (!n || typeof n !== "object") return;
    const node = n as { kind?: string; name?: string };
    if (node.kind === "VectorSelector" && node.name) out.push(node.name);
    for (const v of Object.values(n)) walk(v);
  };
  walk(parsed);
  return out;
}

/** Names the dashboard and the alerting rules use. */
function mixinNames(): Set<string> {
  const names = new Set<string>();
  const dashboard = JSON.parse(readFileSync(join(MIXIN, "dashboard.json"), "utf8")) as {
    panels: { targets?: { expr: string }[] }[];
  };
  for (const p of dashboard.panels)
    for (const t of p.targets ?? []) for (const n of namesIn(t.expr)) names.add(n);
  const rules = parseYaml(readFileSync(join(MIXIN, "alerts.yml"), "utf8")) as {
    groups: { rules: { expr: string; record?: string }[] }[];
  };
  for (const g of rules.groups) for (const r of g.rules) for (const n of namesIn(r.expr)) names.add(n);
  // What the recording rules make (the SLOs' error ratios) is Prometheus', not a scrape's.
  for (const g of rules.groups) for (const r of g.rules) if (r.record) names.delete(r.record);
  return names;
}

describe("/metrics access", () => {
  let t: TestApp;
  before(async () => {
    const [{ dialect }] = await testDialects();
    t = await startTestApp(dialect, { metricsListen: { host: "127.0.0.1", port: 0 } });
  });
  after(async () => {
    await t?.close();
  });

  it("refuses anonymous callers and tenant credentials on the main listener; the operator token reads it", async () => {
    const anonymous = await scrape(`${t.baseUrl}/metrics`);
    assert.equal(anonymous.status, 401);
    assert.match(anonymous.headers.get("www-authenticate") ?? "", /^Bearer/);
    const p = await t.seedProject("metrics-access", ["vm-1"]);
    const key =
      (
        await t.clients(p.owner.session).keys.createKey({
          parent: p.projectName,
          displayName: "scraper",
          capabilities: ["monitoring.read"],
          requestId: randomUUID(),
        })
      ).secret ?? "";
    const tenantKey = await scrape(`${t.baseUrl}/metrics`, key);
    assert.equal(tenantKey.status, 403);
    assert.ok(!(await tenantKey.text()).includes(key));
    assert.equal((await scrape(`${t.baseUrl}/metrics`, p.owner.session)).status, 403);
    const unknown = "svcs_NOTAREALKEYNOTAREALKEYNOTAREALKE123456";
    const refused = await scrape(`${t.baseUrl}/metrics`, unknown);
    assert.equal(refused.status, 401);
    assert.ok(!(await refused.text()).includes(unknown));
    const operator = await scrape(`${t.baseUrl}/metrics`, ADMIN_TOKEN);
    assert.equal(operator.status, 200);
    const body = await operator.text();
    assert.match(body, /^svc_auth_failures_total\{surface="metrics",reason="unauthenticated"\} [1-9]/m);
    assert.match(body, /^svc_auth_failures_total\{surface="metrics",reason="permission_denied"\} [1-9]/m);
  });

  it("serves it without auth on SVC_METRICS_LISTEN, and nothing else there", async () => {
    const port = t.app.metricsPort;
    assert.ok(port && port !== Number(new URL(t.baseUrl).port));
    const res = await scrape(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    assert.match(await res.text(), /^svc_ingest_requests_total|^# HELP svc_tsdb_head_series /m);
    assert.equal((await scrape(`http://127.0.0.1:${port}/v1/ingest/prometheus/api/v1/write`)).status, 404);
    assert.equal((await scrape(`http://127.0.0.1:${port}/healthz`)).status, 404);
    // The main listener still wants the operator token.
    assert.equal((await scrape(`${t.baseUrl}/metrics`)).status, 401);
  });
});

/** Drives every subsystem of an app once, then returns a scrape of /metrics. */
async function exercise(t: TestApp, webhookUrl: string | undefined): Promise<string> {
  const endMs = Math.floor(t.clock.now() / (30 * S)) * 30 * S;
  t.clock.ms = endMs;
  const p = await t.seedProject("metrics-drift", ["vm-1", "vm-2"]);
  await loadProject(t, p.vms, endMs, 1);
  // A refusal: a VM the inventory does not know.
  const refused = await pushRemoteWrite(
    `${t.baseUrl}/v1/ingest/prometheus/api/v1/write`,
    t.app.config.collectorToken,
    {
      timeseries: [
        rwSeries("svc_vm_vcpus", { vm: "projects/metrics-drift/locations/dc-1/vms/nope" }, [[endMs, 2]]),
      ],
      metadata: [],
    },
  );
  assert.equal(refused.status, 400);
  const owner = t.clients(p.owner.session);
  const key = (
    await owner.keys.createKey({
      parent: p.projectName,
      displayName: "grafana",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    })
  ).secret;
  const api = `${t.baseUrl}/v1/monitoring/projects/metrics-drift/prometheus/api/v1`;
  const auth = { Authorization: `Bearer ${key}` };
  const sec = endMs / 1000;
  assert.equal(
    (await fetch(`${api}/query?query=sum(svc_vm_vcpus)&time=${sec}`, { headers: auth })).status,
    200,
  );
  const range = `${api}/query_range?query=rate(svc_vm_cpu_seconds_total[5m])&start=${sec - 600}&end=${sec}&step=60`;
  assert.equal((await fetch(range, { headers: auth })).status, 200);
  assert.equal((await fetch(`${api}/query?query=sum(`, { headers: auth })).status, 400);
  await t.clients(key).monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 10 });
  // An alert rule and one evaluation cycle (the tick takes the lease first).
  await owner.alerts.saveAlertRule({
    projectName: p.projectName,
    id: randomUUID(),
    requestId: randomUUID(),
    expectedVersion: "0",
    spec: {
      displayName: "CPU high",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 90,
      sustainedSeconds: 0,
      severity: "WARNING",
      allVms: true,
    },
  });
  // The save nudged the evaluator, whose first take of the lease may race this one's: one tick loses.
  assert.ok((await t.app.evaluator.tick()) ?? (await t.app.evaluator.tick()));
  // A notification: a test send to a webhook, attempted by the dispatcher.
  if (webhookUrl) {
    const d = await owner.destinations.createDestination({
      projectName: p.projectName,
      displayName: "ops webhook",
      kind: "WEBHOOK",
      url: webhookUrl,
      requestId: randomUUID(),
    });
    await owner.destinations.sendTestNotification({ name: d.destination?.name ?? "" });
    // Queuing nudges the dispatcher; runOnce waits for a pass under way and attempts what is left.
    await t.app.dispatcher.runOnce(t.clock.ms);
    await t.app.dispatcher.runOnce(t.clock.ms);
  }
  if (t.app.config.metricsBackend === "embedded") await t.app.tsdb.compact();
  // A backup, where svc takes them itself (the embedded defaults: SQLite and the embedded store).
  if (t.app.config.metricsBackend === "embedded" && !t.app.config.databaseUrl) {
    const dir = mkdtempSync(join(tmpdir(), "svc-metrics-backup-"));
    try {
      await t.admin.operations.backup({ directory: join(dir, "b") });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const res = await scrape(`${t.baseUrl}/metrics`, ADMIN_TOKEN);
  assert.equal(res.status, 200);
  return res.text();
}

describe("self-metrics on a running svc and the monitoring mixin", () => {
  const tls = makeCertificate();
  /** Names sampled per configuration, and what each configuration stands for. */
  const seen = new Map<string, Set<string>>();

  for (const { dialect, skip } of dialects) {
    it(`every subsystem reports, and promtool check metrics is clean (embedded, ${dialect.name})`, {
      skip,
    }, async () => {
      const peer = await startHttpsPeer(tls);
      peer.respond = () => ({ status: 204 });
      const t = await startTestApp(dialect, {
        queryWorkers: 1,
        notify: { dispatcherAutoStart: false, ca: tls.cert, options: { allowHosts: ["127.0.0.1"] } },
      });
      try {
        const text = await exercise(t, `${peer.url}/hooks/svc`);
        if (!promtoolSkip) {
          const lint = promtool(["check", "metrics"], text);
          assert.equal(lint.status, 0, lint.out);
          assert.equal(lint.out.trim(), "", lint.out);
        }
        seen.set(`embedded-${dialect.name}`, sampled(text));
        // The families every configuration has, sampled after one pass of each subsystem.
        const names = sampled(text);
        for (const n of [
          "svc_ingest_samples_accepted_total",
          "svc_ingest_samples_refused_total",
          "svc_tsdb_head_series",
          "svc_tsdb_wal_fsync_duration_seconds_bucket",
          "svc_promql_queries_total",
          "svc_query_slot_wait_seconds_bucket",
          "svc_alerts_cycle_duration_seconds_bucket",
          "svc_notify_attempt_duration_seconds_bucket",
          "svc_db_statement_duration_seconds_bucket",
        ])
          assert.ok(names.has(n), `${n} has no sample`);
        assert.match(text, /^svc_ingest_samples_refused_total\{reason="unknown_vm"\} 1$/m);
        assert.match(text, /^svc_promql_queries_total\{api="query",outcome="ok"\} 1$/m);
        assert.match(text, /^svc_promql_queries_total\{api="query",outcome="bad_request"\} 1$/m);
        assert.match(text, /^svc_alerts_lease_held 1$/m);
        assert.match(text, /^svc_notify_deliveries_total\{kind="webhook",outcome="sent"\} 1$/m);
        assert.match(text, /^svc_tsdb_oldest_sample_timestamp_seconds \d+/m);
      } finally {
        await t.close();
        await peer.close();
      }
    });
  }

  const vmSkip = engineSkipReason("victoria-metrics");
  it("the remote backend reports, and promtool check metrics is clean (remote, VictoriaMetrics)", {
    skip: vmSkip,
  }, async () => {
    const engine = await startEngine("victoria-metrics");
    const [{ dialect }] = await testDialects();
    const t = await startTestApp(dialect, {
      queryWorkers: 1,
      metricsBackend: "remote",
      remoteMetrics: { remoteWriteUrl: engine.remoteWriteUrl, queryUrl: engine.queryUrl, headers: {} },
    });
    try {
      const text = await exercise(t, undefined);
      if (!promtoolSkip) {
        const lint = promtool(["check", "metrics"], text);
        assert.equal(lint.status, 0, lint.out);
        assert.equal(lint.out.trim(), "", lint.out);
      }
      assert.match(text, /^svc_remote_write_samples_total [1-9]/m);
      assert.match(text, /^svc_remote_read_duration_seconds_count [1-9]/m);
      seen.set("remote", sampled(text));
    } finally {
      await t.close();
      await engine.stop();
    }
  });

  it("promtool check rules and promtool test rules pass on deploy/monitoring", { skip: promtoolSkip }, () => {
    const check = promtool(["check", "rules", join(MIXIN, "alerts.yml")]);
    assert.equal(check.status, 0, check.out);
    // The alerts whose windows span days are tested at a coarser evaluation interval, in a file of their own.
    const testFiles = ["alerts.test.yml", "alerts-long.test.yml"];
    for (const f of testFiles) {
      const test = promtool(["test", "rules", join(MIXIN, f)]);
      assert.equal(test.status, 0, `${f}: ${test.out}`);
    }
    // Every alert is tested both ways (a case where it fires, and one where it stays quiet), and has its
    // runbook section in docs/operations.md.
    const rules = readFileSync(join(MIXIN, "alerts.yml"), "utf8");
    const tests = testFiles.map((f) => readFileSync(join(MIXIN, f), "utf8")).join("\n");
    const runbook = readFileSync(join(MIXIN, "../../docs/operations.md"), "utf8");
    const alerts = [...rules.matchAll(/- alert: (\w+)/g)].map((m) => m[1]);
    assert.ok(alerts.length >= 12);
    for (const a of alerts) {
      assert.match(
        tests,
        new RegExp(`alertname: ${a}\\n\\s+exp_alerts:`),
        `${a} never fires in ${testFiles.join(" or ")}`,
      );
      assert.match(
        tests,
        new RegExp(`alertname: ${a}\\n(?!\\s+exp_alerts:)`),
        `${a} has no case where it stays quiet in ${testFiles.join(" or ")}`,
      );
      assert.match(runbook, new RegExp(`^### ${a}$`, "m"), `${a} has no runbook section`);
      assert.match(rules, new RegExp(`operations\\.md#${a.toLowerCase()}\\n`), `${a}'s runbook_url`);
    }
  });

  it("every metric the dashboard and the rules name exists on a scrape", () => {
    const union = new Set<string>();
    for (const s of seen.values()) for (const n of s) union.add(n);
    // Prometheus makes `up` itself; the pool families exist on PostgreSQL only, the remote ones
    // with the remote backend: a run without that peer cannot see them.
    const pgRan = [...seen.keys()].some((k) => k.includes("postgres"));
    const missing = [...mixinNames()].filter(
      (n) =>
        n !== "up" &&
        !union.has(n) &&
        !(!pgRan && n.startsWith("svc_db_pool_")) &&
        !(!seen.has("remote") && n.startsWith("svc_remote_")),
    );
    assert.ok(seen.size > 0, "no scrape ran");
    assert.deepEqual(missing, []);
  });
});
