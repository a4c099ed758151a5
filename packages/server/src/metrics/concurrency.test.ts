import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SvcError } from "../errors.ts";
import { createProjectLimiter } from "./concurrency.ts";

function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => {
    open = r;
  });
  return { p, open };
}

describe("createProjectLimiter()", () => {
  it("runs up to the cap, queues a few, refuses the rest with Retry-After", async () => {
    const l = createProjectLimiter({ maxConcurrent: 2, maxQueued: 1, maxWaitMs: 60_000 });
    const g = gate();
    const running = [l.run("a", () => g.p), l.run("a", () => g.p)];
    const queued = l.run("a", async () => "third");
    assert.deepEqual(l.stats("a"), { running: 2, queued: 1 });
    await assert.rejects(
      l.run("a", async () => "fourth"),
      (e: unknown) => {
        assert.ok(e instanceof SvcError);
        assert.equal(e.code, "resource_exhausted");
        assert.equal(e.retryAfterSeconds, 2);
        return true;
      },
    );
    // Another project is not affected.
    assert.equal(await l.run("b", async () => "other"), "other");
    g.open();
    await Promise.all(running);
    assert.equal(await queued, "third");
    assert.deepEqual(l.stats("a"), { running: 0, queued: 0 });
  });

  it("refuses a waiter after the longest wait, and frees slots when a query throws", async () => {
    const l = createProjectLimiter({ maxConcurrent: 1, maxQueued: 1, maxWaitMs: 10 });
    const g = gate();
    const first = l.run("a", () => g.p);
    await assert.rejects(
      l.run("a", async () => 1),
      /waited 10 ms/,
    );
    g.open();
    await first;
    await assert.rejects(
      l.run("a", async () => Promise.reject(new Error("boom"))),
      /boom/,
    );
    assert.equal(await l.run("a", async () => 2), 2);
  });

  it("lets another project run at once while one project is at its cap with a full queue (issue 19)", async () => {
    const l = createProjectLimiter({ maxConcurrent: 2, maxQueued: 2, maxWaitMs: 60_000 });
    const g = gate();
    const order: string[] = [];
    const busy = [1, 2, 3, 4].map((k) => l.run("a", () => g.p.then(() => order.push(`a${k}`))));
    assert.deepEqual(l.stats("a"), { running: 2, queued: 2 });
    // Past its queue, the busy project is refused at once: a 429, never a wait or a 5xx.
    await assert.rejects(
      l.run("a", async () => 5),
      (e: unknown) => e instanceof SvcError && e.code === "resource_exhausted",
    );
    // The other project neither queues nor waits behind it.
    const light = l.run("b", async () => order.push("b"));
    assert.deepEqual(l.stats("b"), { running: 1, queued: 0 });
    await light;
    assert.deepEqual(order, ["b"]);
    g.open();
    await Promise.all(busy);
    assert.deepEqual(order, ["b", "a1", "a2", "a3", "a4"]);
  });
});
