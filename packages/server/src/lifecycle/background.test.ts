import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { BackgroundWorker, Periodic } from "./background.ts";

const turn = () => new Promise((r) => setImmediate(r));
const never = (err: unknown) => assert.fail(`unexpected error: ${String(err)}`);

describe("BackgroundWorker", () => {
  it("nudges before the next turn make one call", async () => {
    let calls = 0;
    const w = new BackgroundWorker({
      intervalMs: 60_000,
      onNudge: async () => calls++,
      onError: never,
    });
    w.nudge();
    w.nudge();
    w.nudge();
    assert.equal(calls, 0, "not at once: on the next turn");
    await turn();
    assert.equal(calls, 1);
    w.nudge();
    await turn();
    assert.equal(calls, 2);
  });

  it("serial runs one at a time, in call order, whatever the one before came to", async () => {
    const w = new BackgroundWorker({ intervalMs: 60_000, onNudge: async () => {}, onError: never });
    const log: string[] = [];
    let inside = 0;
    const job =
      (name: string, ms: number, fail = false) =>
      async () => {
        inside++;
        assert.equal(inside, 1, "two runs at once");
        log.push(`${name}>`);
        await sleep(ms);
        log.push(`<${name}`);
        inside--;
        if (fail) throw new Error(name);
        return name;
      };
    const a = w.serial(job("a", 20, true));
    const b = w.serial(job("b", 1));
    const c = w.serial(job("c", 5));
    await assert.rejects(a, /a/);
    assert.equal(await b, "b");
    assert.equal(await c, "c");
    assert.deepEqual(log, ["a>", "<a", "b>", "<b", "c>", "<c"]);
  });

  it("a failed nudge goes to onError, and the worker goes on", async () => {
    const errors: unknown[] = [];
    let n = 0;
    const w: BackgroundWorker = new BackgroundWorker({
      intervalMs: 60_000,
      onNudge: (): Promise<void> =>
        w.serial(async () => {
          if (++n === 1) throw new Error("boom");
        }),
      onError: (err) => errors.push(err),
    });
    w.nudge();
    await turn();
    await w.stop();
    assert.equal((errors[0] as Error).message, "boom");
    w.nudge();
    await turn();
    await w.stop();
    assert.equal(n, 2);
    assert.equal(errors.length, 1);
  });

  it("start nudges every interval until stop, which waits for the run in flight", async () => {
    let runs = 0;
    let ended = 0;
    const w: BackgroundWorker = new BackgroundWorker({
      intervalMs: 10,
      onNudge: (): Promise<void> =>
        w.serial(async () => {
          runs++;
          await sleep(30);
          ended++;
        }),
      onError: never,
    });
    assert.equal(w.start(), true);
    assert.equal(w.start(), false, "a second start does nothing");
    assert.equal(w.started, true);
    while (runs === 0) await sleep(5);
    await w.stop();
    assert.equal(w.started, false);
    assert.equal(ended, runs, "stop resolved with a run still going");
    const after = runs;
    await sleep(40);
    assert.ok(runs <= after + 1, "the timer went on after stop");
  });

  it("onTimer replaces the nudge on the timer", async () => {
    let ticks = 0;
    let nudges = 0;
    const w = new BackgroundWorker({
      intervalMs: 5,
      onTimer: () => ticks++,
      onNudge: async () => nudges++,
      onError: never,
    });
    w.start();
    while (ticks < 2) await sleep(5);
    await w.stop();
    assert.equal(nudges, 0);
  });
});

describe("Periodic", () => {
  it("runs at most once per period of the caller's clock, from the first call past one period", async () => {
    const H = 3_600_000;
    const ran: number[] = [];
    const p = new Periodic(H, never);
    for (const at of [H - 1, H, H + 1, 2 * H - 1, 2 * H, 5 * H, 5 * H + 10])
      await p.run(at, async () => ran.push(at));
    assert.deepEqual(ran, [H, 2 * H, 5 * H]);
  });

  it("hands a failure to onError and still waits a period before the next run", async () => {
    const errors: unknown[] = [];
    const p = new Periodic(100, (err) => errors.push(err));
    await p.run(1_000, async () => {
      throw new Error("purge failed");
    });
    let again = false;
    await p.run(1_050, async () => {
      again = true;
    });
    assert.equal((errors[0] as Error).message, "purge failed");
    assert.equal(again, false);
  });
});
