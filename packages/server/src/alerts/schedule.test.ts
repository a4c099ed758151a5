import assert from "node:assert/strict";
import { describe, it } from "node:test";
import pino from "pino";
import { CycleSchedule, periodic } from "./schedule.ts";

const log = pino({ level: "silent" });

/** Work whose cycles and applies finish when released, recording what ran and whether two overlapped. */
function work() {
  const ran: string[] = [];
  let running = 0;
  let overlapped = false;
  const pending: (() => void)[] = [];
  const run = async (what: string) => {
    running++;
    if (running > 1) overlapped = true;
    ran.push(what);
    await new Promise<void>((r) => pending.push(r));
    running--;
  };
  return {
    ran,
    overlapped: () => overlapped,
    /** Lets every started run finish. */
    release: async () => {
      while (pending.length > 0) {
        pending.shift()?.();
        await new Promise((r) => setImmediate(r));
      }
    },
    cycle: async (atMs: number) => {
      await run(`cycle ${atMs}`);
      return atMs;
    },
    apply: async (atMs: number) => {
      await run(`apply ${atMs}`);
      return 1;
    },
  };
}

const tickUntil = async (cond: () => boolean) => {
  for (let i = 0; i < 100 && !cond(); i++) await new Promise((r) => setImmediate(r));
};

describe("CycleSchedule", () => {
  it("skips a tick while the previous cycle runs, instead of queueing it", async () => {
    const w = work();
    const s = new CycleSchedule({ now: () => 7, log, intervalMs: 30_000 }, w);
    const first = s.tick(1);
    await tickUntil(() => w.ran.length === 1);
    assert.equal(await s.tick(2), undefined);
    await w.release();
    assert.equal(await first, 1);
    assert.deepEqual(w.ran, ["cycle 1"]);
  });

  it("runs cycles and applies one at a time, in order", async () => {
    const w = work();
    const s = new CycleSchedule({ now: () => 7, log, intervalMs: 30_000 }, w);
    const runs = [s.cycle(1, undefined), s.serial(() => w.apply(2)), s.cycle(3, undefined)];
    for (let i = 0; i < 3; i++) {
      await tickUntil(() => w.ran.length === i + 1);
      await w.release();
    }
    assert.deepEqual(await Promise.all(runs), [1, 1, 3]);
    assert.deepEqual(w.ran, ["cycle 1", "apply 2", "cycle 3"]);
    assert.equal(w.overlapped(), false);
  });

  it("coalesces nudges into one apply; stop waits for the running work", async () => {
    const w = work();
    const s = new CycleSchedule({ now: () => 7, log, intervalMs: 30_000 }, w);
    s.nudge();
    s.nudge();
    await tickUntil(() => w.ran.length === 1);
    let stopped = false;
    const stop = s.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(stopped, false, "stop waits for the apply");
    await w.release();
    await stop;
    assert.deepEqual(w.ran, ["apply 7"]);
  });
});

describe("periodic()", () => {
  it("runs at most once per period of the times offered, and a failure waits for the next period", async () => {
    const at: number[] = [];
    let fail = true;
    const p = periodic(
      1000,
      async (t) => {
        at.push(t);
        if (fail) throw new Error("no");
      },
      log,
      "test purge",
    );
    await p(5000);
    fail = false;
    await p(5500);
    await p(6000);
    await p(6999);
    await p(7000);
    assert.deepEqual(at, [5000, 6000, 7000]);
  });
});
