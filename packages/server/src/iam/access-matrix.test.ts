import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.ts";
import { ADMIN_TOKEN, startTestApp, type TestApp } from "../../testing/harness.ts";
import { allServices } from "../../testing/services.ts";
import { labelsFromRecord } from "../storage/interface.ts";
import { type Caller, callers, expectedOutcomes, type Outcome } from "./access-matrix.ts";
import { methodAccess, resourceFields } from "./capabilities.ts";

/**
 * Issue 35: every RPC of the protos × every kind of caller, against the expected-outcome table kept
 * beside the capability table (access-matrix.ts). Each call names a resource of project `acme` and
 * nothing else, so an authorized caller gets the method's own answer (200, or 400 / 404 for what the
 * body lacks) and nothing is changed; a refused caller gets 401 or 403 with its reason, the same with a
 * body the decoder would refuse, and the same whether the named resource exists or not.
 */
const services = allServices;
const rpcs = services.flatMap((s) => s.methods.map((m) => ({ key: `${s.typeName}/${m.name}`, m })));

// Logout ends the caller's session: it runs last.
const order = (k: string) => (k.endsWith("/Logout") ? 1 : 0);

interface Answer {
  status: number;
  body: string;
}

function outcomeOf(a: Answer): Outcome {
  if (a.status === 200) return "ok";
  if (a.status === 401) return "401";
  if (a.status === 403) {
    const reason = /\[([A-Z_]+)\]"/.exec(a.body)?.[1] ?? "?";
    const short: Record<string, Outcome> = {
      PROJECT_BOUNDARY: "BOUNDARY",
      CAPABILITY: "CAPABILITY",
      IDENTITY_DISABLED: "DISABLED",
      GRANT_REMOVED: "GRANT",
      HUMAN_ONLY: "HUMAN",
      OPERATOR_ONLY: "OPERATOR",
    };
    return short[reason] ?? (`403 ${reason}` as Outcome);
  }
  // Authorized: the method's own answer to a body that names the resource and nothing else.
  return "ok";
}

const refused = (o: Outcome) => o !== "ok";

it("the expected-outcome table has a row for every RPC in the protos and the capability table, and a decided cell for every caller", () => {
  const keys = rpcs.map((r) => r.key).sort();
  assert.deepEqual(Object.keys(expectedOutcomes).sort(), keys);
  assert.deepEqual(Object.keys(methodAccess).sort(), keys);
  for (const [k, row] of Object.entries(expectedOutcomes)) assert.equal(row.length, callers.length, k);
});

