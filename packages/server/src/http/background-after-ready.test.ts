// Background work starts once the service is past ready, not at listen: after its first /readyz answer
// of 200 (not a 503), or BACKGROUND_START_FALLBACK_MS after listening when nothing asks; never after
// close (docs/decisions.md, "Background work starts after ready"). SQLite only: the rule is the app's.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createStandaloneApp } from "../../testing/standalone-app.ts";
import { BACKGROUND_START_FALLBACK_MS } from "../app.ts";

const start = createStandaloneApp;

const turn = () => new Promise((r) => setTimeout(r, 20));

describe("background work starts after ready (app.afterReady)", () => {
  it("waits for the first /readyz 200, not listen or a 503, and runs later registrations at once", async () => {
    const { app, base, remove } = await start();
    try {
      const started: string[] = [];
      app.afterReady(() => started.push("before listen"));
      await app.server.listen({ host: "127.0.0.1", port: Number(new URL(base).port) });
      await turn();
      assert.equal(started.length, 0, "listening is not ready");
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      await turn();
      assert.equal(started.length, 0, "liveness is not readiness");
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      await turn();
      assert.deepEqual(started, ["before listen"], "started after the first ready answer");
      app.afterReady(() => started.push("after ready"));
      assert.deepEqual(started, ["before listen", "after ready"], "past ready: at once");
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      await turn();
      assert.equal(started.length, 2, "each start runs once");
    } finally {
      await app.close();
      remove();
    }
  });

  it("does not start on a 503; starts on its own after the fallback delay when nothing asks", async () => {
    const { app, base, remove } = await start();
    try {
      let startedAt: number | undefined;
      app.afterReady(() => {
        startedAt = performance.now();
      });
      const listened = performance.now();
      await app.server.listen({ host: "127.0.0.1", port: Number(new URL(base).port) });
      await app.db.close();
      assert.equal((await fetch(`${base}/readyz`)).status, 503);
      await turn();
      assert.equal(startedAt, undefined, "not ready: nothing starts");
      await new Promise((r) => setTimeout(r, BACKGROUND_START_FALLBACK_MS + 200));
      assert.ok(startedAt !== undefined, "started after the fallback delay");
      assert.ok(startedAt - listened >= BACKGROUND_START_FALLBACK_MS - 50);
    } finally {
      await app.close().catch(() => {});
      remove();
    }
  });

  it("never starts once closing", async () => {
    const { app, base, remove } = await start();
    let started = false;
    app.afterReady(() => {
      started = true;
    });
    await app.server.listen({ host: "127.0.0.1", port: Number(new URL(base).port) });
    await app.close();
    app.afterReady(() => {
      started = true;
    });
    await new Promise((r) => setTimeout(r, BACKGROUND_START_FALLBACK_MS + 200));
    assert.equal(started, false);
    remove();
  });
});
