import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type PromFixture, S, startPromFixture } from "../../testing/promapi-fixture.ts";

describe("Prometheus API over HTTP", () => {
  let f: PromFixture;
  before(async () => {
    f = await startPromFixture();
  });
  after(() => f?.close());
  const sec = (ms: number) => String(ms / 1000);

  it("answers an instant query with Prometheus' vector JSON, values as strings", async () => {
    const r = await f.get("mine", "api/v1/query", {
      query: 'svc_vm_vcpus{vm_id="vm-1"}',
      time: sec(f.endMs),
    });
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(
      r.text,
      `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"svc_vm_vcpus","location":"dc-1","source":"hypervisor","vm":"projects/mine/locations/dc-1/vms/vm-1","vm_id":"vm-1"},"value":[${sec(f.endMs)},"2"]}]}}`,
    );
  });

  it("accepts the same query as a form POST and RFC 3339 times", async () => {
    const r = await f.post("mine", "api/v1/query", {
      query: "sum(rate(svc_vm_cpu_seconds_total[5m]))",
      time: new Date(f.endMs).toISOString(),
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.data.resultType, "vector");
    // vm-1 grows 15 s per 30 s, vm-2 30 s per 30 s: 0.5 + 1.
    assert.equal(r.json.data.result[0].value[1], "1.5");
  });

  it("answers scalars, strings, NaN and infinities as Prometheus prints them", async () => {
    const cases: [string, string][] = [
      ["1+1", '{"resultType":"scalar","result":[4,"2"]}'],
      ['"a<b"', '{"resultType":"string","result":[4,"a\\u003cb"]}'],
      ["0/0", '{"resultType":"scalar","result":[4,"NaN"]}'],
      ["1/0", '{"resultType":"scalar","result":[4,"+Inf"]}'],
      ["-1/0", '{"resultType":"scalar","result":[4,"-Inf"]}'],
      ["1e-7", '{"resultType":"scalar","result":[4,"1e-07"]}'],
      ["2^60", '{"resultType":"scalar","result":[4,"1152921504606847000"]}'],
      ["2^70", '{"resultType":"scalar","result":[4,"1.1805916207174113e+21"]}'],
      ["1e21", '{"resultType":"scalar","result":[4,"1e+21"]}'],
    ];
    for (const [query, data] of cases) {
      const r = await f.post("mine", "api/v1/query", { query, time: "4" });
      assert.equal(r.text, `{"status":"success","data":${data}}`, query);
    }
    const frac = await f.get("mine", "api/v1/query", { query: "time()", time: "1.5" });
    assert.equal(frac.text, '{"status":"success","data":{"resultType":"scalar","result":[1.500,"1.5"]}}');
  });

  it("answers a range query with a matrix on the step grid", async () => {
    const r = await f.post("mine", "api/v1/query_range", {
      query: 'svc_vm_memory_free_bytes{vm_id="vm-2"}',
      start: sec(f.endMs - 120 * S),
      end: sec(f.endMs),
      step: "1m",
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.data.resultType, "matrix");
    const [s] = r.json.data.result;
    assert.deepEqual(s.values, [
      [(f.endMs - 120 * S) / 1000, "1080"],
      [(f.endMs - 60 * S) / 1000, "1082"],
      [f.endMs / 1000, "1084"],
    ]);
    assert.equal(s.metric.project_id, undefined);
  });

  it("carries warnings beside the result", async () => {
    const r = await f.get("mine", "api/v1/query", {
      query: "rate(svc_vm_memory_free_bytes[5m])",
      time: sec(f.endMs),
    });
    assert.equal(r.status, 200);
    assert.ok(Array.isArray(r.json.infos) && r.json.infos.length > 0, r.text);
  });

  it("lists series, labels and label values of the project only", async () => {
    const s = await f.get("mine", "api/v1/series", {
      "match[]": ["svc_vm_vcpus", '{__name__="svc_vm_vcpus"}'],
    });
    assert.equal(s.status, 200, s.text);
    assert.deepEqual(
      s.json.data.map((l: Record<string, string>) => l.vm_id),
      ["vm-1", "vm-2"],
    );
    const names = await f.post("mine", "api/v1/labels", {});
    assert.deepEqual(names.json.data, ["__name__", "device", "location", "source", "vm", "vm_id"]);
    const values = await f.get("mine", "api/v1/label/vm_id/values");
    assert.deepEqual(values.json.data, ["vm-1", "vm-2"]);
    const limited = await f.get("mine", "api/v1/label/__name__/values", { limit: "2" });
    assert.equal(limited.json.data.length, 2);
    assert.deepEqual(limited.json.warnings, ["results truncated due to limit"]);
  });

  it("describes only this project's catalog metrics", async () => {
    const r = await f.get("mine", "api/v1/metadata");
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.data.svc_vm_cpu_seconds_total, [
      { type: "counter", help: "CPU seconds consumed by all vCPUs of the VM.", unit: "seconds" },
    ]);
    assert.equal(r.json.data.svc_vm_memory_buffers_bytes, undefined, "never sent, so not listed");
    const one = await f.get("mine", "api/v1/metadata", { metric: "svc_vm_vcpus" });
    assert.deepEqual(Object.keys(one.json.data), ["svc_vm_vcpus"]);
  });

  it("formats and parses expressions", async () => {
    const fmt = await f.post("mine", "api/v1/format_query", { query: "sum by(a)(rate(x[5m]))" });
    assert.equal(fmt.text, '{"status":"success","data":"sum by (a) (rate(x[5m]))"}');
    const ast = await f.get("mine", "api/v1/parse_query", { query: "rate(up[5m] offset 1m)" });
    assert.deepEqual(ast.json.data, {
      type: "call",
      func: { name: "rate", argTypes: ["matrix"], variadic: 0, returnType: "vector" },
      args: [
        {
          type: "matrixSelector",
          name: "up",
          range: 300000,
          offset: 60000,
          matchers: [{ name: "__name__", value: "up", type: "=" }],
          timestamp: null,
          startOrEnd: null,
        },
      ],
    });
  });

  it("serves buildinfo, rules, alerts and exemplars as empty successes", async () => {
    const b = await f.get("mine", "api/v1/status/buildinfo");
    assert.equal(b.json.status, "success");
    assert.match(b.json.data.version, /^\d+\.\d+\.\d+/);
    assert.equal(b.json.data.features, undefined);
    assert.deepEqual((await f.get("mine", "api/v1/rules")).json, { status: "success", data: { groups: [] } });
    assert.deepEqual((await f.get("mine", "api/v1/alerts")).json, {
      status: "success",
      data: { alerts: [] },
    });
    const ex = await f.post("mine", "api/v1/query_exemplars", {
      query: "svc_vm_vcpus",
      start: "1",
      end: "2",
    });
    assert.deepEqual(ex.json, { status: "success", data: [] });
  });

  it("answers 404 in the error envelope for everything not served", async () => {
    const paths: [string, "GET" | "POST"][] = [
      ["api/v1/write", "POST"],
      ["api/v1/read", "POST"],
      ["api/v1/admin/tsdb/snapshot", "POST"],
      ["api/v1/admin/tsdb/delete_series", "POST"],
      ["api/v1/status/config", "GET"],
      ["api/v1/status/flags", "GET"],
      ["api/v1/status/runtimeinfo", "GET"],
      ["api/v1/status/tsdb", "GET"],
      ["api/v1/targets", "GET"],
      ["api/v1/targets/metadata", "GET"],
      ["api/v1/alertmanagers", "GET"],
      ["api/v1/otlp/v1/metrics", "POST"],
      ["api/v1/notifications", "GET"],
      ["-/reload", "POST"],
      ["", "GET"],
    ];
    for (const [path, method] of paths) {
      const r = method === "GET" ? await f.get("mine", path) : await f.post("mine", path);
      assert.equal(r.status, 404, path);
      assert.deepEqual(Object.keys(r.json), ["status", "errorType", "error"], path);
      assert.equal(r.json.errorType, "not_found");
    }
  });

  it("refuses missing, foreign and operator credentials without echoing them", async () => {
    const none = await f.get("mine", "api/v1/query", { query: "1" }, "");
    assert.equal(none.status, 401);
    assert.equal(none.json.errorType, "unauthorized");
    const bogus = "svcs_not-a-real-key-000000000000";
    const bad = await f.get("mine", "api/v1/query", { query: "1" }, bogus);
    assert.equal(bad.status, 401);
    assert.ok(!bad.text.includes(bogus));
    const foreign = await f.get("mine", "api/v1/query", { query: "1" }, f.other.key);
    assert.equal(foreign.status, 403);
    assert.equal(foreign.json.errorType, "forbidden");
    assert.ok(!foreign.text.includes(f.other.key));
    const op = await f.get("mine", "api/v1/labels", {}, f.t.app.config.adminToken);
    assert.equal(op.status, 403);
    const session = await f.get("mine", "api/v1/query", { query: "1" }, f.mine.owner.session);
    assert.equal(session.status, 200, "a member's console session reads too");
  });

  it("maps bad parameters and PromQL errors to Prometheus' error types", async () => {
    const cases: [Record<string, string>, string, number, string, RegExp][] = [
      [{ query: "sum(" }, "api/v1/query", 400, "bad_data", /^invalid parameter "query": 1:5: parse error: /],
      [{ query: "1", time: "yesterday" }, "api/v1/query", 400, "bad_data", /invalid parameter "time"/],
      [
        { query: "1", start: "1", end: "2" },
        "api/v1/query_range",
        400,
        "bad_data",
        /invalid parameter "step"/,
      ],
      [
        { query: "1", start: "2", end: "1", step: "1" },
        "api/v1/query_range",
        400,
        "bad_data",
        /end timestamp/,
      ],
      [
        { query: "1", start: "1", end: "2", step: "-1" },
        "api/v1/query_range",
        400,
        "bad_data",
        /zero or negative/,
      ],
      [
        { query: "up[5m]", start: "1", end: "2", step: "1" },
        "api/v1/query_range",
        400,
        "bad_data",
        /range vector/,
      ],
      [{ query: 'x{a=~"("}' }, "api/v1/query", 400, "bad_data", /invalid regular expression/],
      [{}, "api/v1/series", 400, "bad_data", /no match\[\] parameter provided/],
      [{ "match[]": "rate(x[5m])" }, "api/v1/series", 400, "bad_data", /not a series selector/],
      [{ limit: "-1" }, "api/v1/labels", 400, "bad_data", /limit/],
    ];
    for (const [params, path, status, errorType, msg] of cases) {
      const r = await f.get("mine", path, params);
      assert.equal(r.status, status, `${path} ${JSON.stringify(params)}: ${r.text}`);
      assert.equal(r.json.status, "error");
      assert.equal(r.json.errorType, errorType);
      assert.match(r.json.error, msg);
    }
  });
});
