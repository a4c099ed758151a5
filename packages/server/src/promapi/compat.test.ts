/**
 * The compatibility table of docs/grafana.md ("Compatibility with Prometheus 3.5's HTTP API") against
 * the running API: each row's request is sent with each of its methods, its status must be the
 * row's HTTP column and its answer pass the row's check. A row without a check, or a check without
 * a row, fails (the table cannot drift from the code).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { type PromFixture, startPromFixture } from "../../testing/promapi-fixture.ts";

interface Row {
  readonly endpoint: string;
  readonly methods: string[];
  readonly parameter: string;
  readonly status: number;
}

/** The table's rows, read from docs/grafana.md. */
function tableRows(): Row[] {
  const doc = readFileSync(new URL("../../../../docs/grafana.md", import.meta.url), "utf8");
  const section = doc.split(/^## 4\. Compatibility with Prometheus 3\.5's HTTP API$/m)[1];
  assert.ok(section, "docs/grafana.md has the compatibility section");
  const rows: Row[] = [];
  for (const line of section.split("\n")) {
    const m = /^\| `([^`]+)` \| ([A-Z, ]+) \| (.+?) \| .+ \| (\d{3}) \|$/.exec(line);
    if (!m) continue;
    rows.push({
      endpoint: m[1],
      methods: m[2].split(",").map((s) => s.trim()),
      parameter: m[3].replace(/`/g, ""),
      status: Number(m[4]),
    });
  }
  return rows;
}

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: checked field by field
  readonly json: any;
}

interface Probe {
  readonly params?: Record<string, string | string[]>;
  readonly check?: (r: Reply) => void;
}

