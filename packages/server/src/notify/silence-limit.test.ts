import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { SvcError } from "@svc/sdk";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";

/** Issue 41: silences per project are limited as rules and destinations are. */
for (const { dialect, skip } of await testDialects()) {
  describe(`silences per project (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect, {
        notify: { dispatcherAutoStart: false, options: { maxSilencesPerProject: 3 } },
      });
      p = await t.seedProject("muted", ["vm-1"]);
    });
    after(() => t?.close());

    it("refuses a silence past the limit of pending and active ones (SILENCE_LIMIT_EXCEEDED); an expired one frees its place", async () => {
      const owner = t.clients(p.owner.session);
      const now = () => BigInt(Math.floor(t.clock.ms / 1000));
      const create = () =>
        owner.silences.createSilence({
          projectName: p.projectName,
          requestId: randomUUID(),
          comment: "maintenance",
          vmNames: [p.vms[0]],
          startTimeUnix: now(),
          endTimeUnix: now() + 3600n,
        });
      const made = [await create(), await create(), await create()];
      try {
        await create();
        assert.fail("a fourth silence was accepted");
      } catch (err) {
        const e = SvcError.fromError(err);
        assert.equal(e.reason, "SILENCE_LIMIT_EXCEEDED", e.message);
        assert.deepEqual([e.info.limit, e.info.count], ["3", "3"]);
      }
      await owner.silences.expireSilence({ name: made[0].name });
      t.clock.advance(1000);
      assert.ok((await create()).name, "an expired silence no longer counts");
      // Another project has its own count.
      const other = await t.seedProject("loud", ["vm-1"]);
      const o = t.clients(other.owner.session);
      const s = await o.silences.createSilence({
        projectName: other.projectName,
        requestId: randomUUID(),
        comment: "maintenance",
        vmNames: [other.vms[0]],
        startTimeUnix: now(),
        endTimeUnix: now() + 3600n,
      });
      assert.ok(s.name);
    });
  });
}
