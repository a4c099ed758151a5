/**
 * Tenant-escape corpus: every attempt runs over HTTP with "mine"'s read key while "other" holds
 * series under the same metric names (values ×1000, a VM id "mine" lacks, and a metric "mine" never
 * sent). None may show another project's data, or the tenant label itself.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pushRemoteWrite } from "@svc/remotewrite";
import { type PromFixture, type Reply, startPromFixture } from "../../testing/promapi-fixture.ts";

describe("tenant escape attempts", () => {
  let f: PromFixture;
  before(async () => {
    f = await startPromFixture();
    // A metric only "other" has: any sign of it in "mine"'s answers is a leak.
    const res = await pushRemoteWrite(
      `${f.t.baseUrl}/v1/ingest/prometheus/api/v1/write`,
      f.t.app.config.collectorToken,
      {
        timeseries: [
          {
            labels: [
              { name: "__name__", value: "svc_vm_network_receive_bytes_total" },
              { name: "vm", value: f.other.vms[0] },
              { name: "interface", value: "eth0" },
            ],
            samples: [{ timestampMs: f.endMs, value: 7 }],
          },
        ],
        metadata: [],
      },
    );
    assert.equal(res.status, 204, res.body);
  });
  after(() => f?.close());

  const sec = () => String(f.endMs / 1000);
  function clean(r: Reply, what: string): void {
    assert.equal(r.status, 200, `${what}: ${r.text.slice(0, 300)}`);
    for (const leak of ["projects/other", "vm-9", "project_id", "svc_vm_network_receive", '"other"'])
      assert.ok(!r.text.includes(leak), `${what} leaked ${leak}: ${r.text.slice(0, 300)}`);
  }
  async function instant(query: string): Promise<Reply> {
    const r = await f.post("mine", "api/v1/query", { query, time: sec() });
    clean(r, query);
    const range = await f.post("mine", "api/v1/query_range", {
      query,
      start: String(f.endMs / 1000 - 600),
      end: sec(),
      step: "60",
    });
    if (range.status === 200) clean(range, `range ${query}`);
    return r;
  }
  const values = (r: Reply): number[] =>
    r.json.data.resultType === "scalar"
      ? [Number(r.json.data.result[1])]
      : r.json.data.result.map((s: { value: [number, string] }) => Number(s.value[1]));

  // [attempt, the only acceptable values (sorted), or null for "empty"]
  const attempts: [string, number[] | null][] = [
    ['{__name__=~".+", project_id!="mine"}', null],
    ['{project_id="other"}', null],
    ['{project_id=~"other|mine", __name__="svc_vm_memory_total_bytes"}', [4096, 4096]],
    ['{project_id=~".+", __name__="svc_vm_memory_total_bytes"}', [4096, 4096]],
    ['{__name__=~".+", project_id!~"mine"}', null],
    ['{__name__=~".+", project_id=""}', null],
    ['sum({__name__=~".+", __name__=~"svc_vm_memory_total_bytes"})', [8192]],
    ['count({__name__=~".+"})', null], // checked against the label API below
    ['sum(max_over_time(svc_vm_memory_total_bytes{project_id="other"}[1h:1m]))', null],
    ["sum(max_over_time(svc_vm_memory_total_bytes[1h:1m]))", [8192]],
    ["sum(max_over_time((svc_vm_memory_total_bytes offset 5m)[30m:1m] @ end()))", [8192]],
    ['sum(svc_vm_memory_total_bytes{project_id="other"} @ end())', null],
    ["sum(svc_vm_memory_total_bytes @ start())", [8192]],
    ["sum(svc_vm_memory_total_bytes offset 10m)", [8192]],
    ['sum(label_replace(svc_vm_memory_total_bytes, "project_id", "other", "", ""))', [8192]],
    ['label_replace(svc_vm_vcpus, "project_id", "other", "", "")', [2, 2]],
    ['sum by (project_id) (label_replace(svc_vm_memory_total_bytes, "project_id", "other", "", ""))', [8192]],
    ['sum(svc_vm_memory_total_bytes or {project_id="other"})', [8192]],
    [
      'sum(svc_vm_memory_total_bytes or on() {project_id="other", __name__="svc_vm_memory_total_bytes"})',
      [8192],
    ],
    ['{__name__="svc_vm_memory_total_bytes", project_id="other"} unless svc_vm_vcpus', null],
    ['svc_vm_vcpus unless on(project_id) {project_id="other"}', [2, 2]],
    ['absent({project_id="other", __name__="svc_vm_vcpus"})', [1]],
    ['count_values("project_id", svc_vm_vcpus)', [2]],
    ['sum(svc_vm_vcpus * on(project_id) group_left group(svc_vm_vcpus{project_id="other"}))', null],
    ['sum(rate(svc_vm_cpu_seconds_total{project_id=~"o.*"}[5m]))', null],
    ["max(svc_vm_memory_total_bytes)", [4096]],
    ["topk(1, svc_vm_memory_total_bytes)", [4096]],
  ];

  for (const [query, want] of attempts) {
    it(`query ${query}`, async () => {
      const r = await instant(query);
      const got = values(r).sort((a, b) => a - b);
      if (query.startsWith("count({__name__")) {
        const series = await f.get("mine", "api/v1/series", { "match[]": '{__name__=~".+"}' });
        assert.deepEqual(got, [series.json.data.length]);
      } else if (want === null) assert.deepEqual(got, [], query);
      else assert.deepEqual(got, want, query);
    });
  }

  it("a selector that matches everything, the tenant included, is refused as Prometheus does", async () => {
    for (const query of ['{project_id!="mine"}', '{project_id!~"mine"}', '{project_id=""}']) {
      const r = await f.post("mine", "api/v1/query", { query, time: sec() });
      assert.equal(r.status, 400, query);
      assert.match(r.json.error, /at least one non-empty matcher/);
    }
  });

  it("an engine error quoting label sets does not show the tenant label", async () => {
    const r = await f.post("mine", "api/v1/query", {
      query: "svc_vm_vcpus * on(project_id) svc_vm_vcpus",
      time: sec(),
    });
    assert.equal(r.status, 422);
    assert.ok(!r.text.includes("project_id="), r.text);
  });

  it("series and label APIs with foreign matchers", async () => {
    const cases: [string, Record<string, string | string[]>][] = [
      ["api/v1/series", { "match[]": '{project_id="other"}' }],
      ["api/v1/series", { "match[]": ['{project_id=~".+"}', '{__name__=~".+"}'] }],
      ["api/v1/series", { "match[]": '{vm=~"projects/other/.*"}' }],
      ["api/v1/labels", { "match[]": '{project_id="other"}' }],
      ["api/v1/labels", {}],
      ["api/v1/label/project_id/values", {}],
      ["api/v1/label/vm/values", { "match[]": '{project_id="other"}' }],
      ["api/v1/label/vm/values", {}],
      ["api/v1/label/vm_id/values", {}],
      ["api/v1/label/__name__/values", { "match[]": '{__name__=~".+", project_id!="mine"}' }],
      ["api/v1/label/__name__/values", {}],
      ["api/v1/metadata", {}],
      ["api/v1/metadata", { metric: "svc_vm_network_receive_bytes_total" }],
    ];
    for (const [path, params] of cases) {
      clean(await f.get("mine", path, params), `GET ${path} ${JSON.stringify(params)}`);
      // Label values and metadata are GET-only, as in Prometheus.
      if (path === "api/v1/series" || path === "api/v1/labels")
        clean(await f.post("mine", path, params), `POST ${path} ${JSON.stringify(params)}`);
    }
    const empty = await f.get("mine", "api/v1/series", { "match[]": '{project_id="other"}' });
    assert.deepEqual(empty.json.data, []);
    const pid = await f.get("mine", "api/v1/label/project_id/values");
    assert.deepEqual(pid.json.data, []);
  });

  it("the other project still sees its own data (the tests above are not vacuous)", async () => {
    const r = await f.post("other", "api/v1/query", { query: "sum(svc_vm_memory_total_bytes)", time: sec() });
    assert.deepEqual(values(r), [8_192_000]);
    const names = await f.get("other", "api/v1/label/__name__/values");
    assert.ok(names.json.data.includes("svc_vm_network_receive_bytes_total"));
  });
});
