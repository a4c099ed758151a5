import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type Evaluation,
  evaluateSamples,
  evaluateTelemetryAge,
  evaluateUnexpectedStop,
  type VmTimeline,
} from "./condition.ts";
import { type InstanceStatus, inactive, step } from "./state.ts";

const S = 1000;
const G = 90 * S;
const cond = { operator: "GREATER_THAN" as const, threshold: 90, sustainedSeconds: 300 };

/** Samples every 30 s from `from` (s) with the given values. */
function series(fromS: number, values: number[]): { t: number[]; v: number[] } {
  return { t: values.map((_, i) => (fromS + 30 * i) * S), v: values };
}

describe("evaluateSamples()", () => {
  const cases: {
    name: string;
    s: { t: number[]; v: number[] };
    at: number;
    want: Pick<Evaluation, "result" | "holds">;
  }[] = [
    {
      name: "every sample of the 300 s window breaches and the window is covered: holds",
      s: series(0, Array(12).fill(95)),
      at: 330 * S,
      want: { result: "true", holds: true },
    },
    {
      name: "the newest sample breaches but an older one in the window does not: pending",
      s: series(0, [95, 95, 50, 95, 95, 95, 95, 95, 95, 95, 95, 95]),
      at: 330 * S,
      want: { result: "true", holds: false },
    },
    {
      name: "breaching for less than the window (data starts late): not covered",
      s: series(200, [95, 95, 95, 95, 95]),
      at: 330 * S,
      want: { result: "true", holds: false },
    },
    {
      name: "a gap of more than 90 s inside the window: not covered",
      s: { t: [0, 30, 60, 90, 200, 230, 260, 290, 320].map((x) => x * S), v: Array(9).fill(95) },
      at: 330 * S,
      want: { result: "true", holds: false },
    },
    {
      name: "newest sample does not breach: false",
      s: series(0, [95, 95, 95, 80]),
      at: 100 * S,
      want: { result: "false", holds: false },
    },
    {
      name: "newest sample older than 90 s: no_data, never a value",
      s: series(0, [95, 95]),
      at: 200 * S,
      want: { result: "no_data", holds: false },
    },
    {
      name: "no samples at all: no_data",
      s: { t: [], v: [] },
      at: 200 * S,
      want: { result: "no_data", holds: false },
    },
    {
      name: "samples after the evaluation time are not read",
      s: series(100, [95, 95, 95]),
      at: 90 * S,
      want: { result: "no_data", holds: false },
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const e = evaluateSamples(c.s, c.at, cond, G);
      assert.deepEqual({ result: e.result, holds: e.holds }, c.want);
    });
  }

  it("with sustainedSeconds 0 the newest breaching sample holds at once", () => {
    const e = evaluateSamples(series(0, [95]), 10 * S, { ...cond, sustainedSeconds: 0 }, G);
    assert.deepEqual([e.result, e.holds, e.value], ["true", true, 95]);
  });

  it("operators compare as named (LESS_THAN_OR_EQUAL at the threshold breaches)", () => {
    const e = evaluateSamples(
      series(0, [90]),
      10 * S,
      { operator: "LESS_THAN_OR_EQUAL", threshold: 90, sustainedSeconds: 0 },
      G,
    );
    assert.equal(e.result, "true");
  });
});

