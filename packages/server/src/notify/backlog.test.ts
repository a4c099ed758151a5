/**
 * The operator's view of the notification backlog (svc.admin.v1.OperationsService/ListDeliveryBacklog):
 * across projects, the destinations holding most, the deliveries due longest first; refused to tenants.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { testDialects } from "../../testing/dialects.ts";
import { startTestApp } from "../../testing/harness.ts";

const S = 1000;

for (const { dialect, skip } of await testDialects()) {
  describe(`the operator's delivery backlog (${dialect.name})`, { skip }, () => {
    it("totals, destinations by pending, deliveries due longest first with their attempts", async () => {
      // The dispatcher does not run: what is queued stays pending, as behind a stuck notifier.
      const t = await startTestApp(dialect, {
        notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
      });
      try {
        const empty = await t.admin.operations.listDeliveryBacklog({});
        assert.equal(empty.pending, 0n);
        assert.equal(empty.due, 0n);
        assert.equal(empty.oldestDueAgeSeconds, undefined, "nothing due is absent, not 0");

        const destination = async (project: string, session: string, displayName: string) =>
          (
            await t.clients(session).destinations.createDestination({
              projectName: `projects/${project}`,
              displayName,
              kind: "WEBHOOK",
              url: `https://127.0.0.1:9/${displayName}`,
              requestId: randomUUID(),
            })
          ).destination?.name ?? "";
        const a = await t.seedProject("backlog-a", []);
        const b = await t.seedProject("backlog-b", []);
        const slow = await destination("backlog-a", a.owner.session, "slow");
        const other = await destination("backlog-b", b.owner.session, "other");
        const send = (session: string, name: string) =>
          t.clients(session).destinations.sendTestNotification({ name });
        await send(b.owner.session, other);
        t.clock.advance(60 * S);
        for (let i = 0; i < 3; i++) await send(a.owner.session, slow);
        // Every attempt fails (nothing listens on port 9): each is scheduled for a retry, then due again.
        await t.app.dispatcher.runOnce(t.clock.ms);
        t.clock.advance(3_600 * S);

        const res = await t.admin.operations.listDeliveryBacklog({ pageSize: 3 });
        assert.equal(res.pending, 4n);
        assert.equal(res.due, 4n);
        assert.deepEqual(
          res.destinations.map((d) => [d.destination, d.kind, d.pending, d.due]),
          [
            [slow, "WEBHOOK", 3n, 3n],
            [other, "WEBHOOK", 1n, 1n],
          ],
        );
        // Top 3 of 4, the one due longest first, each with its failed attempt saying why (classified, as the tenant sees it; the raw error is in the log).
        assert.equal(res.deliveries.length, 3);
        for (const d of res.deliveries) {
          assert.equal(d.state, "PENDING");
          assert.match(d.attempts.at(-1)?.detail ?? "", /^connection refused$/);
        }
        const next = res.deliveries.map((d) => d.nextAttemptTimeUnix);
        assert.deepEqual(
          next,
          [...next].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)),
        );
        const age = BigInt(t.clock.ms / S) - next[0];
        const got = res.oldestDueAgeSeconds;
        assert.ok(got !== undefined && got >= age - 1n && got <= age, `${got} vs ${age}`);

        // Bad input names the field; tenants are refused.
        await assert.rejects(t.admin.operations.listDeliveryBacklog({ pageSize: 501 }), (e: unknown) => {
          assert.ok(e instanceof ConnectError);
          assert.equal(e.code, Code.InvalidArgument);
          assert.match(e.message, /pageSize/);
          return true;
        });
        await assert.rejects(
          t.clients(a.owner.session).admin.operations.listDeliveryBacklog({}),
          (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied,
        );
      } finally {
        await t.close();
      }
    });
  });
}
