import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Client, Code } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { rejectsWith } from "../../../testing/assert.ts";
import { testDialects } from "../../../testing/dialects.ts";
import { defaultRun, LocalGitHubOidc, type RunIdentity } from "../../../testing/github-oidc.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../testing/harness.ts";

/**
 * Two rules of CI trust (docs/github-actions.md) that exchange.test.ts does not reach: a trust
 * observed from a reusable workflow is bound to that workflow at that ref, and the pairing code works
 * once, and not at all after the trust is disabled or deleted.
 */
for (const { dialect, skip } of await testDialects()) {
  describe(`CI trust: reusable workflow and pairing code (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let oidc: LocalGitHubOidc;
    let p: SeededProject;
    let owner: Client<typeof AutomationService>;
    let anon: Client<typeof AutomationService>;
    let saName: string;

    before(async () => {
      oidc = await LocalGitHubOidc.start(() => t.clock.now());
      t = await startTestApp(dialect, {
        ci: { defaultIssuer: oidc.issuer, perTrustBurst: 1e6, perSourceBurst: 1e6 },
      });
      p = await t.seedProject("acme", ["web-1"]);
      owner = t.clients(p.owner.session).client(AutomationService);
      anon = t.clients().client(AutomationService);
      saName = (
        await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
          parent: p.projectName,
          displayName: "deployer",
          template: "Metrics scraper",
        })
      ).name;
    });
    after(async () => {
      await t?.close();
      await oidc?.close();
    });

    const start = (run: RunIdentity = defaultRun) =>
      owner.startCITrustSetup({
        serviceAccount: saName,
        intended: {
          repository: run.repository,
          workflow: run.workflow_path,
          branch: run.ref.replace("refs/heads/", ""),
          environment: "",
          event: run.event_name,
        },
      });
    const verify = async (s: Awaited<ReturnType<typeof start>>, run: RunIdentity = defaultRun) =>
      anon.verifyCITrustSetup({
        setupId: s.setupId,
        pairingCode: s.pairingCode,
        assertion: await oidc.token(s.audience, {}, run),
      });
    const exchange = async (trustName: string, audience: string, run: RunIdentity) =>
      anon.exchangeCIToken({ trustName, assertion: await oidc.token(audience, {}, run) });
    const mismatch = async (p: Promise<unknown>, claim: string) => {
      const e = await rejectsWith(p, Code.PermissionDenied, "CI_CLAIM_MISMATCH");
      assert.equal(e.findDetails(ErrorInfoSchema)[0]?.metadata.claim, claim, e.message);
    };

    describe("a trust observed from a reusable workflow", () => {
      const shared = "acme/shared-workflows/.github/workflows/deploy.yml";
      const viaShared: RunIdentity = { ...defaultRun, job_workflow_ref: `${shared}@refs/tags/v1` };
      let trust: { name: string; audience: string };
      before(async () => {
        const s = await start(viaShared);
        const verified = await verify(s, viaShared);
        assert.equal(verified.observed?.jobWorkflowRef, `${shared}@refs/tags/v1`);
        await owner.approveCITrust({ name: verified.trustName, permissions: ["monitoring.read"] });
        trust = { name: verified.trustName, audience: s.audience };
      });

      it("accepts the same reusable workflow at the same ref", async () => {
        const r = await exchange(trust.name, trust.audience, viaShared);
        assert.equal(r.projectName, p.projectName);
      });
      it("refuses another repository's reusable workflow of the same file name", async () => {
        const other = {
          ...viaShared,
          job_workflow_ref: "evil/shared-workflows/.github/workflows/deploy.yml@refs/tags/v1",
        };
        await mismatch(exchange(trust.name, trust.audience, other), "job_workflow_ref");
      });
      it("refuses another reusable workflow of the same repository", async () => {
        const other = {
          ...viaShared,
          job_workflow_ref: "acme/shared-workflows/.github/workflows/release.yml@refs/tags/v1",
        };
        await mismatch(exchange(trust.name, trust.audience, other), "job_workflow_ref");
      });
      it("refuses the same reusable workflow at another ref (it is pinned)", async () => {
        const moved = { ...viaShared, job_workflow_ref: `${shared}@refs/heads/main` };
        await mismatch(exchange(trust.name, trust.audience, moved), "job_workflow_ref");
      });
      it("refuses the calling workflow running its own jobs, without the reusable workflow", async () => {
        await mismatch(exchange(trust.name, trust.audience, defaultRun), "job_workflow_ref");
      });
      it("a trust observed without one refuses an assertion from a reusable workflow", async () => {
        const s = await start();
        const verified = await verify(s);
        await owner.approveCITrust({ name: verified.trustName, permissions: ["monitoring.read"] });
        await mismatch(exchange(verified.trustName, s.audience, viaShared), "job_workflow_ref");
        const ok = await exchange(verified.trustName, s.audience, defaultRun);
        assert.equal(ok.projectName, p.projectName);
      });
    });

    describe("the pairing code is single-use", () => {
      const spent = (p: Promise<unknown>) => rejectsWith(p, Code.PermissionDenied, "CI_PAIRING_INVALID");

      it("is refused once it verified the identity", async () => {
        const s = await start();
        assert.equal((await verify(s)).state, "IDENTITY_OBSERVED");
        await spent(verify(s));
        assert.equal((await owner.getCITrust({ name: s.trust?.name ?? "" })).state, "IDENTITY_OBSERVED");
      });
      it("is refused after the pending trust was disabled", async () => {
        const s = await start();
        const name = s.trust?.name ?? "";
        assert.equal((await owner.disableCITrust({ name })).state, "DISABLED");
        await spent(verify(s));
        assert.equal((await owner.getCITrust({ name })).state, "DISABLED");
      });
      it("is refused after the pending trust was deleted", async () => {
        const s = await start();
        await owner.deleteCITrust({ name: s.trust?.name ?? "" });
        await spent(verify(s));
      });
    });
  });
}
