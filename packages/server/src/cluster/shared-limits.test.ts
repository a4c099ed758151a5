import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { type Client, Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@svc/sdk/gen/google/rpc/error_details_pb";
import { AutomationService } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import { sql } from "kysely";
import { testDialects } from "../../testing/dialects.ts";
import { LocalGitHubOidc } from "../../testing/github-oidc.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../testing/harness.ts";
import { openDb } from "../db/database.ts";
import { createLimits } from "./shared-limits.ts";

const dialects = await testDialects();
const { dialect: postgres, skip } = dialects[1];

/** The ErrorInfo reason of a failed call, or "ok". */
async function reasonOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (e) {
    const err = ConnectError.from(e);
    return err.findDetails(ErrorInfoSchema)[0]?.reason ?? Code[err.code];
  }
}

describe("createLimits()", () => {
  it("keeps the limits in process on SQLite", async () => {
    const db = await openDb({ sqlitePath: ":memory:" });
    const limits = createLimits({ db, databaseUrl: undefined, now: Date.now });
    assert.equal(limits.shared, false);
    await limits.close();
    await db.close();
  });
});

describe("limits across two replicas on one PostgreSQL", { skip }, () => {
  let oidc: LocalGitHubOidc;
  let a: TestApp;
  let b: TestApp;
  let p: SeededProject;
  let other: SeededProject;
  const ci = { perTrustBurst: 3, perTrustPerMinute: 6 };

  before(async () => {
    oidc = await LocalGitHubOidc.start(() => a.clock.now());
    a = await startTestApp(postgres, { ci: { defaultIssuer: oidc.issuer, ...ci } });
    // The second replica: its own process state and port, the first one's database.
    b = await startTestApp(postgres, {
      ci: { defaultIssuer: oidc.issuer, ...ci },
      databaseUrl: a.app.config.databaseUrl,
    });
    p = await a.seedProject("acme", ["web-1"]);
    other = await a.seedProject("other", ["x-1"]);
  });
  after(async () => {
    // b first: a's close drops the database they share.
    await b?.close();
    await a?.close();
    await oidc?.close();
  });

  it("chooses the shared limits on PostgreSQL", async () => {
    const limits = createLimits({ db: a.app.db, databaseUrl: a.app.config.databaseUrl, now: Date.now });
    assert.equal(limits.shared, true);
    await limits.close();
  });

  it("holds an account's sign-in burst in aggregate: the 11th attempt is refused at either replica", async () => {
    const login = (t: TestApp, i: number) =>
      fetch(`${t.baseUrl}/console/api/session`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: p.owner.email, password: `guess-${i}` }),
      });
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await login(i % 2 === 0 ? a : b, i)).status);
    assert.deepEqual(statuses, Array(10).fill(401), "the burst of 10, spread over both");
    for (const t of [a, b]) {
      const r = await login(t, 99);
      assert.equal(r.status, 429);
      assert.equal(r.headers.get("retry-after"), "10");
      assert.equal(((await r.json()) as { reason: string }).reason, "RATE_LIMITED");
    }
    // The API's Login takes from the same buckets (issue 41): the right password waits too, at either replica.
    for (const t of [a, b]) {
      const r = await fetch(`${t.baseUrl}/svc.iam.v1.SessionService/Login`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-protocol-version": "1" },
        body: JSON.stringify({ email: p.owner.email, password: p.owner.password }),
      });
      assert.equal(r.status, 429);
      assert.ok(Number(r.headers.get("retry-after")) >= 1);
    }
  });

  it("holds a trust's exchange burst in aggregate, with Retry-After", async () => {
    const anon = (t: TestApp) => t.clients().client(AutomationService);
    const name = "projects/acme/ciTrusts/limited";
    const got: string[] = [];
    for (const t of [a, b, a, b])
      got.push(await reasonOf(anon(t).exchangeCIToken({ trustName: name, assertion: "x" })));
    assert.deepEqual(got, [
      "CI_ASSERTION_INVALID",
      "CI_ASSERTION_INVALID",
      "CI_ASSERTION_INVALID",
      "RATE_LIMITED",
    ]);
    const refused = await anon(a)
      .exchangeCIToken({ trustName: name, assertion: "x" })
      .catch((e: unknown) => ConnectError.from(e));
    assert.ok(refused instanceof ConnectError);
    assert.equal(refused.metadata.get("retry-after"), "10");
    assert.equal(refused.findDetails(ErrorInfoSchema)[0]?.metadata.retryAfterSeconds, "10");
  });

  describe("single-use jti", () => {
    let trustName: string;
    let audience: string;
    const exchange = (t: TestApp, assertion: string) =>
      t.clients().client(AutomationService).exchangeCIToken({ trustName, assertion });
    // The trust's bucket (3, one per 10 s) is full again for each case.
    beforeEach(() => {
      a.clock.advance(30_000);
      b.clock.advance(30_000);
    });

    before(async () => {
      const owner: Client<typeof AutomationService> = a.clients(p.owner.session).client(AutomationService);
      const sa = await a.clients(p.owner.session).serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "deployer",
        template: "Alert manager",
      });
      const started = await owner.startCITrustSetup({
        serviceAccount: sa.name,
        intended: {
          repository: "acme/deploy-tools",
          workflow: ".github/workflows/deploy.yml",
          branch: "main",
          environment: "",
          event: "push",
        },
      });
      const verified = await b
        .clients()
        .client(AutomationService)
        .verifyCITrustSetup({
          setupId: started.setupId,
          pairingCode: started.pairingCode,
          assertion: await oidc.token(started.audience),
        });
      const trust = await owner.approveCITrust({
        name: verified.trustName,
        permissions: ["monitoring.read"],
      });
      trustName = trust.name;
      audience = started.audience;
    });

    it("refuses at one replica an assertion exchanged at the other", async () => {
      const assertion = await oidc.token(audience);
      assert.equal(await reasonOf(exchange(a, assertion)), "ok");
      assert.equal(await reasonOf(exchange(b, assertion)), "CI_ASSERTION_REPLAYED");
    });

    it("lets exactly one of a race at two replicas exchange the same assertion", async () => {
      const assertion = await oidc.token(audience);
      const got = await Promise.all([a, b, a].map((t) => reasonOf(exchange(t, assertion))));
      assert.deepEqual([...got].sort(), ["CI_ASSERTION_REPLAYED", "CI_ASSERTION_REPLAYED", "ok"]);
    });
  });

  it("holds a project's query cap in aggregate; another project is not affected", async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    // The cap (4) running at replica a…
    const running = [1, 2, 3, 4].map(() => a.app.limiter.run("acme", () => gate));
    const slotsTaken = async () =>
      (
        await sql<{
          n: number;
        }>`select count(*)::int as n from pg_locks where locktype = 'advisory' and granted`.execute(
          a.app.db.db,
        )
      ).rows[0].n;
    while ((await slotsTaken()) < 4) await new Promise((r) => setTimeout(r, 5));
    const query = (t: TestApp, project: SeededProject) =>
      fetch(`${t.baseUrl}/v1/monitoring/${project.projectName}/prometheus/api/v1/query?query=vector(1)`, {
        headers: { authorization: `Bearer ${project.owner.session}` },
      });
    try {
      // …so replica b's query of that project waits its 2 s and is refused; the other project runs.
      const refused = await query(b, p);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get("retry-after"), "2");
      assert.equal((await query(b, other)).status, 200);
    } finally {
      open();
      await Promise.all(running);
    }
    assert.equal((await query(b, p)).status, 200, "the slots are back");
  });
});
