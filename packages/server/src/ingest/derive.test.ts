import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { derive, emptyBatch, type Point, type VmDeriveState } from "./derive.ts";

const p = (t: number, v: number, stale = false): Point => ({ t, v, stale });
const S = 1000;

describe("derive()", () => {
  const cases: {
    name: string;
    cpu: Point[];
    vcpus?: Point[];
    state?: VmDeriveState;
    inventory?: number;
    want: [number, number | "stale"][];
  }[] = [
    { name: "first sample derives nothing", cpu: [p(0, 10)], want: [] },
    {
      name: "one busy core of two is 50%",
      cpu: [p(0, 10), p(30 * S, 40)],
      inventory: 2,
      want: [[30 * S, 50]],
    },
    {
      name: "a counter reset counts the new value as the delta",
      cpu: [p(0, 100), p(30 * S, 115), p(60 * S, 6)],
      inventory: 1,
      want: [
        [30 * S, 50],
        [60 * S, 20],
      ],
    },
    {
      name: "a resize divides each interval by the vCPUs of that interval only",
      cpu: [p(0, 0), p(30 * S, 30), p(60 * S, 90)],
      vcpus: [p(0, 2), p(60 * S, 4)],
      inventory: 2,
      want: [
        [30 * S, 50],
        [60 * S, 50],
      ],
    },
    {
      name: "a gap longer than five minutes derives nothing",
      cpu: [p(0, 0), p(400 * S, 100)],
      inventory: 1,
      want: [],
    },
    {
      name: "a staleness marker passes through and restarts the interval",
      cpu: [p(0, 0), p(30 * S, 15), p(60 * S, 0, true), p(90 * S, 20), p(120 * S, 35)],
      inventory: 1,
      want: [
        [30 * S, 50],
        [60 * S, "stale"],
        [120 * S, 50],
      ],
    },
    {
      name: "late samples behind newer data derive nothing",
      cpu: [p(10 * S, 5)],
      state: { lastCpu: { t: 60 * S, v: 30 } },
      want: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const batch = { ...emptyBatch(), cpuSeconds: c.cpu, vcpus: c.vcpus ?? [] };
      const got = derive(batch, c.state ?? {}, c.inventory ?? 1).cpuUtilizationPct.map((x) => [
        x.t,
        x.stale ? "stale" : Math.round(x.v * 1e6) / 1e6,
      ]);
      assert.deepEqual(got, c.want);
    });
  }

  it("refuses a utilization that cannot be real, naming why, and stores what is real (issue 48)", () => {
    const refusals = (cpu: Point[], inventory: number, state: VmDeriveState = {}) => {
      const d = derive({ ...emptyBatch(), cpuSeconds: cpu }, state, inventory);
      return {
        kept: d.cpuUtilizationPct.map((x) => [x.t, Math.round(x.v)]),
        refused: d.refusedUtilization.map((r) => [r.t, r.reason]),
      };
    };
    // 90 CPU-seconds in 30 s on 2 vCPUs: 150 %.
    assert.deepEqual(refusals([p(0, 0), p(30 * S, 90)], 2), {
      kept: [],
      refused: [[30 * S, "over_capacity"]],
    });
    // Every vCPU busy the whole interval is real.
    assert.deepEqual(refusals([p(0, 0), p(30 * S, 60)], 2), { kept: [[30 * S, 100]], refused: [] });
    // Two writers for one VM: 1,000 then 500 s. Read as a reset, 500 s in 30 s on one vCPU is 1,667 %.
    assert.deepEqual(refusals([p(0, 1000), p(30 * S, 500), p(60 * S, 1010)], 1), {
      kept: [],
      refused: [
        [30 * S, "counter_backwards"],
        [60 * S, "over_capacity"],
      ],
    });
    // A genuine reset (a reboot) still counts its new value as the delta.
    assert.deepEqual(refusals([p(0, 1000), p(30 * S, 6)], 1), { kept: [[30 * S, 20]], refused: [] });
  });

  it("keeps state across batches so the next batch continues the series", () => {
    const state: VmDeriveState = {};
    derive({ ...emptyBatch(), cpuSeconds: [p(0, 0)] }, state, 1);
    const d = derive({ ...emptyBatch(), cpuSeconds: [p(30 * S, 30)] }, state, 1);
    assert.deepEqual(d.cpuUtilizationPct, [p(30 * S, 100)]);
  });

  it("computes memory used as total minus free at the same timestamp, never from one side alone", () => {
    const d = derive(
      { ...emptyBatch(), memTotal: [p(0, 1000), p(30 * S, 1000)], memFree: [p(0, 250)] },
      {},
      1,
    );
    assert.deepEqual(d.memoryUsedBytes, [p(0, 750)]);
  });

  it("emits the newest observation time once per advance", () => {
    const state: VmDeriveState = {};
    assert.deepEqual(derive({ ...emptyBatch(), newestT: 60 * S }, state, 1).lastObservation, [p(60 * S, 60)]);
    assert.deepEqual(derive({ ...emptyBatch(), newestT: 30 * S }, state, 1).lastObservation, []);
  });
});
