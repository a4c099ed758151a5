import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse as parseYaml } from "yaml";
import { testDialects } from "../../../server/testing/dialects.ts";
import {
  ADMIN_TOKEN,
  type SeededProject,
  startTestApp,
  type TestApp,
} from "../../../server/testing/harness.ts";
import { runSvc as run } from "../run-in-process.ts";
import { timeOf } from "./audit.ts";

it("--since and --until read a duration before now or an ISO time", () => {
  assert.equal(timeOf("24h", "--since", 100_000_000), 100_000_000n - 86_400_000n);
  assert.equal(timeOf("2026-11-27T10:00:00Z", "--since"), BigInt(Date.parse("2026-11-27T10:00:00Z")));
  assert.equal(timeOf(undefined, "--since"), 0n);
  assert.throws(() => timeOf("yesterday", "--since"), /--since must be/);
});

describe("svc audit list (in-process against startTestApp)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  let env: Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), "svc-cli-audit-"));
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("auditcli", ["web-1"]);
    env = { SVC_BASE_URL: t.baseUrl, SVC_TOKEN: p.owner.session, SVC_CONFIG: join(dir, "none.json") };
    const owner = t.clients(p.owner.session);
    const k = await owner.keys.createKey({
      parent: p.projectName,
      displayName: "ci",
      capabilities: ["monitoring.read"],
      requestId: randomUUID(),
    });
    await owner.keys.rotateKey({ name: k.key?.name, overlapSeconds: 0, requestId: randomUUID() });
  });
  after(() => t?.close());

  it("lists who did what as a table, JSON or YAML, filtered by method", async () => {
    const table = await run(["audit", "list", "--project", p.projectName], env);
    assert.equal(table.code, 0, table.err);
    assert.match(table.out, /^TIME\tACTOR KIND\tACTOR\tMETHOD/);
    assert.match(
      table.out,
      /\tUSER\tusers\/[^\t]+\tsvc\.iam\.v1\.KeyService\/RotateKey\tprojects\/auditcli\/keys\/[^\t]+\tok\t/,
    );
    const json = await run(
      ["audit", "list", "--project", p.projectName, "--method", "CreateKey", "-o", "json"],
      env,
    );
    assert.equal(json.code, 0, json.err);
    const events = JSON.parse(json.out).events as { method: string; actor: string }[];
    assert.equal(events.length, 1);
    assert.equal(events[0].method, "svc.iam.v1.KeyService/CreateKey");
    assert.equal(events[0].actor, p.owner.user);
    const yaml = await run(["audit", "list", "--project", p.projectName, "-o", "yaml"], env);
    assert.ok((parseYaml(yaml.out) as { events: unknown[] }).events.length >= 2);
    const all = await run(["audit", "list", "--all-projects", "--method", "CreateProject", "-o", "json"], {
      ...env,
      SVC_TOKEN: ADMIN_TOKEN,
    });
    assert.equal(all.code, 0, all.err);
    assert.ok((JSON.parse(all.out).events as unknown[]).length >= 1);
  });

  it("a bad filter is an invalid request naming the field (exit 3); a bad --since a usage error (exit 2)", async () => {
    const bad = await run(["audit", "list", "--project", p.projectName, "--method", "Nope"], env);
    assert.equal(bad.code, 3);
    assert.match(bad.err, /method/);
    const usage = await run(["audit", "list", "--project", p.projectName, "--since", "soon"], env);
    assert.equal(usage.code, 2);
  });
});
