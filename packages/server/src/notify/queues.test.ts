import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { DestinationQueues, type QueueHooks } from "./queues.ts";

interface Item {
  readonly key: string;
  readonly n: number;
}
interface State {
  reads: number;
}

/**
 * An in-memory outbox: `due` items are claimed in order, `batch` at a time, leaving out what the pool
 * asks; each attempt takes `ms(key)`. Records what happened for the assertions.
 */
function outbox(due: Item[], o: { batch: number; ms?: (key: string) => number }) {
  const log = {
    attempts: [] as string[],
    leftOut: [] as string[][],
    inFlight: new Map<string, number>(),
    maxInFlight: 0,
    refreshed: 0,
  };
  let inFlight = 0;
  const hooks: QueueHooks<Item, State> = {
    async claim(leaveOut) {
      await sleep(1);
      const skip = leaveOut();
      log.leftOut.push(skip);
      const items: Item[] = [];
      for (let i = 0; i < due.length && items.length < o.batch; )
        if (skip.includes(due[i].key)) i++;
        else items.push(...due.splice(i, 1));
      return { items, exhausted: items.length < o.batch };
    },
    keyOf: (i) => i.key,
    async readState(keys) {
      return new Map(keys.map((k) => [k, { reads: 1 }]));
    },
    refresh(st, fresh) {
      st.reads += fresh.reads;
      log.refreshed++;
    },
    async attempt(_q, item) {
      assert.equal(log.inFlight.get(item.key) ?? 0, 0, `two attempts to ${item.key} at once`);
      log.inFlight.set(item.key, 1);
      log.maxInFlight = Math.max(log.maxInFlight, ++inFlight);
      await sleep(o.ms?.(item.key) ?? 0);
      log.attempts.push(`${item.key}${item.n}`);
      log.inFlight.set(item.key, 0);
      inFlight--;
      return true;
    },
  };
  return { hooks, log };
}

/** A promise opened by hand, or by a guard after 10 s so that a test fails instead of hanging. */
function gate() {
  let open = () => {};
  const promise = new Promise<void>((r) => {
    open = r;
  });
  const guard = setTimeout(open, 10_000);
  return { promise, open: () => open(), close: () => clearTimeout(guard) };
}

const items = (key: string, n: number, from = 1) =>
  Array.from({ length: n }, (_, i) => ({ key, n: from + i }));
const of = (attempts: string[], key: string) => attempts.filter((a) => a.startsWith(key));