describe("docs/grafana.md compatibility table", () => {
  let f: PromFixture;
  before(async () => {
    f = await startPromFixture();
  });
  after(() => f?.close());

  async function call(method: string, path: string, params: Record<string, string | string[]>) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) q.append(k, x);
    const base = `${f.t.baseUrl}/v1/monitoring/projects/mine/prometheus/${path}`;
    const withBody = method === "POST" || method === "PUT" || method === "PATCH";
    const res = await fetch(withBody || q.size === 0 ? base : `${base}?${q}`, {
      method,
      headers: {
        authorization: `Bearer ${f.mine.key}`,
        ...(withBody ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      ...(withBody ? { body: q.toString() } : {}),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, json };
  }

  function probes(): Record<string, Probe> {
    const end = f.endMs / 1000;
    const start = end - 600;
    const range = { start: String(start), end: String(end), step: "60s" };
    const ok = (r: Reply) => assert.equal(r.json.status, "success");
    const series = (n: number) => (r: Reply) => assert.equal(r.json.data.result.length, n);
    const truncated = (r: Reply) => assert.deepEqual(r.json.warnings, ["results truncated due to limit"]);
    const stats = (samples: { totalQueryableSamples: number; peakSamples: number }) => (r: Reply) => {
      const st = r.json.data.stats;
      assert.deepEqual(Object.keys(st.timings), [
        "evalTotalTime",
        "resultSortTime",
        "queryPreparationTime",
        "innerEvalTime",
        "execQueueTime",
        "execTotalTime",
      ]);
      assert.ok(st.timings.execTotalTime >= st.timings.evalTotalTime);
      assert.deepEqual(st.samples, samples);
    };
    const list = (n: number) => (r: Reply) => assert.equal(r.json.data.length, n);
    const notFound = { check: (r: Reply) => assert.equal(r.json.errorType, "not_found") };
    const vcpus = "svc_vm_vcpus";
    return {
      "query GET,POST query": {
        params: { query: "1+1", time: "4" },
        check: (r) => assert.deepEqual(r.json.data.result, [4, "2"]),
      },
      "query GET,POST time": {
        params: { query: "time()", time: "1970-01-01T00:01:40Z" },
        check: (r) => assert.deepEqual(r.json.data.result, [100, "100"]),
      },
      "query GET,POST timeout": {
        params: { query: vcpus, time: String(end), timeout: "1m" },
        check: series(2),
      },
      "query GET,POST limit": {
        params: { query: vcpus, time: String(end), limit: "1" },
        check: (r) => {
          series(1)(r);
          truncated(r);
        },
      },
      "query GET,POST lookback_delta": {
        // 10 s after the newest sample: a 5 s lookback finds nothing, the default 5 minutes does.
        params: { query: vcpus, time: String(end + 10), lookback_delta: "5s" },
        check: series(0),
      },
      "query GET,POST stats": {
        params: { query: vcpus, time: String(end), stats: "all" },
        // Two series × the 10 samples of the 5-minute lookback; held: those and the 2 answered.
        check: stats({ totalQueryableSamples: 20, peakSamples: 22 }),
      },
      "query_range GET,POST query": { params: { query: vcpus, ...range }, check: series(2) },
      "query_range GET,POST start": {
        params: { query: vcpus, ...range },
        check: (r) => assert.equal(r.json.data.result[0].values[0][0], start),
      },
      "query_range GET,POST end": {
        params: { query: vcpus, ...range },
        check: (r) => assert.equal(r.json.data.result[0].values.at(-1)[0], end),
      },
      "query_range GET,POST step": {
        params: { query: vcpus, ...range },
        check: (r) => assert.equal(r.json.data.result[0].values.length, 11),
      },
      "query_range GET,POST timeout": { params: { query: vcpus, ...range, timeout: "2s" }, check: series(2) },
      "query_range GET,POST limit": {
        params: { query: vcpus, ...range, limit: "1" },
        check: (r) => {
          series(1)(r);
          truncated(r);
        },
      },
      "query_range GET,POST lookback_delta": {
        params: { query: vcpus, ...range, lookback_delta: "1ms" },
        check: (r) => assert.equal(r.json.data.result[0].values.length, 11, "the steps fall on samples"),
      },
      "query_range GET,POST stats": {
        params: { query: vcpus, ...range, stats: "1" },
        // Two series × 30 samples (10 minutes and the lookback before them); held: those and 2 × 11 steps.
        check: stats({ totalQueryableSamples: 60, peakSamples: 82 }),
      },
      "format_query GET,POST query": {
        params: { query: "sum by(a)(x)" },
        check: (r) => assert.equal(r.json.data, "sum by (a) (x)"),
      },
      "parse_query GET,POST query": {
        params: { query: "x" },
        check: (r) => assert.equal(r.json.data.type, "vectorSelector"),
      },
      "series GET,POST match[]": { params: { "match[]": vcpus }, check: list(2) },
      "series GET,POST start": { params: { "match[]": vcpus, start: String(end + 60) }, check: list(0) },
      "series GET,POST end": { params: { "match[]": vcpus, end: String(start - 3600) }, check: list(0) },
      "series GET,POST limit": {
        params: { "match[]": vcpus, limit: "1" },
        check: (r) => {
          list(1)(r);
          truncated(r);
        },
      },
      "series DELETE —": {
        params: { "match[]": vcpus },
        check: (r) => assert.equal(r.headers.get("allow"), "GET, POST, OPTIONS"),
      },
      "labels GET,POST match[]": {
        params: { "match[]": 'svc_vm_disk_read_bytes_total{device="vda"}' },
        check: (r) => assert.ok(r.json.data.includes("device")),
      },
      "labels GET,POST start": { params: { start: String(end + 60) }, check: list(0) },
      "labels GET,POST end": { params: { end: String(start - 3600) }, check: list(0) },
      "labels GET,POST limit": {
        params: { limit: "2" },
        check: (r) => {
          list(2)(r);
          truncated(r);
        },
      },
      "label/<name>/values GET match[]": {
        params: { "match[]": 'svc_vm_vcpus{vm_id="vm-1"}' },
        check: (r) => assert.deepEqual(r.json.data, ["vm-1"]),
      },
      "label/<name>/values GET start": { params: { start: String(end + 60) }, check: list(0) },
      "label/<name>/values GET end": { params: { end: String(start - 3600) }, check: list(0) },
      "label/<name>/values GET limit": {
        params: { limit: "1" },
        check: (r) => {
          list(1)(r);
          truncated(r);
        },
      },
      "label/<name>/values POST —": {
        check: (r) => assert.equal(r.headers.get("allow"), "GET, OPTIONS"),
      },
      "query_exemplars GET,POST query": { params: { query: vcpus }, check: list(0) },
      "query_exemplars GET,POST start": { params: { query: vcpus, start: String(start) }, check: list(0) },
      "query_exemplars GET,POST end": { params: { query: vcpus, end: String(end) }, check: list(0) },
      "metadata GET metric": {
        params: { metric: vcpus },
        check: (r) => assert.deepEqual(Object.keys(r.json.data), [vcpus]),
      },
      "metadata GET limit": {
        params: { limit: "1" },
        check: (r) => assert.equal(Object.keys(r.json.data).length, 1),
      },
      "metadata GET limit_per_metric": { params: { limit_per_metric: "1" }, check: ok },
      "rules GET type": { params: { type: "alert" }, check: (r) => assert.deepEqual(r.json.data.groups, []) },
      "rules GET rule_name[]": { params: { "rule_name[]": "x" }, check: ok },
      "rules GET rule_group[]": { params: { "rule_group[]": "svc" }, check: ok },
      "rules GET file[]": { params: { "file[]": "projects/mine/alertRules" }, check: ok },
      "rules GET exclude_alerts": { params: { exclude_alerts: "true" }, check: ok },
      "rules GET match[]": { params: { "match[]": '{severity="warning"}' }, check: ok },
      "rules GET group_limit": {
        params: { group_limit: "1" },
        check: (r) => assert.equal(r.json.data.groupNextToken, undefined),
      },
      "rules GET group_next_token": {
        params: { group_limit: "1", group_next_token: "not-a-token" },
        check: (r) => assert.equal(r.json.errorType, "bad_data"),
      },
      "alerts GET —": { check: (r) => assert.deepEqual(r.json.data, { alerts: [] }) },
      "status/buildinfo GET —": { check: (r) => assert.equal(r.json.data.version, "3.5.0") },
      "status/config GET —": notFound,
      "status/flags GET —": notFound,
      "status/runtimeinfo GET —": notFound,
      "status/tsdb GET limit": { params: { limit: "10" }, ...notFound },
      "status/tsdb/blocks GET —": notFound,
      "status/walreplay GET —": notFound,
      "targets GET state, scrapePool": { params: { state: "active" }, ...notFound },
      "targets/metadata GET match_target, metric, limit": notFound,
      "scrape_pools GET —": notFound,
      "alertmanagers GET —": notFound,
      "notifications GET —": notFound,
      "notifications/live GET —": notFound,
      "admin/tsdb/delete_series POST,PUT match[], start, end": { params: { "match[]": vcpus }, ...notFound },
      "admin/tsdb/clean_tombstones POST,PUT —": notFound,
      "admin/tsdb/snapshot POST,PUT skip_head": notFound,
      "write POST —": notFound,
      "read POST —": notFound,
      "otlp/v1/metrics POST —": notFound,
      "query OPTIONS —": { check: (r) => assert.equal(r.headers.get("allow"), "GET, POST, OPTIONS") },
      "query PUT,PATCH —": {
        params: { query: "1" },
        check: (r) => {
          assert.equal(r.json.errorType, "method_not_allowed");
          assert.equal(r.headers.get("allow"), "GET, POST, OPTIONS");
        },
      },
      "no/such/path GET,POST —": notFound,
      "../../-/healthy GET —": notFound,
    };
  }

  it("has a check for every row and a row for every check", () => {
    const rows = tableRows().map((r) => `${r.endpoint} ${r.methods.join(",")} ${r.parameter}`);
    assert.ok(rows.length > 60, `read ${rows.length} rows`);
    assert.deepEqual([...rows].sort(), Object.keys(probes()).sort());
  });

  it("answers each row's request as the row says, with each of its methods", async () => {
    const all = probes();
    for (const row of tableRows()) {
      const key = `${row.endpoint} ${row.methods.join(",")} ${row.parameter}`;
      const probe = all[key];
      assert.ok(probe, key);
      for (const method of row.methods) {
        const path = `api/v1/${row.endpoint.replace("<name>", "vm_id")}`;
        const r = await call(method, path, probe.params ?? {});
        assert.equal(r.status, row.status, `${method} ${key}: ${JSON.stringify(r.json)}`);
        if (method !== "OPTIONS") assert.ok(r.json, `${method} ${key}: a JSON body`);
        try {
          probe.check?.(r);
        } catch (err) {
          throw new Error(`${method} ${key}: ${(err as Error).message} — ${JSON.stringify(r.json)}`);
        }
      }
    }
  });
});
