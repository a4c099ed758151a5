import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { pushRemoteWrite } from "@svc/remotewrite";
import { testDialects } from "../../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { parseVmName } from "../inventory/names.ts";
import { AGENT_TOKEN_GRACE_MS, issueAgentToken } from "./credentials.ts";

for (const { dialect, skip } of await testDialects()) {
  describe(`re-issuing a guest-agent token (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("tok", ["vm-a", "vm-b"]);
    });
    after(() => t?.close());

    const status = async (token: string) =>
      (
        await pushRemoteWrite(`${t.baseUrl}/v1/ingest/prometheus/api/v1/write`, token, {
          timeseries: [],
          metadata: [],
        })
      ).status;
    const issue = (vm: string) => issueAgentToken(t.app.db.db, parseVmName(vm), t.clock.now());

    it("keeps the running agent's token until the new one is first used", async () => {
      const running = await issue(p.vms[0]);
      assert.equal(await status(running), 204);
      const fresh = await issue(p.vms[0]);
      // Until the new token is pasted, the running agent still delivers.
      assert.equal(await status(running), 204);
      t.clock.advance(3600_000);
      assert.equal(await status(running), 204);
      // The new token's first use ends the old one at once; the new one goes on working.
      assert.equal(await status(fresh), 204);
      assert.equal(await status(running), 401);
      assert.equal(await status(fresh), 204);
    });

    it("ends the previous token after the grace period when the new one is never used", async () => {
      const running = await issue(p.vms[1]);
      assert.equal(await status(running), 204);
      const unused = await issue(p.vms[1]);
      t.clock.advance(AGENT_TOKEN_GRACE_MS - 1000);
      assert.equal(await status(running), 204);
      // Issuing again does not extend the running token's grace period.
      const third = await issue(p.vms[1]);
      t.clock.advance(1000);
      assert.equal(await status(running), 401);
      // The newest works; its first use ends the unused one's grace period too.
      assert.equal(await status(third), 204);
      assert.equal(await status(unused), 401, "the newest token's first use ended the older ones");
    });

    it("a token's first use stops only tokens issued before it, of its own VM", async () => {
      const a = await issue(p.vms[0]);
      const b = await issue(p.vms[0]); // same millisecond: issue order still decides
      const other = await issue(p.vms[1]);
      assert.equal(await status(a), 204, "a is older than b: its first use leaves b valid");
      assert.equal(await status(b), 204);
      assert.equal(await status(a), 401);
      assert.equal(await status(other), 204);
    });
  });
}
