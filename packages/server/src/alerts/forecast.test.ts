import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { SvcError } from "@svc/sdk";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { labelsFromRecord } from "../storage/interface.ts";
import { ruleMetrics } from "./catalog.ts";
import { evaluateSamples, type InstanceSeries, newestAtOrBefore } from "./condition.ts";
import { evaluateForecast, predictAt } from "./forecast.ts";
import { readRuleData } from "./read.ts";
import type { Forecast, RuleSpec } from "./spec.ts";

type Condition = Pick<RuleSpec, "operator" | "threshold" | "sustainedSeconds">;

const S = 1000;
const H = 3600 * S;

describe("evaluateForecast()", () => {
  const f = { horizonSeconds: 3600, lookbackSeconds: 600 };
  const c = { operator: "GREATER_THAN_OR_EQUAL" as const, threshold: 100, sustainedSeconds: 60 };
  // 1 % a minute from 40 %: 100 % is 60 min away at t = 0, the line crosses 100 % one hour ahead at t = 0.
  const rising = (fromMs: number, toMs: number) => {
    const t: number[] = [];
    const v: number[] = [];
    for (let ts = fromMs; ts <= toMs; ts += 30 * S) {
      t.push(ts);
      v.push(40 + ts / 60_000);
    }
    return { t, v };
  };
  const cases: {
    name: string;
    s: { t: number[]; v: number[] };
    at: number;
    want: { result: string; holds: boolean; value?: number };
  }[] = [
    {
      name: "a line reaching the threshold within the horizon breaches, and holds once it did for sustainedSeconds",
      s: rising(-20 * 60 * S, 2 * 60 * S),
      at: 2 * 60 * S,
      want: { result: "true", holds: true, value: 40 + 2 + 60 },
    },
    {
      name: "just breaching: pending until the predictions of the last sustainedSeconds breached too",
      s: rising(-20 * 60 * S, 0),
      at: 0,
      want: { result: "true", holds: false, value: 100 },
    },
    {
      name: "a line that will not reach it within the horizon is false",
      s: rising(-20 * 60 * S, -5 * 60 * S),
      at: -5 * 60 * S,
      want: { result: "false", holds: false, value: 95 },
    },
    {
      name: "one sample in the lookback predicts nothing: no data, never a flat line",
      s: { t: [-700 * S, 0], v: [40, 41] },
      at: 0,
      want: { result: "no_data", holds: false },
    },
    {
      name: "no sample for three sampling intervals is no data, whatever the line says",
      s: rising(-20 * 60 * S, -2 * 60 * S),
      at: 0,
      want: { result: "no_data", holds: false },
    },
    {
      name: "a constant series predicts itself",
      s: { t: [-60 * S, -30 * S, 0], v: [99, 99, 99] },
      at: 0,
      want: { result: "false", holds: false, value: 99 },
    },
  ];
  for (const k of cases)
    it(k.name, () => {
      const e = evaluateForecast(k.s, k.at, c, 90 * S, f);
      assert.equal(e.result, k.want.result, e.message);
      assert.equal(e.holds, k.want.holds);
      if (k.want.value !== undefined)
        assert.ok(Math.abs((e.value ?? Number.NaN) - k.want.value) < 1e-9, String(e.value));
    });
});

