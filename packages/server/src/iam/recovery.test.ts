import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import { rejectsWith } from "../../testing/assert.ts";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";

/** Lost-secret recovery (docs/api.md): an uncertain create or rotate, recovered with the original request id and RecoverLostKey. */
for (const { dialect, skip } of await testDialects()) {
  describe(`lost-secret recovery (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    let saName: string;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("recover", ["web-1"]);
      saName = (
        await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
          parent: p.projectName,
          displayName: "scraper",
          template: "Metrics scraper",
        })
      ).name;
    });
    after(() => t?.close());

    const owner = () => t.clients(p.owner.session).keys;
    const works = async (secret: string) => {
      await t
        .clients(secret)
        .monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true });
    };
    const refused = (secret: string) =>
      rejectsWith(
        t.clients(secret).monitoring.listVMMonitoring({ projectName: p.projectName, inventoryOnly: true }),
        Code.Unauthenticated,
        "CREDENTIAL_REVOKED",
      );

    /** Recovery of `lostRequestId`; checks the retry of the recovery itself. Returns the new secret. */
    async function recover(
      lostRequestId: string,
      lostName: string,
    ): Promise<{ secret: string; name: string }> {
      const req = { lostRequestId, requestId: randomUUID() };
      const rec = await owner().recoverLostKey(req);
      assert.equal(rec.replayed, false);
      assert.equal(rec.revokedKey?.name, lostName);
      assert.equal(rec.revokedKey?.state, "REVOKED");
      assert.ok(rec.secret?.startsWith("svcs_"));
      assert.notEqual(rec.key?.name, lostName);
      const again = await owner().recoverLostKey(req);
      assert.equal(again.replayed, true);
      assert.equal(again.secret, undefined, "a retried recovery returns metadata, never the secret");
      assert.equal(again.key?.name, rec.key?.name);
      assert.equal(again.revokedKey?.name, lostName);
      return { secret: rec.secret!, name: rec.key!.name };
    }

    it("create: lost answer → retry → metadata → recovery → old key refused, new key works", async () => {
      const body = {
        parent: saName,
        displayName: "deploy",
        capabilities: ["monitoring.read"],
        expireDays: 30,
        requestId: randomUUID(),
      };
      const lost = await owner().createKey(body); // the caller never sees this answer
      const retry = await owner().createKey(body);
      assert.equal(retry.replayed, true);
      assert.equal(retry.secret, undefined);
      assert.equal(retry.key?.name, lost.key?.name);
      await works(lost.secret!); // still active until recovered
      const next = await recover(body.requestId, lost.key!.name);
      await refused(lost.secret!);
      await works(next.secret);
      const keys = (await owner().listKeys({ parent: saName })).keys;
      const replacement = keys.find((k) => k.name === next.name)!;
      assert.equal(replacement.displayName, "deploy");
      assert.deepEqual(replacement.capabilities, ["monitoring.read"]);
      assert.equal(Number(replacement.expireTimeUnix - replacement.createTimeUnix), 30 * 86_400);
      assert.equal(keys.find((k) => k.name === lost.key!.name)?.state, "REVOKED");
    });

    for (const overlapSeconds of [0, 3600]) {
      it(`rotate (overlap ${overlapSeconds}): lost answer → retry → metadata → recovery → old key refused, new key works`, async () => {
        const first = await owner().createKey({
          parent: saName,
          displayName: `rotating-${overlapSeconds}`,
          capabilities: ["monitoring.read"],
          requestId: randomUUID(),
        });
        const body = { name: first.key!.name, overlapSeconds, expireDays: 0, requestId: randomUUID() };
        const lost = await owner().rotateKey(body);
        const retry = await owner().rotateKey(body);
        assert.equal(retry.replayed, true);
        assert.equal(retry.secret, undefined);
        assert.equal(retry.key?.name, lost.key?.name);
        const next = await recover(body.requestId, lost.key!.name);
        await refused(lost.secret!);
        await works(next.secret);
        // The key rotated from keeps the end the rotation gave it.
        if (overlapSeconds === 0) await refused(first.secret!);
        else await works(first.secret!);
      });
    }

    it("recovers a lost recovery by its own request id, and never the same key twice", async () => {
      const body = {
        parent: saName,
        displayName: "twice",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      };
      const lost = await owner().createKey(body);
      const r1 = { lostRequestId: body.requestId, requestId: randomUUID() };
      const lostRecovery = await owner().recoverLostKey(r1);
      // A second recovery of the same key under a new id would leave r1's replacement active.
      const err = await rejectsWith(
        owner().recoverLostKey({ lostRequestId: body.requestId, requestId: randomUUID() }),
        Code.InvalidArgument,
        "INVALID_FIELD",
      );
      assert.match(err.rawMessage, new RegExp(`already recovered by request ${r1.requestId}`));
      const next = await recover(r1.requestId, lostRecovery.key!.name);
      await refused(lost.secret!);
      await refused(lostRecovery.secret!);
      await works(next.secret);
    });

    it("recovers a key once when two recoveries under different ids race", async () => {
      const body = {
        parent: saName,
        displayName: "race",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      };
      await owner().createKey(body);
      const results = await Promise.allSettled(
        [randomUUID(), randomUUID(), randomUUID()].map((requestId) =>
          owner().recoverLostKey({ lostRequestId: body.requestId, requestId }),
        ),
      );
      assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
      for (const r of results) {
        if (r.status === "rejected") assert.match(String(r.reason), /already recovered by request/);
      }
      const active = (await owner().listKeys({ parent: saName })).keys.filter(
        (k) => k.displayName === "race" && k.state === "ACTIVE",
      );
      assert.equal(active.length, 1, "one replacement, and the lost key revoked");
    });

    it("refuses an unknown request id, another user's, and a key credential", async () => {
      await rejectsWith(
        owner().recoverLostKey({ lostRequestId: randomUUID(), requestId: randomUUID() }),
        Code.NotFound,
        "NOT_FOUND",
      );
      const body = {
        parent: p.projectName,
        displayName: "mine",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      };
      const personal = await owner().createKey(body);
      const other = await t.seedProject("recover-other", []);
      await rejectsWith(
        t
          .clients(other.owner.session)
          .keys.recoverLostKey({ lostRequestId: body.requestId, requestId: randomUUID() }),
        Code.NotFound,
        "NOT_FOUND",
      );
      await rejectsWith(
        t
          .clients(personal.secret)
          .keys.recoverLostKey({ lostRequestId: body.requestId, requestId: randomUUID() }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejectsWith(
        owner().recoverLostKey({ lostRequestId: body.requestId, requestId: body.requestId }),
        Code.InvalidArgument,
        "INVALID_FIELD",
      );
    });
  });
}
