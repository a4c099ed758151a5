import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { testDialects } from "../../../testing/dialects.ts";
import { defaultRun, LocalGitHubOidc, type RunIdentity } from "../../../testing/github-oidc.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../testing/harness.ts";
import { authenticate, authorizeProject } from "../principal.ts";
import { ciTokenResolver } from "./exchange.ts";

const MIN = 60_000;

async function rejects(
  p: Promise<unknown>,
  code: Code,
  reason: string,
  metadata: Record<string, string> = {},
): Promise<ConnectError> {
  try {
    await p;
  } catch (e) {
    const err = ConnectError.from(e);
    const info = err.findDetails(ErrorInfoSchema)[0];
    assert.equal(Code[err.code], Code[code], err.message);
    assert.equal(info?.reason, reason, err.message);
    for (const [k, v] of Object.entries(metadata)) assert.equal(info?.metadata[k], v, `${k}: ${err.message}`);
    return err;
  }
  assert.fail(`expected ${Code[code]} ${reason}`);
}

/** A JWT with alg "none": header and payload, empty signature. */
function unsigned(claims: Record<string, unknown>, kid: string): string {
  const b = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${b({ alg: "none", typ: "JWT", kid })}.${b(claims)}.`;
}

async function hs256(claims: Record<string, unknown>, secret: string, kid: string): Promise<string> {
  const { SignJWT } = await import("jose");
  return new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid }).sign(Buffer.from(secret));
}

for (const { dialect, skip } of await testDialects()) {
  describe(`CI trust and exchange (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let oidc: LocalGitHubOidc;
    let p: SeededProject;
    let other: SeededProject;
    let owner: Client<typeof AutomationService>;
    let anon: Client<typeof AutomationService>;
    let saName: string;

    before(async () => {
      oidc = await LocalGitHubOidc.start(() => t.clock.now());
      t = await startTestApp(dialect, {
        ci: { defaultIssuer: oidc.issuer, perTrustBurst: 1e6, perSourceBurst: 1e6 },
      });
      p = await t.seedProject("acme", ["web-1", "web-2"]);
      other = await t.seedProject("other", ["x-1"]);
      owner = t.clients(p.owner.session).client(AutomationService);
      anon = t.clients().client(AutomationService);
      const sa = await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "deployer",
        template: "Alert manager",
      });
      saName = sa.name;
    });
    after(async () => {
      await t?.close();
      await oidc?.close();
    });

    /** Setup → verification run → approval; returns the approved trust. */
    async function approvedTrust(run: RunIdentity = defaultRun, permissions = ["monitoring.read"]) {
      const started = await owner.startCITrustSetup({
        serviceAccount: saName,
        intended: {
          repository: run.repository,
          workflow: run.workflow_path,
          branch: run.environment ? "" : run.ref.replace("refs/heads/", ""),
          environment: run.environment ?? "",
          event: run.event_name,
        },
      });
      const verified = await anon.verifyCITrustSetup({
        setupId: started.setupId,
        pairingCode: started.pairingCode,
        assertion: await oidc.token(started.audience, {}, run),
      });
      const trust = await owner.approveCITrust({ name: verified.trustName, permissions });
      return { started, trust, audience: started.audience, name: trust.name };
    }

    const exchange = async (name: string, assertion: string) =>
      anon.exchangeCIToken({ trustName: name, assertion });

    it("runs setup, verification, approval and exchange into a 15-minute monitoring.read token", async () => {
      const started = await owner.startCITrustSetup({
        serviceAccount: saName,
        intended: {
          repository: "acme/deploy-tools",
          workflow: ".github/workflows/deploy.yml",
          branch: "main",
          environment: "",
          event: "push",
        },
      });
      assert.match(started.pairingCode, /^svcsetup_/);
      assert.equal(started.apiOrigin, t.baseUrl);
      assert.equal(started.audience, `svc:${started.trust?.name}`);
      assert.equal(Number(started.expireTimeUnix) * 1000, Math.floor(t.clock.now() / 1000) * 1000 + 30 * MIN);
      assert.equal(started.trust?.state, "VERIFICATION_PENDING");
      assert.equal(started.trust?.issuer, oidc.issuer);

      // The pairing code is shown once: reading the trust back never returns it.
      const read = await owner.getCITrust({ name: started.trust!.name });
      assert.ok(
        !JSON.stringify(read, (_k, v) => (typeof v === "bigint" ? String(v) : v)).includes(
          started.pairingCode,
        ),
      );

      const verified = await anon.verifyCITrustSetup({
        setupId: started.setupId,
        pairingCode: started.pairingCode,
        assertion: await oidc.token(started.audience),
      });
      assert.equal(verified.state, "IDENTITY_OBSERVED");
      assert.deepEqual(
        { ...verified.observed, $typeName: undefined },
        {
          $typeName: undefined,
          repository: "acme/deploy-tools",
          repositoryId: "700100200",
          repositoryOwner: "acme",
          repositoryOwnerId: "9001",
          workflowRef: "acme/deploy-tools/.github/workflows/deploy.yml@refs/heads/main",
          ref: "refs/heads/main",
          event: "push",
          environment: "",
          jobWorkflowRef: "acme/deploy-tools/.github/workflows/deploy.yml@refs/heads/main",
        },
      );
      // Observed is not approved: no access yet, and the pairing code is spent.
      await rejects(
        exchange(verified.trustName, await oidc.token(started.audience)),
        Code.FailedPrecondition,
        "CI_TRUST_STATE",
        {
          state: "IDENTITY_OBSERVED",
        },
      );
      await rejects(
        anon.verifyCITrustSetup({
          setupId: started.setupId,
          pairingCode: started.pairingCode,
          assertion: await oidc.token(started.audience),
        }),
        Code.PermissionDenied,
        "CI_PAIRING_INVALID",
      );
      // Only the service account's permissions can be approved.
      await rejects(
        owner.approveCITrust({ name: verified.trustName, permissions: ["monitoring.admin"] }),
        Code.InvalidArgument,
        "INVALID_FIELD",
      );
      const trust = await owner.approveCITrust({
        name: verified.trustName,
        permissions: ["monitoring.read"],
      });
      assert.equal(trust.state, "APPROVED");
      assert.deepEqual(trust.permissions, ["monitoring.read"]);
      assert.equal(trust.approver, p.owner.user);

      const res = await exchange(trust.name, await oidc.token(started.audience));
      assert.match(res.accessToken, /^svct_[0-9A-Za-z]{38}$/);
      assert.equal(res.projectName, p.projectName);
      const ci = t.clients(res.accessToken);
      const vms = await ci.monitoring.listVMMonitoring({
        projectName: p.projectName,
        pageSize: 50,
        inventoryOnly: true,
      });
      assert.deepEqual(
        vms.vms.map((v) => v.displayName),
        ["web-1", "web-2"],
      );
      // QueryVMMonitoring passes its permission check (the query itself is not served yet).
      const q = await ci.monitoring
        .queryVMMonitoring({
          name: p.vms[0],
          metricIds: ["cpu_utilization_pct"],
          startTimeUnix: 0n,
          endTimeUnix: 60n,
          stepSeconds: 30,
        })
        .then(
          () => undefined,
          (e) => ConnectError.from(e),
        );
      assert.notEqual(q?.code, Code.PermissionDenied, q?.message);
      // Beyond the approval: another project, human-only methods, operator methods, monitoring.write.
      await rejects(
        ci.monitoring.listVMMonitoring({ projectName: other.projectName, pageSize: 50, inventoryOnly: true }),
        Code.PermissionDenied,
        "PROJECT_BOUNDARY",
      );
      await rejects(
        ci.client(AutomationService).listCITrusts({ parent: p.projectName }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejects(
        ci.client(AutomationService).approveCITrust({ name: trust.name, permissions: ["monitoring.read"] }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejects(
        ci.serviceAccounts.createServiceAccount({
          parent: p.projectName,
          displayName: "x",
          template: "Alert manager",
        }),
        Code.PermissionDenied,
        "HUMAN_ONLY",
      );
      await rejects(ci.keys.listKeys({ parent: p.projectName }), Code.PermissionDenied, "HUMAN_ONLY");
      const principal = await authenticate(t.app.db.db, res.accessToken, t.clock.now(), { ciTokenResolver });
      // The audit log names the CI token's repository, workflow and ref (issue 29), on the refused approval too.
      assert.equal(principal.kind === "CI_TOKEN" && principal.repository, "acme/deploy-tools");
      const approval = await t.app.db.db
        .selectFrom("audit_events")
        .selectAll()
        .where("method", "=", "svc.iam.v1.AutomationService/ApproveCITrust")
        .where("actor_kind", "=", "CI_TOKEN")
        .executeTakeFirstOrThrow();
      assert.equal(approval.outcome, "HUMAN_ONLY");
      const detail = JSON.parse(approval.actor_detail) as Record<string, string>;
      assert.equal(detail.repository, "acme/deploy-tools");
      assert.equal(detail.ref, "refs/heads/main");
      assert.match(detail.workflow, /^acme\/deploy-tools\/\.github\/workflows\/.+@refs\/heads\/main$/);
      await assert.rejects(authorizeProject(t.app.db.db, principal, "acme", "monitoring.write"), {
        reason: "CAPABILITY",
      });
      // 15 minutes, no refresh.
      t.clock.advance(15 * MIN);
      await rejects(
        ci.monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 50, inventoryOnly: true }),
        Code.Unauthenticated,
        "CREDENTIAL_EXPIRED",
      );
    });

    it("lists and reads trusts for members only", async () => {
      const { name } = await approvedTrust();
      const list = await owner.listCITrusts({ parent: p.projectName });
      assert.ok(list.trusts.some((x) => x.name === name && x.state === "APPROVED"));
      const outsider = t.clients(other.owner.session).client(AutomationService);
      await rejects(outsider.getCITrust({ name }), Code.PermissionDenied, "PROJECT_BOUNDARY");
      await rejects(outsider.disableCITrust({ name }), Code.PermissionDenied, "PROJECT_BOUNDARY");
    });

    describe("exchange denials", () => {
      let trust: { name: string; audience: string };
      before(async () => {
        trust = await approvedTrust();
      });

      it("refuses another issuer", async () => {
        const a = await oidc.token(trust.audience, { iss: "https://token.actions.example.net" });
        const err = await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_CLAIM_MISMATCH", {
          claim: "iss",
          expected: oidc.issuer,
        });
        assert.ok(!err.message.includes(a) && !err.rawMessage.includes(a.split(".")[1]));
      });
      it("refuses a wrong audience", async () => {
        await rejects(
          exchange(trust.name, await oidc.token("svc:projects/acme/ciTrusts/other")),
          Code.PermissionDenied,
          "CI_CLAIM_MISMATCH",
          {
            claim: "aud",
            expected: trust.audience,
          },
        );
      });
      it("refuses an array audience that contains the right one", async () => {
        await rejects(
          exchange(
            trust.name,
            await oidc.token(trust.audience, { aud: [trust.audience, "sts.amazonaws.com"] }),
          ),
          Code.PermissionDenied,
          "CI_CLAIM_MISMATCH",
          { claim: "aud" },
        );
      });
      it('refuses alg "none"', async () => {
        await rejects(
          exchange(trust.name, unsigned(oidc.claims(trust.audience), oidc.keys[0].kid)),
          Code.Unauthenticated,
          "CI_ASSERTION_INVALID",
          { problem: "unverified" },
        );
      });
      it("refuses HS256 signed with the issuer's public key", async () => {
        const a = await hs256(oidc.claims(trust.audience), oidc.keys[0].publicPem, oidc.keys[0].kid);
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "unverified",
        });
      });
      it("refuses a token without kid", async () => {
        const a = await oidc.sign(oidc.claims(trust.audience), { kid: null });
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "unverified",
        });
      });
      it("refuses a bad signature", async () => {
        const a = await oidc.token(trust.audience);
        const [h, b] = a.split(".");
        const forged = `${h}.${b}.${Buffer.from("x".repeat(256)).toString("base64url")}`;
        await rejects(exchange(trust.name, forged), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "unverified",
        });
      });
      it("refuses an unknown kid, then accepts it once the issuer rotates and the cooldown passed", async () => {
        const next = await oidc.addKey(false);
        const a = await oidc.sign(oidc.claims(trust.audience), { key: next });
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "unverified",
        });
        oidc.published.add(next.kid);
        // Inside the cooldown an unknown kid cannot force a refetch.
        const fetches = oidc.jwksFetches;
        const b = await oidc.sign(oidc.claims(trust.audience), { key: next });
        t.clock.advance(1000);
        await rejects(exchange(trust.name, b), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "unverified",
        });
        assert.equal(oidc.jwksFetches, fetches);
        t.clock.advance(MIN);
        const c = await oidc.sign(oidc.claims(trust.audience), { key: next });
        const res = await exchange(trust.name, c);
        assert.match(res.accessToken, /^svct_/);
        assert.equal(oidc.jwksFetches, fetches + 1);
        // Retire the old key: tokens it signs stop working once the set is refreshed (max age 1 h).
        oidc.published.delete(oidc.keys[0].kid);
        t.clock.advance(61 * MIN);
        await rejects(
          exchange(trust.name, await oidc.sign(oidc.claims(trust.audience), { key: oidc.keys[0] })),
          Code.Unauthenticated,
          "CI_ASSERTION_INVALID",
          { problem: "unverified" },
        );
        oidc.published.add(oidc.keys[0].kid);
        t.clock.advance(MIN);
      });
      it("refuses an expired token", async () => {
        const c = oidc.claims(trust.audience);
        const a = await oidc.sign({
          ...c,
          iat: (c.iat as number) - 900,
          nbf: (c.iat as number) - 900,
          exp: (c.iat as number) - 300,
        });
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "exp",
        });
      });
      it("refuses a token issued in the future", async () => {
        const c = oidc.claims(trust.audience);
        const a = await oidc.sign({
          ...c,
          iat: (c.iat as number) + 600,
          nbf: undefined,
          exp: (c.iat as number) + 900,
        });
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "iat",
        });
      });
      it("refuses a token without jti", async () => {
        const a = await oidc.sign({ ...oidc.claims(trust.audience), jti: undefined });
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_INVALID", {
          problem: "jti",
        });
      });
      it("refuses a replayed jti, even from a different trust", async () => {
        const a = await oidc.token(trust.audience);
        await exchange(trust.name, a);
        await rejects(exchange(trust.name, a), Code.Unauthenticated, "CI_ASSERTION_REPLAYED", {
          claim: "jti",
        });
        // Still refused after the assertion's own expiry (rows outlive exp).
        t.clock.advance(10 * MIN);
        const err = await exchange(trust.name, a).then(
          () => undefined,
          (e) => ConnectError.from(e),
        );
        assert.ok(err, "an expired replay must fail");
      });
      for (const event of [
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
      ]) {
        it(`refuses the ${event} event`, async () => {
          const a = await oidc.token(
            trust.audience,
            {},
            { ...defaultRun, event_name: event, ref: "refs/pull/7/merge" },
          );
          await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_EVENT_REJECTED", {
            claim: "event_name",
          });
        });
      }
      it("refuses an accepted event other than the approved one", async () => {
        const a = await oidc.token(trust.audience, {}, { ...defaultRun, event_name: "workflow_dispatch" });
        await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_CLAIM_MISMATCH", {
          claim: "event_name",
          expected: "push",
        });
      });
      it("refuses another branch", async () => {
        const a = await oidc.token(trust.audience, {}, { ...defaultRun, ref: "refs/heads/feature" });
        await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_CLAIM_MISMATCH", {
          claim: "ref",
          expected: "refs/heads/main",
        });
      });
      it("refuses another workflow of the same repository", async () => {
        const a = await oidc.token(
          trust.audience,
          {},
          { ...defaultRun, workflow_path: ".github/workflows/other.yml" },
        );
        await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_CLAIM_MISMATCH", {
          claim: "workflow_ref",
        });
      });
      it("refuses a re-created repository with the same name but another id", async () => {
        const a = await oidc.token(trust.audience, {}, { ...defaultRun, repository_id: "800000001" });
        await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_CLAIM_MISMATCH", {
          claim: "repository_id",
          expected: "700100200",
        });
      });
      it("refuses another owner with the same name", async () => {
        const a = await oidc.token(trust.audience, {}, { ...defaultRun, repository_owner_id: "31337" });
        await rejects(exchange(trust.name, a), Code.PermissionDenied, "CI_CLAIM_MISMATCH", {
          claim: "repository_owner_id",
          expected: "9001",
        });
      });
      it("answers an unknown trust name exactly as a bad assertion (no probing which trusts exist)", async () => {
        const unknown = await rejects(
          exchange("projects/acme/ciTrusts/nosuchtrust", await oidc.token(trust.audience)),
          Code.Unauthenticated,
          "CI_ASSERTION_INVALID",
          { problem: "unverified" },
        );
        const a = await oidc.token(trust.audience);
        const [h, b] = a.split(".");
        const cases = [
          "x",
          "",
          unsigned(oidc.claims(trust.audience), oidc.keys[0].kid),
          `${h}.${b}.${Buffer.from("y".repeat(256)).toString("base64url")}`,
        ];
        for (const bad of cases) {
          const known = await rejects(
            exchange(trust.name, bad),
            Code.Unauthenticated,
            "CI_ASSERTION_INVALID",
          );
          assert.equal(known.message, unknown.message);
          const info = (e: ConnectError) => e.findDetails(ErrorInfoSchema)[0];
          assert.deepEqual({ ...info(known)?.metadata }, { ...info(unknown)?.metadata });
        }
        // A malformed name says nothing about which trusts exist and stays a field error.
        await rejects(exchange("nope", a), Code.InvalidArgument, "INVALID_FIELD", { field: "trustName" });
      });
    });

    it("stops a disabled service account's exchanges and outstanding tokens", async () => {
      const { name, audience } = await approvedTrust();
      const { accessToken } = await exchange(name, await oidc.token(audience));
      const sas = t.clients(p.owner.session).serviceAccounts;
      await sas.disableServiceAccount({ name: saName });
      try {
        await rejects(
          t
            .clients(accessToken)
            .monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true }),
          Code.PermissionDenied,
          "IDENTITY_DISABLED",
        );
        await rejects(exchange(name, await oidc.token(audience)), Code.PermissionDenied, "IDENTITY_DISABLED");
      } finally {
        await sas.enableServiceAccount({ name: saName });
      }
      await exchange(name, await oidc.token(audience));
    });

    it("stops a disabled trust at once, and a deleted one", async () => {
      const { name, audience } = await approvedTrust();
      const { accessToken } = await exchange(name, await oidc.token(audience));
      const ci = t.clients(accessToken).monitoring;
      await ci.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true });
      const disabled = await owner.disableCITrust({ name });
      assert.equal(disabled.state, "DISABLED");
      await rejects(
        ci.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true }),
        Code.PermissionDenied,
        "CI_TRUST_DISABLED",
      );
      await rejects(exchange(name, await oidc.token(audience)), Code.PermissionDenied, "CI_TRUST_DISABLED");
      await owner.deleteCITrust({ name });
      await rejects(
        ci.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true }),
        Code.Unauthenticated,
        "CREDENTIAL_EXPIRED",
      );
      await rejects(owner.getCITrust({ name }), Code.NotFound, "NOT_FOUND");
      await rejects(
        exchange(name, await oidc.token(audience)),
        Code.Unauthenticated,
        "CI_ASSERTION_INVALID",
        {
          problem: "unverified",
        },
      );
    });

    it("invalidates outstanding tokens when the trust's permissions are edited", async () => {
      const { name, audience } = await approvedTrust(defaultRun, ["monitoring.read", "monitoring.write"]);
      const { accessToken } = await exchange(name, await oidc.token(audience));
      const updated = await owner.updateCITrustPermissions({ name, permissions: ["monitoring.read"] });
      assert.deepEqual(updated.permissions, ["monitoring.read"]);
      await rejects(
        t
          .clients(accessToken)
          .monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true }),
        Code.Unauthenticated,
        "CREDENTIAL_REVOKED",
      );
      const fresh = await exchange(name, await oidc.token(audience));
      const principal = await authenticate(t.app.db.db, fresh.accessToken, t.clock.now(), {
        ciTokenResolver,
      });
      assert.deepEqual(principal.kind === "CI_TOKEN" && principal.keyCapabilities, ["monitoring.read"]);
    });

    it("a CI token approved with monitoring.write cannot silence anyone: that needs silences.write (issue 41)", async () => {
      const { name, audience } = await approvedTrust(defaultRun, ["monitoring.read", "monitoring.write"]);
      const { accessToken } = await exchange(name, await oidc.token(audience));
      await rejects(
        t.clients(accessToken).silences.createSilence({
          projectName: p.projectName,
          requestId: randomUUID(),
          comment: "deploy",
          vmNames: [p.vms[0]],
          startTimeUnix: 0n,
          endTimeUnix: BigInt(Math.floor(t.clock.now() / 1000) + 3600),
        }),
        Code.PermissionDenied,
        "CAPABILITY",
      );
      const silences = await t.clients(p.owner.session).silences.listSilences({ projectName: p.projectName });
      assert.equal(silences.silences.length, 0, "nothing saved");
    });

    it("requires a new verification when the repository is renamed, and revokes access meanwhile", async () => {
      const { name, audience } = await approvedTrust();
      const { accessToken } = await exchange(name, await oidc.token(audience));
      const renamed: RunIdentity = { ...defaultRun, repository: "acme/deployer" };
      const err = await rejects(
        exchange(name, await oidc.token(audience, {}, renamed)),
        Code.PermissionDenied,
        "CI_CLAIM_MISMATCH",
        {
          claim: "repository",
          expected: "acme/deploy-tools",
        },
      );
      assert.match(err.rawMessage, /new verification/);
      const again = await owner.startCITrustSetup({
        serviceAccount: saName,
        trust: name,
        intended: {
          repository: "acme/deployer",
          workflow: ".github/workflows/deploy.yml",
          branch: "main",
          environment: "",
          event: "push",
        },
      });
      assert.equal(again.audience, audience);
      await rejects(
        t
          .clients(accessToken)
          .monitoring.listVMMonitoring({ projectName: p.projectName, pageSize: 5, inventoryOnly: true }),
        Code.Unauthenticated,
        "CREDENTIAL_REVOKED",
      );
      await rejects(
        exchange(name, await oidc.token(audience, {}, renamed)),
        Code.FailedPrecondition,
        "CI_TRUST_STATE",
      );
      await anon.verifyCITrustSetup({
        setupId: again.setupId,
        pairingCode: again.pairingCode,
        assertion: await oidc.token(audience, {}, renamed),
      });
      await owner.approveCITrust({ name, permissions: ["monitoring.read"] });
      await exchange(name, await oidc.token(audience, {}, renamed));
    });

    it("binds to an environment instead of a branch", async () => {
      const run: RunIdentity = {
        ...defaultRun,
        environment: "production",
        event_name: "workflow_dispatch",
        ref: "refs/tags/v1.2.0",
      };
      const { name, audience } = await approvedTrust(run);
      await exchange(name, await oidc.token(audience, {}, { ...run, ref: "refs/tags/v1.3.0" }));
      await rejects(
        exchange(name, await oidc.token(audience, {}, { ...run, environment: "staging" })),
        Code.PermissionDenied,
        "CI_CLAIM_MISMATCH",
        {
          claim: "environment",
          expected: "production",
        },
      );
    });

    describe("verification", () => {
      const intended = {
        repository: "acme/deploy-tools",
        workflow: ".github/workflows/deploy.yml",
        branch: "main",
        environment: "",
        event: "push",
      };

      it("expires after 30 minutes", async () => {
        const s = await owner.startCITrustSetup({ serviceAccount: saName, intended });
        t.clock.advance(30 * MIN);
        await rejects(
          anon.verifyCITrustSetup({
            setupId: s.setupId,
            pairingCode: s.pairingCode,
            assertion: await oidc.token(s.audience),
          }),
          Code.FailedPrecondition,
          "CI_SETUP_EXPIRED",
        );
        assert.equal((await owner.getCITrust({ name: s.trust!.name })).state, "EXPIRED");
      });
      it("refuses a wrong pairing code and an unknown setup id alike", async () => {
        const s = await owner.startCITrustSetup({ serviceAccount: saName, intended });
        await rejects(
          anon.verifyCITrustSetup({
            setupId: s.setupId,
            pairingCode: `${s.pairingCode.slice(0, -2)}xx`,
            assertion: await oidc.token(s.audience),
          }),
          Code.PermissionDenied,
          "CI_PAIRING_INVALID",
        );
        await rejects(
          anon.verifyCITrustSetup({
            setupId: "nosuchsetup",
            pairingCode: s.pairingCode,
            assertion: await oidc.token(s.audience),
          }),
          Code.PermissionDenied,
          "CI_PAIRING_INVALID",
        );
        assert.equal((await owner.getCITrust({ name: s.trust!.name })).state, "VERIFICATION_PENDING");
      });
      it("accepts only a run of the intended workflow, branch and event", async () => {
        const s = await owner.startCITrustSetup({ serviceAccount: saName, intended });
        const v = (run: RunIdentity) =>
          oidc
            .token(s.audience, {}, run)
            .then((assertion) =>
              anon.verifyCITrustSetup({ setupId: s.setupId, pairingCode: s.pairingCode, assertion }),
            );
        await rejects(
          v({ ...defaultRun, ref: "refs/heads/dev" }),
          Code.PermissionDenied,
          "CI_CLAIM_MISMATCH",
          { claim: "ref" },
        );
        await rejects(
          v({ ...defaultRun, workflow_path: ".github/workflows/x.yml" }),
          Code.PermissionDenied,
          "CI_CLAIM_MISMATCH",
          { claim: "workflow_ref" },
        );
        await rejects(
          v({ ...defaultRun, event_name: "pull_request_target" }),
          Code.PermissionDenied,
          "CI_EVENT_REJECTED",
        );
        await rejects(
          v({ ...defaultRun, event_name: "schedule" }),
          Code.PermissionDenied,
          "CI_CLAIM_MISMATCH",
          { claim: "event_name" },
        );
        const ok = await v(defaultRun);
        assert.equal(ok.state, "IDENTITY_OBSERVED");
      });
      it("validates the intended identity and refuses pull-request events at setup", async () => {
        await rejects(
          owner.startCITrustSetup({
            serviceAccount: saName,
            intended: { ...intended, event: "pull_request" },
          }),
          Code.InvalidArgument,
          "INVALID_FIELD",
          { field: "intended.event" },
        );
        await rejects(
          owner.startCITrustSetup({ serviceAccount: saName, intended: { ...intended, environment: "prod" } }),
          Code.InvalidArgument,
          "INVALID_FIELD",
          { field: "intended.branch" },
        );
        await rejects(
          owner.startCITrustSetup({ serviceAccount: saName, intended, issuer: "https://evil.example" }),
          Code.InvalidArgument,
          "INVALID_FIELD",
          { field: "issuer" },
        );
      });
      it("is human-only to start and approve", async () => {
        await rejects(
          anon.startCITrustSetup({ serviceAccount: saName, intended }),
          Code.Unauthenticated,
          "UNAUTHENTICATED",
        );
      });
    });
  });
}