describe("evaluateForecast() walks back only as far as it looks", () => {
  // The definition written out: evaluateSamples over the predictions at every sample time of the
  // sustained window (the newest is the prediction at atMs), a prediction of nothing restarting the run.
  function reference(s: InstanceSeries, atMs: number, c: Condition, maxGapMs: number, f: Forecast) {
    const last = newestAtOrBefore(s.t, atMs);
    if (last < 0 || atMs - s.t[last] > maxGapMs) return evaluateSamples(s, atMs, c, maxGapMs);
    const value = predictAt(s, atMs, f);
    if (value === undefined || Number.isNaN(value))
      return { result: "no_data", holds: false, value: undefined };
    const first = Math.max(0, newestAtOrBefore(s.t, atMs - c.sustainedSeconds * 1000) - 1);
    const t: number[] = [];
    const v: number[] = [];
    for (let j = first; j <= last; j++) {
      const p = j === last ? value : predictAt(s, s.t[j], f);
      if (p === undefined || Number.isNaN(p)) {
        t.length = 0;
        v.length = 0;
        continue;
      }
      t.push(s.t[j]);
      v.push(p);
    }
    return { ...evaluateSamples({ t, v }, atMs, c, maxGapMs), value };
  }

  it("gives the full walk's outcome on random series with gaps, flat runs and thresholds near the line", () => {
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const outcomes = new Map<string, number>();
    for (let k = 0; k < 3000; k++) {
      const t: number[] = [];
      const v: number[] = [];
      let ts = 0;
      let x = 50 + rnd() * 40;
      const slope = (rnd() - 0.3) * 0.5;
      for (let i = 0; i < 10 + Math.floor(rnd() * 60); i++) {
        // Mostly every 30 s, sometimes a gap longer than maxGapMs or a lone sample in a lookback.
        ts += rnd() < 0.9 ? 30 * S : (60 + Math.floor(rnd() * 400)) * S;
        if (rnd() > 0.2) x += slope + (rnd() - 0.5) * 2;
        t.push(ts);
        v.push(x);
      }
      const at = t[t.length - 1] + Math.floor(rnd() * 100) * S;
      const f = {
        horizonSeconds: 60 * Math.floor(1 + rnd() * 120),
        lookbackSeconds: 60 * Math.floor(1 + rnd() * 30),
      };
      const c = {
        operator: rnd() < 0.7 ? ("GREATER_THAN_OR_EQUAL" as const) : ("LESS_THAN" as const),
        threshold: 60 + rnd() * 60,
        sustainedSeconds: rnd() < 0.1 ? 0 : 60 * Math.floor(1 + rnd() * 15),
      };
      const got = evaluateForecast({ t, v }, at, c, 90 * S, f);
      const want = reference({ t, v }, at, c, 90 * S, f);
      assert.deepEqual(
        { result: got.result, holds: got.holds, value: got.value },
        { result: want.result, holds: want.holds, value: want.value },
        `case ${k}`,
      );
      const key = `${got.result}/${got.holds}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    }
    // Every outcome the walk can end in was exercised.
    for (const key of ["true/true", "true/false", "false/false", "no_data/false"])
      assert.ok((outcomes.get(key) ?? 0) > 20, `${key}: ${JSON.stringify([...outcomes])}`);
  });
});

for (const { dialect, skip } of await testDialects()) {
  describe(`forecast rules (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    const projectId = "forecast";
    let vm1: string;
    // Jittered usage that grows, so the fitted line is not exact: the comparison with the engine means something.
    const jitter = (i: number) => Math.sin(i * 1.7) * 0.8 + Math.cos(i * 0.31) * 0.5;
    let t0: number;

    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject(projectId, ["vm-1"]);
      [vm1] = p.vms;
      t0 = t.clock.ms + 6 * H;
      t.clock.ms = t0;
      const a = t.app.tsdb.appender();
      const base = { project_id: projectId, vm: vm1, vm_id: "vm-1", location: "dc-1", source: "guest_agent" };
      const mem = labelsFromRecord({ __name__: "svc_vm_memory_used_bytes", ...base });
      const fsUsed = labelsFromRecord({
        __name__: "svc_vm_filesystem_used_bytes",
        ...base,
        mountpoint: "/",
        fstype: "ext4",
        device: "vda1",
      });
      const fsSize = labelsFromRecord({
        __name__: "svc_vm_filesystem_size_bytes",
        ...base,
        mountpoint: "/",
        fstype: "ext4",
        device: "vda1",
      });
      // Three hours of samples every 30 s: the filesystem fills 10 % an hour from 50 %.
      for (let i = 0, ts = t0 - 3 * H; ts <= t0; i++, ts += 30 * S) {
        a.append(mem, ts, 2e9 + i * 1e6 + jitter(i) * 5e6);
        a.append(fsUsed, ts, 50e9 + ((ts - (t0 - 3 * H)) / H) * 10e9 + jitter(i) * 1e8);
        a.append(fsSize, ts, 100e9);
      }
      await a.commit();
    });
    after(async () => {
      await t?.close();
    });
    const owner = () => t.clients(p.owner.session);

    async function engine(expr: string, atMs: number): Promise<number> {
      const r = await t.app.metrics.instantQuery(projectId, expr, atMs);
      assert.equal(r.value.resultType, "vector");
      const [sample] = r.value.result as { v: number }[];
      return sample.v;
    }
    async function series(metricId: string) {
      const data = await readRuleData(
        t.app.metrics,
        projectId,
        ruleMetrics.get(metricId)!,
        undefined,
        t0 - 3 * H,
        t0,
      );
      const [d] = [...data.values()];
      return d.series;
    }

    it("predicts the same numbers as svc's own predict_linear on the same data (memory bytes, filesystem %)", async () => {
      const mem = await series("memory_used_bytes");
      const fs = await series("filesystem_used_pct");
      for (const at of [t0, t0 - 17 * 60 * S, t0 - 95 * 60 * S + 10 * S]) {
        for (const [lookback, horizon] of [
          [3600, 14_400],
          [600, 3600],
        ]) {
          const f = { horizonSeconds: horizon, lookbackSeconds: lookback };
          const want = await engine(`predict_linear(svc_vm_memory_used_bytes[${lookback}s], ${horizon})`, at);
          const got = predictAt(mem, at, f);
          assert.ok(
            Math.abs((got ?? Number.NaN) - want) <= Math.abs(want) * 1e-12,
            `memory at ${at}: ${got} vs ${want}`,
          );
          // The rule's percentage is used ÷ size × 100 at each sample time: the engine computes it in a
          // subquery on the sampling grid, which lands on the same samples.
          const wantFs = await engine(
            `predict_linear((100 * svc_vm_filesystem_used_bytes / svc_vm_filesystem_size_bytes)[${lookback}s:30s], ${horizon})`,
            at,
          );
          const gotFs = predictAt(fs, at, f);
          assert.ok(Math.abs((gotFs ?? Number.NaN) - wantFs) <= 1e-9, `fs at ${at}: ${gotFs} vs ${wantFs}`);
        }
      }
    });

    it("the filesystem template's forecast variant fires hours before the disk is full; the preview draws the line and its crossing and saves nothing", async () => {
      const { templates } = await owner().alerts.listAlertRuleTemplates({});
      const tpl = templates.find((x) => x.id === "filesystem-forecast");
      assert.ok(tpl?.spec);
      assert.deepEqual([tpl.spec.forecastHorizonSeconds, tpl.spec.forecastLookbackSeconds], [14_400, 21_600]);
      // 80 % now, filling 10 %/h: full in 2 h, so a 4 h horizon fires, a 1 h one does not.
      const spec = { ...tpl.spec, forecastLookbackSeconds: 3600, sustainedSeconds: 300 };
      const rulesBefore = await t.app.db.db.selectFrom("alert_rules").selectAll().execute();
      const preview = await owner().alerts.previewAlertRule({
        projectName: p.projectName,
        spec,
        historySeconds: 7200,
      });
      assert.equal(preview.queryStatus, "OK");
      const [inst] = preview.instances;
      assert.equal(inst.mountpoint, "/");
      assert.ok(inst.firingIntervals.length >= 1, "would have fired");
      assert.ok(inst.forecast.length > 100 && inst.forecast.length <= 500);
      const endS = Number(preview.endTimeUnix);
      assert.equal(inst.forecastLine.length, 2);
      assert.equal(Number(inst.forecastLine[1].timeUnix) - Number(inst.forecastLine[0].timeUnix), 14_400);
      const crossing = Number(inst.predictedCrossingTimeUnix ?? 0n);
      assert.ok(
        Math.abs(crossing - endS - 2 * 3600) < 600,
        `the line crosses 100 % about 2 h after the end: ${crossing - endS} s`,
      );
      // The last drawn prediction is predict_linear's own at that time.
      const last = inst.forecast.at(-1)!;
      const want = await engine(
        "predict_linear((100 * svc_vm_filesystem_used_bytes / svc_vm_filesystem_size_bytes)[3600s:30s], 14400)",
        Number(last.timeUnix) * 1000,
      );
      assert.ok(Math.abs(last.value - want) < 1e-9);
      const short = await owner().alerts.previewAlertRule({
        projectName: p.projectName,
        spec: { ...spec, forecastHorizonSeconds: 3600 },
        historySeconds: 600,
      });
      assert.equal(short.instances[0].firingIntervals.length, 0, "not full within 1 h");
      assert.deepEqual(await t.app.db.db.selectFrom("alert_rules").selectAll().execute(), rulesBefore);

      // Saved, the evaluator fires it once the prediction held for sustainedSeconds.
      const rule = await owner().alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec,
      });
      await t.app.evaluator.runCycle(t0 - 10 * 60 * S);
      await t.app.evaluator.runCycle(t0);
      const got = await owner().alerts.getAlertRule({ name: rule.name, includeInstances: true });
      assert.equal(got.instances[0].state, "FIRING");
      assert.ok((got.instances[0].lastValue ?? 0) > 100, "the predicted value, not the current 80 %");
      await owner().alerts.deleteAlertRule({ name: rule.name });
    });

    it("a forecast on another metric, or without its lookback, is a 400 naming the field", async () => {
      const base = {
        displayName: "f",
        metricId: "filesystem_used_pct",
        operator: "GREATER_THAN_OR_EQUAL",
        threshold: 100,
        sustainedSeconds: 0,
        severity: "WARNING",
        allVms: true,
        repeatIntervalSeconds: 0,
        destinationNames: [],
      };
      const cases: [Record<string, unknown>, string][] = [
        [
          { metricId: "cpu_utilization_pct", forecastHorizonSeconds: 3600, forecastLookbackSeconds: 3600 },
          "spec.forecastHorizonSeconds",
        ],
        [{ forecastHorizonSeconds: 3600 }, "spec.forecastLookbackSeconds"],
        [{ forecastHorizonSeconds: 10, forecastLookbackSeconds: 3600 }, "spec.forecastHorizonSeconds"],
        [{ forecastLookbackSeconds: 3600 }, "spec.forecastLookbackSeconds"],
      ];
      for (const [over, field] of cases) {
        try {
          await owner().alerts.saveAlertRule({
            projectName: p.projectName,
            id: randomUUID(),
            requestId: randomUUID(),
            expectedVersion: "0",
            spec: { ...base, ...over },
          });
          assert.fail("expected a refusal");
        } catch (e) {
          assert.equal(SvcError.fromError(e).field, field, JSON.stringify(over));
        }
      }
    });
  });
}
