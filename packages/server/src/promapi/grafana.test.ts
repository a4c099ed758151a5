/**
 * Replays the requests Grafana's Prometheus data source (pkg/promlib and the language provider) makes,
 * with its headers and encodings, against the query base URL, and checks each answer's shape as
 * Grafana parses it. The data source is configured as docs/grafana.md says: URL = query base URL,
 * HTTP method POST, `Authorization: Bearer <read key>` as a server-side custom header.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, describe, it } from "node:test";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { type PromFixture, S, startPromFixture } from "../../testing/promapi-fixture.ts";

describe("Grafana Prometheus data source replay", () => {
  let f: PromFixture;
  let base: string;
  before(async () => {
    f = await startPromFixture();
    base = `${f.t.baseUrl}/v1/monitoring/projects/mine/prometheus`;
  });
  after(() => f?.close());

  const grafanaHeaders = () => ({
    authorization: `Bearer ${f.mine.key}`,
    "user-agent": "Grafana/11.3.0",
    "x-grafana-org-id": "1",
    accept: "application/json, text/plain, */*",
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  type Answer = { status: number; json: any };
  async function post(path: string, body: string): Promise<Answer> {
    const r = await fetch(`${base}/${path}`, {
      method: "POST",
      headers: { ...grafanaHeaders(), "content-type": "application/x-www-form-urlencoded" },
      body,
    });
    return { status: r.status, json: await r.json() };
  }
  async function get(pathAndQuery: string): Promise<Answer> {
    const r = await fetch(`${base}/${pathAndQuery}`, { headers: grafanaHeaders() });
    return { status: r.status, json: await r.json() };
  }
  // Grafana's range for "last 1 hour", in seconds as it formats them.
  const end = () => Math.floor(f.endMs / 1000);
  const start = () => end() - 3600;

  it("Save & test: 1+1 at time=4, POST form", async () => {
    const r = await post("api/v1/query", "query=1%2B1&time=4");
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { status: "success", data: { resultType: "scalar", result: [4, "2"] } });
  });

  it("buildinfo: a version Grafana can parse and no features map", async () => {
    const r = await get("api/v1/status/buildinfo");
    assert.equal(r.status, 200);
    assert.match(r.json.data.version, /^\d+\.\d+\.\d+$/);
    assert.equal(
      "features" in r.json.data,
      false,
      "a features map would make Grafana treat it as Mimir/Cortex",
    );
  });

  it("label names with limit=40000 and start/end, GET and POST", async () => {
    const g = await get(`api/v1/labels?start=${start()}&end=${end()}&limit=40000`);
    const p = await post("api/v1/labels", `start=${start()}&end=${end()}&limit=40000`);
    for (const r of [g, p]) {
      assert.equal(r.status, 200);
      assert.ok(Array.isArray(r.json.data) && r.json.data.every((x: unknown) => typeof x === "string"));
      assert.ok(r.json.data.includes("vm_id"));
      assert.equal(r.json.warnings, undefined);
    }
  });

  it("metric names: label/__name__/values with start/end and limit", async () => {
    const r = await get(`api/v1/label/__name__/values?start=${start()}&end=${end()}&limit=40000`);
    assert.equal(r.status, 200);
    assert.ok(r.json.data.includes("svc_vm_cpu_seconds_total"));
  });

  it("template variable: label values filtered by match[]", async () => {
    const q = new URLSearchParams({
      "match[]": 'svc_vm_vcpus{vm_id="vm-2"}',
      start: `${start()}`,
      end: `${end()}`,
    });
    const r = await get(`api/v1/label/vm/values?${q}`);
    assert.deepEqual(r.json.data, ["projects/mine/locations/dc-1/vms/vm-2"]);
  });

  it("series lookup with match[] (query builder)", async () => {
    const q = new URLSearchParams({
      "match[]": "svc_vm_disk_read_bytes_total",
      start: `${start()}`,
      end: `${end()}`,
    });
    const r = await get(`api/v1/series?${q}`);
    assert.equal(r.status, 200);
    assert.equal(r.json.data.length, 2);
    for (const s of r.json.data) {
      assert.equal(s.__name__, "svc_vm_disk_read_bytes_total");
      assert.equal(s.device, "vda");
    }
  });

  it("metadata: map of metric name to [{type, help, unit}]", async () => {
    const r = await get("api/v1/metadata");
    assert.equal(r.status, 200);
    for (const [name, entries] of Object.entries(r.json.data as Record<string, unknown[]>)) {
      assert.match(name, /^svc_vm_/);
      const [m] = entries as { type: string; help: string; unit: string }[];
      assert.ok(["counter", "gauge"].includes(m.type));
      assert.equal(typeof m.help, "string");
      assert.equal(typeof m.unit, "string");
    }
  });

  it("exemplars probe with millisecond-looking bounds", async () => {
    const q = new URLSearchParams({
      query: "rate(svc_vm_cpu_seconds_total[5m])",
      start: `${f.endMs - 3600 * S}`,
      end: `${f.endMs}`,
    });
    const g = await get(`api/v1/query_exemplars?${q}`);
    const p = await post("api/v1/query_exemplars", q.toString());
    for (const r of [g, p]) assert.deepEqual(r, { status: 200, json: { status: "success", data: [] } });
  });

  it("panel query: query_range POST form with a step in seconds", async () => {
    const body = new URLSearchParams({
      query: "sum by (vm_id) (rate(svc_vm_cpu_seconds_total[2m]))",
      start: `${start()}`,
      end: `${end()}`,
      step: "60",
    });
    const r = await post("api/v1/query_range", body.toString());
    assert.equal(r.status, 200);
    assert.equal(r.json.data.resultType, "matrix");
    assert.deepEqual(
      r.json.data.result.map((s: { metric: Record<string, string> }) => s.metric),
      [{ vm_id: "vm-1" }, { vm_id: "vm-2" }],
    );
    for (const s of r.json.data.result) {
      for (const [t, v] of s.values) {
        assert.equal(typeof t, "number");
        assert.equal((t - start()) % 60, 0, "points on Grafana's step grid");
        assert.equal(typeof v, "string");
      }
    }
    assert.ok(Math.abs(Number(r.json.data.result[0].values.at(-1)[1]) - 0.5) < 1e-9);
  });

  it("compresses an answer as the client accepts it (Grafana asks for gzip), and the content is the same", async () => {
    const path = `${base}/api/v1/query_range?${new URLSearchParams({
      query: "svc_vm_cpu_seconds_total",
      start: `${start()}`,
      end: `${end()}`,
      step: "15",
    })}`;
    const raw = (acceptEncoding: string) =>
      new Promise<{ encoding: string | undefined; vary: string | undefined; body: Buffer }>(
        (resolve, reject) => {
          const req = request(
            path,
            { headers: { ...grafanaHeaders(), "accept-encoding": acceptEncoding } },
            (res) => {
              const parts: Buffer[] = [];
              res.on("data", (d: Buffer) => parts.push(d));
              res.on("end", () =>
                resolve({
                  encoding: res.headers["content-encoding"],
                  vary: res.headers.vary,
                  body: Buffer.concat(parts),
                }),
              );
            },
          );
          req.on("error", reject);
          req.end();
        },
      );
    const plain = await raw("identity");
    assert.equal(plain.encoding, undefined);
    assert.ok(plain.body.length > 1024, "large enough to compress");
    const gz = await raw("gzip");
    assert.equal(gz.encoding, "gzip");
    assert.equal(gz.vary, "accept-encoding");
    assert.ok(gz.body.length < plain.body.length / 3);
    assert.deepEqual(gunzipSync(gz.body), plain.body);
    const br = await raw("gzip, deflate, br");
    assert.equal(br.encoding, "br", "br first for JSON among equally weighted codings");
    assert.deepEqual(brotliDecompressSync(br.body), plain.body);
  });

  it("instant table query: POST form with time and a step-like interval", async () => {
    const r = await post("api/v1/query", `query=${encodeURIComponent("svc_vm_vcpus")}&time=${end()}&step=60`);
    assert.equal(r.status, 200);
    assert.equal(r.json.data.resultType, "vector");
    assert.equal(r.json.data.result.length, 2);
  });

  it("a query error reaches Grafana as Prometheus' error envelope", async () => {
    const r = await post("api/v1/query_range", `query=sum(&start=${start()}&end=${end()}&step=60`);
    assert.equal(r.status, 400);
    assert.equal(r.json.status, "error");
    assert.equal(r.json.errorType, "bad_data");
    assert.equal(typeof r.json.error, "string");
  });
});