describe("CI endpoint rate limits (sqlite)", () => {
  let t: TestApp;
  let oidc: LocalGitHubOidc;
  before(async () => {
    oidc = await LocalGitHubOidc.start(() => t.clock.now());
    const [{ dialect }] = await testDialects();
    t = await startTestApp(dialect, {
      ci: { defaultIssuer: oidc.issuer, perTrustBurst: 3, perTrustPerMinute: 6 },
    });
  });
  after(async () => {
    await t?.close();
    await oidc?.close();
  });

  it("answers resource_exhausted with Retry-After once a trust's bucket is empty, and refills", async () => {
    const anon = t.clients().client(AutomationService);
    const name = "projects/acme/ciTrusts/abc";
    for (let i = 0; i < 3; i++) {
      await rejects(
        anon.exchangeCIToken({ trustName: name, assertion: "x" }),
        Code.Unauthenticated,
        "CI_ASSERTION_INVALID",
      );
    }
    const err = await rejects(
      anon.exchangeCIToken({ trustName: name, assertion: "x" }),
      Code.ResourceExhausted,
      "RATE_LIMITED",
      { retryAfterSeconds: "10" },
    );
    assert.equal(err.metadata.get("retry-after"), "10");
    // Another trust has its own bucket; time refills this one.
    await rejects(
      anon.exchangeCIToken({ trustName: "projects/acme/ciTrusts/def", assertion: "x" }),
      Code.Unauthenticated,
      "CI_ASSERTION_INVALID",
    );
    t.clock.advance(10_000);
    await rejects(
      anon.exchangeCIToken({ trustName: name, assertion: "x" }),
      Code.Unauthenticated,
      "CI_ASSERTION_INVALID",
    );
  });
});