describe("DestinationQueues", () => {
  it("attempts every claimed item once, each destination's in order and one at a time, at most `concurrency` at once", async () => {
    const due = [...items("a", 5), ...items("b", 5), ...items("c", 5)].sort((x, y) => x.n - y.n);
    const { hooks, log } = outbox(due, { batch: 4, ms: () => 2 });
    const r = await new DestinationQueues(hooks, { concurrency: 2, share: 2, pollIntervalMs: 1_000 }).run();
    assert.deepEqual(r, { released: [] });
    assert.equal(log.attempts.length, 15);
    for (const k of ["a", "b", "c"])
      assert.deepEqual(
        of(log.attempts, k),
        items(k, 5).map((i) => `${k}${i.n}`),
      );
    assert.equal(log.maxInFlight, 2);
  });

  it("a slow destination holds up only itself", async () => {
    const due = [...items("slow", 3), ...items("fast", 20)];
    const { hooks, log } = outbox(due, { batch: 8 });
    // The slow destination's first attempt ends only once every fast one did (or after a guard, so a
    // pool that waits for it fails the assertion instead of hanging).
    const slow = gate();
    const attempt = hooks.attempt;
    hooks.attempt = async (q, item) => {
      if (item.key === "slow" && item.n === 1) await slow.promise;
      const r = await attempt(q, item);
      if (of(log.attempts, "fast").length === 20) slow.open();
      return r;
    };
    await new DestinationQueues(hooks, { concurrency: 2, share: 4, pollIntervalMs: 1_000 }).run();
    slow.close();
    assert.equal(log.attempts.length, 23);
    assert.equal(
      log.attempts[20],
      "slow1",
      `the fast destination waited for the slow one: ${log.attempts.join(" ")}`,
    );
  });

  it("leaves a destination whose queue holds a full share out of the next claim, and claims for it again once it is done", async () => {
    const due = [...items("slow", 6), ...items("b", 3)];
    const { hooks, log } = outbox(due, { batch: 4 });
    // The slow destination's first attempt waits for the second claim (or a guard).
    const second = gate();
    const claim = hooks.claim;
    hooks.claim = async (leaveOut) => {
      const r = await claim(leaveOut);
      if (log.leftOut.length === 2) second.open();
      return r;
    };
    const attempt = hooks.attempt;
    hooks.attempt = async (q, item) => {
      if (item.key === "slow" && item.n === 1) await second.promise;
      return attempt(q, item);
    };
    await new DestinationQueues(hooks, { concurrency: 2, share: 2, pollIntervalMs: 1_000 }).run();
    second.close();
    assert.deepEqual(log.leftOut[0], [], "nothing is open at the first claim");
    assert.deepEqual(log.leftOut[1], ["slow"], "a queue holding a full share is left out");
    assert.deepEqual(
      of(log.attempts, "slow"),
      items("slow", 6).map((i) => `slow${i.n}`),
    );
    assert.equal(log.attempts.length, 9);
  });

  it("a claim for an open queue appends to it and refreshes its state instead of starting another", async () => {
    const due = [...items("a", 3), ...items("b", 1), ...items("a", 3, 4)];
    const { hooks, log } = outbox(due, { batch: 4 });
    // a's first attempt waits until the second claim appended to its queue (or a guard).
    const appended = gate();
    const refresh = hooks.refresh;
    hooks.refresh = (st, fresh) => {
      refresh(st, fresh);
      appended.open();
    };
    const states: State[] = [];
    const attempt = hooks.attempt;
    hooks.attempt = async (q, item) => {
      if (item.key === "a" && item.n === 1) await appended.promise;
      if (q.key === "a" && !states.includes(q.state)) states.push(q.state);
      return attempt(q, item);
    };
    await new DestinationQueues(hooks, { concurrency: 2, share: 8, pollIntervalMs: 1_000 }).run();
    appended.close();
    assert.deepEqual(of(log.attempts, "a"), ["a1", "a2", "a3", "a4", "a5", "a6"]);
    assert.equal(log.refreshed, 1, "the open queue's state was not refreshed");
    assert.deepEqual(states, [{ reads: 2 }], "one queue for a, its state brought up to the second read");
  });

  it("an item the attempt declines is released, the rest go on", async () => {
    const { hooks, log } = outbox(items("a", 4), { batch: 8 });
    const attempt = hooks.attempt;
    hooks.attempt = async (q, item) => (item.n === 2 ? false : attempt(q, item));
    const r = await new DestinationQueues(hooks, { concurrency: 2, share: 8, pollIntervalMs: 1_000 }).run();
    assert.deepEqual(r.released, [{ key: "a", n: 2 }]);
    assert.deepEqual(log.attempts, ["a1", "a3", "a4"]);
  });

  it("after a failed attempt the pool stops: the failure and every unattempted item come back", async () => {
    const due = [...items("a", 3), ...items("b", 3)];
    const { hooks, log } = outbox(due, { batch: 8 });
    const attempt = hooks.attempt;
    hooks.attempt = async (q, item) => {
      if (item.key === "a" && item.n === 2) throw new Error("database gone");
      return attempt(q, item);
    };
    const r = await new DestinationQueues(hooks, { concurrency: 1, share: 8, pollIntervalMs: 1_000 }).run();
    assert.match(String(r.failure?.err), /database gone/);
    assert.deepEqual(log.attempts, ["a1"]);
    assert.deepEqual(
      [...r.released].sort((x, y) => x.key.localeCompare(y.key) || x.n - y.n),
      [{ key: "a", n: 2 }, { key: "a", n: 3 }, ...items("b", 3)],
    );
  });

  it("a failed claim ends the pass with that failure", async () => {
    const { hooks } = outbox(items("a", 2), { batch: 8 });
    hooks.claim = async () => {
      throw new Error("claim failed");
    };
    const r = await new DestinationQueues(hooks, { concurrency: 2, share: 8, pollIntervalMs: 1_000 }).run();
    assert.match(String(r.failure?.err), /claim failed/);
    assert.deepEqual(r.released, []);
  });

  it("an idle worker claims again after a poll interval while a slow queue holds the pass", async () => {
    const due = items("slow", 1);
    const { hooks, log } = outbox(due, { batch: 8 });
    // The slow attempt ends only once the late item was attempted (or after a guard).
    const slow = gate();
    const attempt = hooks.attempt;
    hooks.attempt = async (q, item) => {
      if (item.key === "slow") {
        // Becomes due while the slow attempt runs, after the pass found nothing more.
        due.push({ key: "late", n: 1 });
        await slow.promise;
      }
      const r = await attempt(q, item);
      if (item.key === "late") slow.open();
      return r;
    };
    await new DestinationQueues(hooks, { concurrency: 2, share: 8, pollIntervalMs: 20 }).run();
    slow.close();
    assert.deepEqual(log.attempts, ["late1", "slow1"]);
  });
});
