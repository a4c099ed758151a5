import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ENGINE_KINDS, engineSkipReason, type RunningEngine, startEngine } from "../../../testing/engines.ts";
import { MemStorage } from "../../../testing/memstorage.ts";
import type { RangeSeries } from "../../promql/index.ts";
import { type LabelMatcher, type Labels, labelsFromRecord, staleNaN } from "../../storage/interface.ts";
import { createMetricsBackend, type MetricsBackend, scoped, type WindowRequest } from "../backend.ts";
import { createPromApiClient, selectorOf } from "./api-client.ts";
import { createRemoteMetricsBackend, type RemoteMetricsBackend } from "./backend.ts";
import { createRemoteWriteStorage } from "./forwarder.ts";
import { resolveRemoteMetricsOptions } from "./options.ts";
import { rateFromPieces, ratePiecesQuery, victoriaMetricsQueries } from "./window-aggregates.ts";

/**
 * `rate` in windowAggregates against each real engine equals the embedded sweep, on counters made
 * to hit every branch of Prometheus' extrapolatedRate: and on VictoriaMetrics, where it is computed
 * from per-window pieces (count, first/last value and time, resets), the pieces alone are exact.
 */
const S = 1000;
const MIN = 60 * S;
const T0 = Math.floor((Date.now() - 4 * 3_600_000) / MIN) * MIN;
const END = T0 + 120 * MIN;
const M = "svc_vm_net_rx_bytes_total";

interface Sample {
  readonly labels: Labels;
  readonly t: number;
  readonly v: number;
}

const L = (device: string) =>
  labelsFromRecord({ __name__: M, project_id: "p", vm: "projects/p/locations/dc-1/vms/vm-1", device });

/** One counter per case (the `device` label names it). */
function counters(): Map<string, Sample[]> {
  const cases = new Map<string, Sample[]>();
  const add = (device: string, t: number, v: number) => {
    const list = cases.get(device) ?? [];
    list.push({ labels: L(device), t, v });
    cases.set(device, list);
  };
  for (let i = 0; i < 240; i++) {
    // Jittered times (every fifth on a 30 s boundary), a 20-minute gap, non-integer steps.
    const t = T0 + i * 30 * S + ((i * 7919) % 5) * S + (i % 7) * 13;
    if (i < 100 || i >= 140) add("steady", t, 1e6 + i * 4096.5 + (i % 11) * 0.25);
    // Starts an hour in: its first windows begin before the series.
    if (i >= 120) add("late", t, 7 + (i - 120) * 3);
    // Resets: a small drop (100 → 95, jitter to MetricsQL's counter correction) and a restart at 0.
    add("resets", t, i < 60 ? 10 + i : i < 61 ? 65 : i < 150 ? 70 + i : i - 150);
    // A counter whose scraper stopped: a staleness marker, then it comes back.
    if (i < 80 || i >= 90) add("stale", t, 500 + i * 10);
    if (i === 80) add("stale", t, staleNaN());
  }
  // Samples 4 min apart: 5-minute windows hold one or two samples.
  for (let t = T0 + 11 * S; t < END; t += 4 * MIN) add("sparse", t, (t - T0) / 1000);
  return cases;
}

const GRIDS = [
  { start: T0, step: 60 * S, windows: [5 * MIN, 2 * MIN] },
  { start: T0 + 7 * S, step: 30 * S, windows: [5 * MIN, 30 * S] },
  { start: T0 + 30 * MIN, step: 1800 * S, windows: [1800 * S] },
] as const;

function close(a: number, b: number): boolean {
  return a === b || Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));
}

const key = (l: Labels) => l.map((x) => `${x.name}=${x.value}`).join(",");

function assertSeriesEqual(got: readonly RangeSeries[], want: readonly RangeSeries[], what: string): void {
  assert.deepEqual(got.map((s) => key(s.metric)).sort(), want.map((s) => key(s.metric)).sort(), what);
  for (const w of want) {
    const g = got.find((s) => key(s.metric) === key(w.metric));
    assert.ok(g);
    assert.deepEqual([...g.timestamps], [...w.timestamps], `${what}: timestamps of ${key(w.metric)}`);
    for (let j = 0; j < w.values.length; j++) {
      const msg = `${what}: ${key(w.metric)} at ${w.timestamps[j]}: ${g.values[j]} ≠ ${w.values[j]}`;
      assert.ok(close(g.values[j], w.values[j]), msg);
    }
  }
}

