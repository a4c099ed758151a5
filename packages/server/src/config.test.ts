import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { loadConfig } from "./config.ts";
import { parseHeaderList, resolveRemoteMetricsOptions } from "./metrics/remote/options.ts";

describe("remote metrics configuration", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-remote-config-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const env = (e: Record<string, string>) => ({ SVC_DATA_DIR: dir, ...e });

  it("defaults to the embedded store", () => {
    const c = loadConfig(env({}));
    assert.equal(c.metricsBackend, "embedded");
    assert.equal(c.remoteMetrics, undefined);
  });

  it("reads the remote engine's URLs and headers", () => {
    const c = loadConfig(
      env({
        SVC_METRICS_BACKEND: "remote",
        SVC_REMOTE_WRITE_URL: "http://vm:8480/insert/7/prometheus/api/v1/write",
        SVC_REMOTE_QUERY_URL: "http://vm:8481/select/7/prometheus",
        SVC_REMOTE_HEADERS: "X-Scope-OrgID: team-a, Authorization: Basic dTpw",
      }),
    );
    assert.equal(c.metricsBackend, "remote");
    assert.deepEqual(c.remoteMetrics?.headers, { "X-Scope-OrgID": "team-a", Authorization: "Basic dTpw" });
  });

  it("refuses a bad combination with an error naming the variable", () => {
    assert.throws(() => loadConfig(env({ SVC_METRICS_BACKEND: "vm" })), /SVC_METRICS_BACKEND: "vm"/);
    assert.throws(
      () => loadConfig(env({ SVC_METRICS_BACKEND: "remote", SVC_REMOTE_QUERY_URL: "http://q" })),
      /SVC_REMOTE_WRITE_URL: required with SVC_METRICS_BACKEND=remote/,
    );
    assert.throws(
      () => loadConfig(env({ SVC_REMOTE_WRITE_URL: "http://w/api/v1/write" })),
      /SVC_REMOTE_WRITE_URL is set but SVC_METRICS_BACKEND is embedded/,
    );
    assert.throws(
      () =>
        loadConfig(
          env({
            SVC_METRICS_BACKEND: "remote",
            SVC_REMOTE_WRITE_URL: "ftp://w",
            SVC_REMOTE_QUERY_URL: "http://q",
          }),
        ),
      /SVC_REMOTE_WRITE_URL: must be an http\(s\) URL/,
    );
  });

  it("reads how many projects the usage metrics name (SVC_USAGE_TOP_K)", () => {
    assert.equal(loadConfig(env({})).usageTopK, 10);
    assert.equal(loadConfig(env({ SVC_USAGE_TOP_K: "0" })).usageTopK, 0);
    assert.equal(loadConfig(env({ SVC_USAGE_TOP_K: "25" })).usageTopK, 25);
    for (const bad of ["-1", "2.5", "ten", "1001"])
      assert.throws(
        () => loadConfig(env({ SVC_USAGE_TOP_K: bad })),
        /SVC_USAGE_TOP_K: ".*" is not a number of projects \(0–1000\)/,
      );
  });

  it("reads the cost up to which a Prometheus-API query may run inline (SVC_QUERY_INLINE_COST)", () => {
    assert.equal(loadConfig(env({})).queryInlineCost, 100_000);
    assert.equal(loadConfig(env({ SVC_QUERY_INLINE_COST: "0" })).queryInlineCost, 0);
    for (const bad of ["-1", "2.5", "lots"])
      assert.throws(
        () => loadConfig(env({ SVC_QUERY_INLINE_COST: bad })),
        /SVC_QUERY_INLINE_COST: ".*" is not a number of sample visits/,
      );
  });

  it("names a malformed header entry by position, never its value", () => {
    assert.throws(
      () => parseHeaderList("X-Scope-OrgID: a, secret-without-colon", "SVC_REMOTE_HEADERS"),
      (e: Error) => {
        assert.match(e.message, /SVC_REMOTE_HEADERS: entry 2 is not "Name: value"/);
        assert.doesNotMatch(e.message, /secret/);
        return true;
      },
    );
    assert.throws(
      () =>
        resolveRemoteMetricsOptions({
          remoteWriteUrl: "http://w",
          queryUrl: "http://q",
          headers: { "Content-Encoding": "gzip" },
        }),
      /header Content-Encoding is set by the protocol/,
    );
  });
});