for (const { dialect, skip } of await testDialects()) {
  describe(`access matrix (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    const tokens = {} as Record<Caller, string | undefined>;
    /** Resource names of acme, existing and missing, by the kind of name a field takes. */
    let names: Record<string, { exists: string; missing: string }>;

    async function call(key: string, body: unknown, token: string | undefined): Promise<Answer> {
      const res = await fetch(`${t.baseUrl}/${key}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "connect-protocol-version": "1",
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: await res.text() };
    }

    before(async () => {
      t = await startTestApp(dialect);
      const p = await t.seedProject("acme", ["web-1"]);
      const other = await t.seedProject("other", ["x-1"]);
      const owner = t.clients(p.owner.session);
      const sa = async (template: string, caps: string[], project = p) => {
        const c = t.clients(project.owner.session);
        const account = await c.serviceAccounts.createServiceAccount({
          parent: project.projectName,
          displayName: template,
          template,
        });
        const k = await c.keys.createKey({
          parent: account.name,
          displayName: "k",
          capabilities: caps,
          requestId: randomUUID(),
        });
        return { account, key: k.key?.name ?? "", secret: k.secret ?? "" };
      };
      const read = await sa("Metrics scraper", ["monitoring.read"]);
      const write = await sa("Alert manager", ["monitoring.read", "monitoring.write"]);
      const revoked = await sa("Alert manager", ["monitoring.read", "monitoring.write"]);
      await owner.keys.revokeKey({ name: revoked.key });
      const rotated = await sa("Alert manager", ["monitoring.read", "monitoring.write"]);
      await owner.keys.rotateKey({ name: rotated.key, overlapSeconds: 0, requestId: randomUUID() });
      const disabled = await sa("Alert manager", ["monitoring.read", "monitoring.write"]);
      await owner.serviceAccounts.disableServiceAccount({ name: disabled.account.name });
      const otherKey = await sa("Alert manager", ["monitoring.read", "monitoring.write"], other);
      const personal = await owner.keys.createKey({
        parent: p.projectName,
        displayName: "mine",
        capabilities: ["monitoring.read"],
        requestId: randomUUID(),
      });
      const viewer = await t.admin.users.createUser({
        email: "viewer@example.com",
        password: "viewer-password-1",
        displayName: "V",
      });
      await t.admin.projects.setMember({ project: p.projectName, user: viewer.name, role: "viewer" });
      const viewerSession = await t
        .clients()
        .sessions.login({ email: "viewer@example.com", password: "viewer-password-1" });
      Object.assign(tokens, {
        anonymous: undefined,
        garbage: "not-a-credential",
        revokedKey: revoked.secret,
        rotatedOutKey: rotated.secret,
        disabledAccountKey: disabled.secret,
        otherProjectKey: otherKey.secret,
        otherProjectMember: other.owner.session,
        readKey: read.secret,
        writeKey: write.secret,
        personalReadKey: personal.secret ?? "",
        viewer: viewerSession.sessionToken,
        owner: p.owner.session,
        collector: t.app.config.collectorToken,
        operator: ADMIN_TOKEN,
      } satisfies Record<Caller, string | undefined>);

      // Resources that exist, for the refusals that must not tell them from missing ones.
      const destination = await owner.destinations.createDestination({
        projectName: p.projectName,
        displayName: "mail",
        kind: "EMAIL",
        recipients: [p.owner.user],
        requestId: randomUUID(),
      });
      const delivery = await owner.destinations.sendTestNotification({ name: destination.destination?.name });
      const rule = await owner.alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "cpu",
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 0,
          severity: "WARNING",
          allVms: true,
        },
      });
      const t0 = t.clock.now();
      const a = t.app.tsdb.appender();
      const labels = labelsFromRecord({
        __name__: "svc_vm_cpu_utilization_pct",
        project_id: "acme",
        vm: p.vms[0],
        vm_id: "web-1",
        location: "dc-1",
        source: "hypervisor",
      });
      for (let ts = t0 - 120_000; ts <= t0; ts += 30_000) a.append(labels, ts, 99);
      await a.commit();
      await t.app.evaluator.runCycle(t0);
      const [incident] = (await owner.incidents.listIncidents({ projectName: p.projectName })).incidents;
      assert.ok(incident, "an incident to name");
      const started = await owner.automation.startCITrustSetup({
        serviceAccount: write.account.name,
        intended: {
          repository: "acme/deploy",
          workflow: ".github/workflows/deploy.yml",
          branch: "main",
          environment: "",
          event: "push",
        },
      });
      const missingId = "0123456789abcdef0123";
      names = {
        vm: { exists: p.vms[0], missing: "projects/acme/locations/dc-1/vms/nope" },
        rule: { exists: rule.name, missing: `projects/acme/alertRules/${randomUUID()}` },
        incident: { exists: incident.name, missing: "projects/acme/incidents/nope" },
        destination: {
          exists: destination.destination?.name ?? "",
          missing: `projects/acme/destinations/${missingId}`,
        },
        delivery: {
          exists: delivery.name,
          missing: `${destination.destination?.name}/deliveries/dlv_${randomUUID()}`,
        },
        serviceAccount: { exists: write.account.name, missing: "projects/acme/serviceAccounts/nope" },
        saKey: { exists: read.key, missing: `${read.account.name}/keys/nope` },
        trust: { exists: started.trust?.name ?? "", missing: "projects/acme/ciTrusts/nope" },
        project: { exists: p.projectName, missing: p.projectName },
      };
    });
    after(() => t?.close());

    /** The name a method's resource field takes, by method. */
    function nameKind(key: string, field: string): string {
      if (field === "projectName" || (field === "parent" && !key.includes("KeyService"))) return "project";
      if (field === "serviceAccount" || (field === "parent" && key.includes("KeyService")))
        return "serviceAccount";
      if (key.includes("MonitoringService/") || key.includes("VMService/")) return "vm";
      if (key.includes("Delivery")) return "delivery";
      if (key.includes("DestinationService/")) return "destination";
      if (key.includes("IncidentService/")) return "incident";
      if (key.includes("AlertService/")) return "rule";
      if (key.includes("ServiceAccountService/")) return "serviceAccount";
      if (key.includes("KeyService/")) return "saKey";
      if (key.includes("AutomationService/")) return "trust";
      return "project";
    }

    function bodyOf(key: string, which: "exists" | "missing"): Record<string, unknown> {
      const m = rpcs.find((r) => r.key === key)?.m;
      const field = resourceFields.find((f) => m?.input.fields.some((x) => x.localName === f));
      if (!field) return {};
      const kind = nameKind(key, field);
      return { [field]: names[kind][which] };
    }

    const actual = new Map<string, Outcome[]>();

    it("finding 1, decoding before authentication: an anonymous call whose body the decoder refuses gets 401 on every non-public RPC", async () => {
      const wrong: string[] = [];
      for (const { key } of rpcs) {
        if (methodAccess[key] === "public") continue;
        for (const body of [{ bogusField: 1 }, { name: 5 }]) {
          const a = await call(key, body, undefined);
          if (a.status !== 401) wrong.push(`${key} ${JSON.stringify(body)}: ${a.status} ${a.body}`);
        }
        const raw = await fetch(`${t.baseUrl}/${key}`, {
          method: "POST",
          headers: { "content-type": "application/json", "connect-protocol-version": "1" },
          body: "{not json",
        });
        if (raw.status !== 401) wrong.push(`${key} {not json: ${raw.status}`);
      }
      assert.deepEqual(wrong, []);
    });

    it("finding 2, validation before authorization: CreateKey and RotateKey answer a stranger and a viewer 403, not 'requestId: is required'", async () => {
      for (const caller of ["otherProjectMember", "viewer"] as const) {
        const want = caller === "viewer" ? "CAPABILITY" : "BOUNDARY";
        const create = await call(
          "svc.iam.v1.KeyService/CreateKey",
          { parent: names.serviceAccount.exists, displayName: "x", capabilities: ["monitoring.read"] },
          tokens[caller],
        );
        assert.equal(outcomeOf(create), want, create.body);
        const rotate = await call(
          "svc.iam.v1.KeyService/RotateKey",
          { name: names.saKey.exists },
          tokens[caller],
        );
        assert.equal(outcomeOf(rotate), want, rotate.body);
      }
      // The owner, authorized, is told what the body lacks.
      const owner = await call(
        "svc.iam.v1.KeyService/CreateKey",
        { parent: names.serviceAccount.exists, displayName: "x", capabilities: ["monitoring.read"] },
        tokens.owner,
      );
      assert.equal(owner.status, 400);
      assert.match(owner.body, /requestId/);
    });

    it("finding 3, existence across projects: RevokeKey, RotateKey and GetCITrust answer another project's caller the same for a key or trust that exists and one that does not", async () => {
      const cases = [
        ["svc.iam.v1.KeyService/RevokeKey", "saKey"],
        ["svc.iam.v1.KeyService/RotateKey", "saKey"],
        ["svc.iam.v1.AutomationService/GetCITrust", "trust"],
      ] as const;
      for (const [key, kind] of cases) {
        const a = await call(key, { name: names[kind].exists }, tokens.otherProjectMember);
        const b = await call(key, { name: names[kind].missing }, tokens.otherProjectMember);
        assert.equal(a.status, 403, a.body);
        assert.deepEqual([a.status, a.body], [b.status, b.body], key);
      }
    });

    it("finding 4, read keys read only monitoring: the Metrics scraper key gets no destinations or deliveries; rules and incidents name a destination at most", async () => {
      const denied = [
        ["svc.monitoring.v1.DestinationService/ListDestinations", { projectName: "projects/acme" }],
        ["svc.monitoring.v1.DestinationService/GetDestination", { name: names.destination.exists }],
        ["svc.monitoring.v1.DestinationService/ListDeliveries", { projectName: "projects/acme" }],
        ["svc.monitoring.v1.DestinationService/GetDelivery", { name: names.delivery.exists }],
      ] as const;
      for (const [key, body] of denied) {
        const a = await call(key, body, tokens.readKey);
        assert.equal(a.status, 403, key);
        assert.match(a.body, /notifications\.write \[CAPABILITY\]/, key);
      }
      for (const [key, body] of [
        ["svc.monitoring.v1.AlertService/GetAlertRule", { name: names.rule.exists }],
        ["svc.monitoring.v1.IncidentService/GetIncident", { name: names.incident.exists }],
        ["svc.monitoring.v1.IncidentService/ListIncidents", { projectName: "projects/acme" }],
      ] as const) {
        const a = await call(key, body, tokens.readKey);
        assert.equal(a.status, 200, `${key}: ${a.body}`);
        assert.ok(!/@example\.com|https?:\/\//.test(a.body), `${key} shows no address or URL: ${a.body}`);
      }
    });

    it("the Prometheus API, scrape discovery and export authorize the same way before reading the query", async () => {
      const routes = ["prometheus/api/v1/query?query=%28", "scrape-targets", "export?shard=not-a-shard"];
      for (const route of routes) {
        const get = (project: string, token: string | undefined) =>
          fetch(`${t.baseUrl}/v1/monitoring/projects/${project}/${route}`, {
            headers: token ? { authorization: `Bearer ${token}` } : {},
          }).then(async (r) => ({ status: r.status, body: await r.text() }));
        assert.equal((await get("acme", undefined)).status, 401, route);
        assert.equal((await get("acme", "not-a-credential")).status, 401, route);
        const existing = await get("acme", tokens.otherProjectKey);
        const missing = await get("nope", tokens.otherProjectKey);
        assert.equal(existing.status, 403, route);
        assert.deepEqual(existing, missing, route);
        assert.notEqual((await get("acme", tokens.readKey)).status, 403, route);
      }
    });

    it("refused callers learn nothing about another project: the same status and body whether the named resource exists or not", async () => {
      const differ: string[] = [];
      for (const { key } of rpcs) {
        if (key.endsWith("/Logout")) continue;
        await Promise.all(
          callers.map(async (caller, i) => {
            if (!refused(expectedOutcomes[key][i])) return;
            const a = await call(key, bodyOf(key, "exists"), tokens[caller]);
            const b = await call(key, bodyOf(key, "missing"), tokens[caller]);
            if (a.status !== b.status || a.body !== b.body)
              differ.push(`${key} × ${caller}: ${a.status} ${a.body} / ${b.status} ${b.body}`);
          }),
        );
      }
      assert.deepEqual(differ, []);
    });
    it("every RPC × every caller answers as the expected-outcome table says, and the same with a body the decoder refuses", async () => {
      const mismatches: string[] = [];
      for (const { key } of [...rpcs].sort((a, b) => order(a.key) - order(b.key))) {
        // The callers of one row are independent of each other: asked together.
        const row = await Promise.all(
          callers.map(async (caller, i) => {
            // Authorization comes before decoding: an unknown field changes nothing for a refused caller,
            // and is the decoder's 400 for an authorized one (sent first: it changes nothing).
            const bad = await call(key, { ...bodyOf(key, "missing"), bogusField: 1 }, tokens[caller]);
            // Missing resources: an authorized call then changes nothing, and a refusal may not depend on them.
            const got = outcomeOf(await call(key, bodyOf(key, "missing"), tokens[caller]));
            const want = expectedOutcomes[key]?.[i];
            if (got !== want) mismatches.push(`${key} × ${caller}: expected ${want}, got ${got}`);
            if (refused(got) && outcomeOf(bad) !== got)
              mismatches.push(
                `${key} × ${caller} with an unknown field: expected ${got}, got ${bad.status} ${bad.body}`,
              );
            if (!refused(got) && methodAccess[key] !== "public" && bad.status !== 400)
              mismatches.push(`${key} × ${caller} with an unknown field: expected 400, got ${bad.status}`);
            return got;
          }),
        );
        actual.set(key, row);
      }
      if (process.env.PRINT_ACCESS_MATRIX)
        for (const [k, row] of actual)
          console.log(`  "${k}": [${row.map((o) => JSON.stringify(o)).join(", ")}],`);
      assert.deepEqual(mismatches, []);
    });
  });
}