for (const kind of ENGINE_KINDS) {
  describe(`rate on ${kind}`, { skip: engineSkipReason(kind) }, () => {
    let engine: RunningEngine;
    let remote: RemoteMetricsBackend;
    let want: MetricsBackend;
    const cases = counters();

    before(async () => {
      engine = await startEngine(kind);
      const options = resolveRemoteMetricsOptions({
        remoteWriteUrl: engine.remoteWriteUrl,
        queryUrl: engine.queryUrl,
      });
      const storage = createRemoteWriteStorage(options);
      const mem = new MemStorage();
      const all = [...cases.values()].flat().sort((a, b) => a.t - b.t);
      for (let i = 0; i < all.length; i += 200) {
        const app = storage.appender();
        for (const s of all.slice(i, i + 200)) {
          app.append(s.labels, s.t, s.v);
          mem.append(s.labels, s.t, s.v);
        }
        await app.commit();
      }
      await engine.flush();
      remote = createRemoteMetricsBackend({ options });
      want = createMetricsBackend({ storage: mem });
    });
    after(async () => {
      await engine?.stop();
    });

    it("windowAggregates' rate equals the embedded sweep (resets, gaps, a late start, 1–2 samples, staleness)", async () => {
      const m: LabelMatcher[] = [{ type: "=~", name: "vm", value: ".*" }];
      for (const g of GRIDS) {
        const requests: WindowRequest[] = g.windows.map((windowMs) => ({ metric: M, fn: "rate", windowMs }));
        const [got, exp] = await Promise.all([
          remote.windowAggregates("p", m, requests, g.start, END, g.step),
          want.windowAggregates("p", m, requests, g.start, END, g.step),
        ]);
        got.forEach((o, i) => {
          const w = exp[i];
          assert.ok(o.ok && w.ok, o.ok ? "" : o.error.message);
          assertSeriesEqual(o.series, w.series, `rate[${requests[i].windowMs}ms] step ${g.step}`);
        });
      }
    });

    it("a call whose requests exceed one query's length is split and still answers as embedded", async () => {
      const m: LabelMatcher[] = [{ type: "=~", name: "vm", value: ".*" }];
      const requests: WindowRequest[] = Array.from({ length: 48 }, (_, k) => ({
        metric: M,
        fn: k % 3 === 2 ? "max_over_time" : "rate",
        windowMs: (k + 1) * MIN,
      }));
      const queries = victoriaMetricsQueries(requests, (metric) =>
        selectorOf(scoped("p", [...m, { type: "=", name: "__name__", value: metric }])),
      );
      // Together over VictoriaMetrics' default -search.maxQueryLen (16 KiB), each under it.
      assert.ok(queries.join(",").length > 16_384 && queries.every((q) => q.length < 16_384));
      const [got, exp] = await Promise.all([
        remote.windowAggregates("p", m, requests, T0, END, 60 * S),
        want.windowAggregates("p", m, requests, T0, END, 60 * S),
      ]);
      got.forEach((o, i) => {
        const w = exp[i];
        assert.ok(o.ok && w.ok, o.ok ? "" : o.error.message);
        assertSeriesEqual(o.series, w.series, `${requests[i].fn}[${requests[i].windowMs}ms]`);
      });
    });

    it("the per-window pieces alone give the embedded rate, except where a window may hold a reset", {
      skip: kind === "victoria-metrics" ? undefined : "pieces are VictoriaMetrics' path",
    }, async () => {
      let leftToRaw = 0;
      const client = createPromApiClient({ baseUrl: engine.queryUrl, headers: {}, timeoutMs: 10_000 });
      for (const g of GRIDS) {
        for (const windowMs of g.windows) {
          for (const device of cases.keys()) {
            const matchers: LabelMatcher[] = [
              { type: "=", name: "__name__", value: M },
              { type: "=", name: "device", value: device },
            ];
            const sel = selectorOf(scoped("p", matchers));
            const got = rateFromPieces(
              await client.queryRange(ratePiecesQuery(sel, windowMs), g.start, END, g.step),
              windowMs,
            );
            const exp = await want.windowAggregates(
              "p",
              matchers,
              [{ metric: M, fn: "rate", windowMs }],
              g.start,
              END,
              g.step,
            );
            assert.ok(exp[0].ok);
            const what = `${device} rate[${windowMs}ms] step ${g.step}`;
            if (device === "resets" && got === undefined) {
              leftToRaw++; // a window with a reset (and two samples): the raw samples serve it
              continue;
            }
            assert.ok(got, `${what}: no window holds a reset`);
            assertSeriesEqual(got, exp[0].series, what);
          }
        }
      }
      assert.ok(leftToRaw > 0, "the counter with resets falls back");
    });
  });
}
