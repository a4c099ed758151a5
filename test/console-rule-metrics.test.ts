// The console's list of what an alert rule can watch (packages/console/src/components/rule-metrics.ts)
// states facts the server owns: this test fails when the two drift apart. The console keeps only its
// own words for each metric (docs/decisions.md, "The console's rule catalog").
import assert from "node:assert/strict";
import { it } from "node:test";
import {
  FORECAST_HORIZON,
  FORECAST_LOOKBACK,
  RULE_METRICS,
} from "../packages/console/src/components/rule-metrics.ts";
import { ruleMetrics } from "../packages/server/src/alerts/catalog.ts";
import {
  FORECAST_HORIZON_SECONDS,
  FORECAST_LOOKBACK_SECONDS,
  FORECAST_METRICS,
} from "../packages/server/src/alerts/spec.ts";
import { metricIds } from "../packages/server/src/metrics/metric-ids.ts";

it("the console lists every metric a rule may watch, and no other", () => {
  assert.deepEqual(RULE_METRICS.map((m) => m.id).sort(), [...ruleMetrics.keys()].sort());
  assert.equal(new Set(RULE_METRICS.map((m) => m.id)).size, RULE_METRICS.length, "each once");
});

it("each metric's unit, mountpoints, chart and forecast are the server's", () => {
  const console = RULE_METRICS.map((m) => ({
    id: m.id,
    unit: m.unit,
    perMountpoint: m.perMountpoint,
    charted: m.charted,
    forecast: m.forecast === true,
  }));
  const server = RULE_METRICS.map(({ id }) => {
    const def = ruleMetrics.get(id);
    return {
      id,
      unit: def?.unit,
      perMountpoint: def?.perMountpoint,
      // The preview draws a metric's history when QueryVMMonitoring serves the same metricId.
      charted: metricIds.has(id),
      forecast: FORECAST_METRICS.includes(id),
    };
  });
  assert.deepEqual(console, server);
});

it("the forecast bounds are the server's", () => {
  assert.deepEqual(FORECAST_HORIZON, FORECAST_HORIZON_SECONDS);
  assert.deepEqual(FORECAST_LOOKBACK, FORECAST_LOOKBACK_SECONDS);
});
