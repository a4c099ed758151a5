import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp, type TestApp } from "../../testing/harness.ts";

for (const { dialect, skip } of await testDialects()) {
  describe(`readiness (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(dialect);
    });
    after(() => t?.close().catch(() => {}));

    it("is ready when the database and the metrics store answer, and says which one does not", async () => {
      const ok = await fetch(`${t.baseUrl}/readyz`);
      assert.equal(ok.status, 200);
      assert.deepEqual(await ok.json(), { status: "ready", checks: { database: "ok", metrics: "ok" } });
      await t.app.db.close();
      const down = await fetch(`${t.baseUrl}/readyz`);
      assert.equal(down.status, 503);
      const body = (await down.json()) as { status: string; checks: Record<string, string> };
      assert.equal(body.status, "unavailable");
      assert.notEqual(body.checks.database, "ok");
      assert.equal(body.checks.metrics, "ok");
      assert.equal((await fetch(`${t.baseUrl}/healthz`)).status, 200, "still alive");
    });
  });
}
