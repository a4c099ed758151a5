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
});