describe("step()", () => {
  const T: Evaluation = { result: "true", holds: true, value: 95 };
  const P: Evaluation = { result: "true", holds: false, value: 95 };
  const F: Evaluation = { result: "false", holds: false, value: 10 };
  const N: Evaluation = { result: "no_data", holds: false, message: "no sample" };
  const E: Evaluation = { result: "error", holds: false, message: "store unavailable" };
  const run = (evs: Evaluation[]) => {
    let s: InstanceStatus = inactive;
    const seen: string[] = [];
    evs.forEach((ev, i) => {
      const r = step(s, ev, i * 30 * S);
      s = r.next;
      seen.push(`${s.state}${s.flag ? `/${s.flag}` : ""}${r.transition ? `!${r.transition}` : ""}`);
    });
    return seen;
  };
  const cases: { name: string; evs: Evaluation[]; want: string[] }[] = [
    {
      name: "pending, then firing once the breach holds, then resolved by an observed false",
      evs: [P, P, T, T, F],
      want: ["PENDING!PENDING", "PENDING", "FIRING!FIRED", "FIRING", "RESOLVED!RESOLVED"],
    },
    {
      name: "missing data keeps a firing instance firing, flagged, and never resolves it",
      evs: [T, N, N, N],
      want: ["FIRING!FIRED", "FIRING/NO_DATA", "FIRING/NO_DATA", "FIRING/NO_DATA"],
    },
    {
      name: "an evaluator error keeps a firing instance firing, flagged",
      evs: [T, E, T],
      want: ["FIRING!FIRED", "FIRING/ERROR", "FIRING"],
    },
    {
      name: "after no data, only an observed false resolves",
      evs: [T, N, F],
      want: ["FIRING!FIRED", "FIRING/NO_DATA", "RESOLVED!RESOLVED"],
    },
    {
      name: "missing data keeps a pending instance pending",
      evs: [P, N, T],
      want: ["PENDING!PENDING", "PENDING/NO_DATA", "FIRING!FIRED"],
    },
    {
      name: "a pending breach that ends clears to inactive",
      evs: [P, F],
      want: ["PENDING!PENDING", "INACTIVE!CLEARED"],
    },
    {
      name: "a resolved instance fires again as a new episode",
      evs: [T, F, T],
      want: ["FIRING!FIRED", "RESOLVED!RESOLVED", "FIRING!FIRED"],
    },
    {
      name: "no data on an inactive instance only flags it",
      evs: [N, F],
      want: ["INACTIVE/NO_DATA", "INACTIVE"],
    },
  ];
  for (const c of cases) it(c.name, () => assert.deepEqual(run(c.evs), c.want));

  it("a retired instance stays retired", () => {
    const r = step({ ...inactive, state: "RETIRED" }, T, 0);
    assert.equal(r.next.state, "RETIRED");
    assert.equal(r.transition, undefined);
  });
});

describe("inventory conditions", () => {
  const stop = { operator: "GREATER_THAN" as const, threshold: 0, sustainedSeconds: 0 };
  const tl = (events: VmTimeline["events"], maintenance: VmTimeline["maintenance"] = []): VmTimeline => ({
    events,
    initialState: "RUNNING",
    initialStopReason: "",
    maintenance,
  });

  it("an unexpected stop breaches; a user stop and a stop inside maintenance do not", () => {
    assert.equal(
      evaluateUnexpectedStop(
        tl([{ time: 100 * S, state: "STOPPED", stopReason: "UNEXPECTED" }]),
        200 * S,
        stop,
      ).holds,
      true,
    );
    assert.equal(
      evaluateUnexpectedStop(tl([{ time: 100 * S, state: "STOPPED", stopReason: "USER" }]), 200 * S, stop)
        .result,
      "false",
    );
    assert.equal(
      evaluateUnexpectedStop(
        tl(
          [{ time: 100 * S, state: "STOPPED", stopReason: "UNEXPECTED" }],
          [{ start: 50 * S, end: 300 * S }],
        ),
        200 * S,
        stop,
      ).result,
      "false",
    );
  });

  it("a restart after an unexpected stop is an observed recovery", () => {
    const t = tl([
      { time: 100 * S, state: "STOPPED", stopReason: "UNEXPECTED" },
      { time: 300 * S, state: "RUNNING", stopReason: "" },
    ]);
    assert.equal(evaluateUnexpectedStop(t, 400 * S, stop).result, "false");
  });

  const age = { operator: "GREATER_THAN" as const, threshold: 300, sustainedSeconds: 0 };
  it("telemetry age: a running VM silent for more than the threshold breaches; a stopped VM does not", () => {
    const obs = [0, 30 * S, 60 * S];
    assert.equal(evaluateTelemetryAge(tl([]), obs, 500 * S, age).result, "true");
    assert.equal(evaluateTelemetryAge(tl([]), obs, 200 * S, age).result, "false");
    const stopped = tl([{ time: 70 * S, state: "STOPPED", stopReason: "USER" }]);
    assert.equal(evaluateTelemetryAge(stopped, obs, 500 * S, age).result, "false");
  });

  it("telemetry age counts from the VM's start, not from a sample before it was stopped", () => {
    const t = tl([
      { time: 70 * S, state: "STOPPED", stopReason: "USER" },
      { time: 1000 * S, state: "RUNNING", stopReason: "" },
    ]);
    assert.equal(evaluateTelemetryAge(t, [0, 60 * S], 1200 * S, age).result, "false");
    assert.equal(evaluateTelemetryAge(t, [0, 60 * S], 1400 * S, age).result, "true");
  });
});
