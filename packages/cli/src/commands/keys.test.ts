import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { testDialects } from "../../../server/src/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/src/testing/harness.ts";

const bin = resolve(fileURLToPath(import.meta.url), "../../../bin/svc.js");

function svc(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 60_000 },
      (err, stdout, stderr) => res({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("svc keys and svc monitoring (CLI against an in-process server)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  let env: Record<string, string>;
  let saName: string;
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("cli", ["web-1", "web-2"]);
    env = { SVC_BASE_URL: t.baseUrl, SVC_TOKEN: p.owner.session };
    saName = (
      await t.clients(p.owner.session).serviceAccounts.createServiceAccount({
        parent: p.projectName,
        displayName: "s",
        template: "Metrics scraper",
      })
    ).name;
  });
  after(() => t?.close());

  const works = async (key: string) =>
    (
      await svc(["monitoring", "list", "--project", p.projectName, "--inventory-only"], {
        ...env,
        SVC_TOKEN: key,
      })
    ).code === 0;

  it("creates a key and prints its secret once, to stdout only", async () => {
    const r = await svc(["keys", "create", "--parent", saName, "--display-name", "ci"], env);
    assert.equal(r.code, 0, r.stderr);
    const secret = r.stdout.trim();
    assert.match(secret, /^svcs_/);
    assert.ok(!r.stderr.includes(secret));
    assert.ok(await works(secret));
    const list = await svc(["keys", "list", "--parent", saName], env);
    assert.ok(!list.stdout.includes(secret), "listing never shows a secret");
    assert.match(list.stdout, /ACTIVE\tmonitoring\.read/);
  });

  it("recovers a lost create exactly as documented: revoke the lost key, then a replacement", async () => {
    const requestId = randomUUID();
    const first = await svc(
      ["keys", "create", "--parent", saName, "--display-name", "lost", "--request-id", requestId],
      env,
    );
    const lost = first.stdout.trim();
    assert.ok(await works(lost));
    // The caller never saw that answer and runs the same command again with the same request id.
    const again = await svc(
      ["keys", "create", "--parent", saName, "--display-name", "lost", "--request-id", requestId],
      env,
    );
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /earlier attempt whose answer was lost; revoking it/);
    const replacement = again.stdout.trim();
    assert.notEqual(replacement, lost);
    assert.equal(await works(lost), false, "the lost key is revoked");
    assert.ok(await works(replacement));
  });

  it("revokes at once and refuses to take a token from the command line", async () => {
    const r = await svc(["keys", "create", "--parent", saName, "--display-name", "short"], env);
    const name = (await t.clients(p.owner.session).keys.listKeys({ parent: saName })).keys.find(
      (k) => k.displayName === "short",
    )!.name;
    const rev = await svc(["keys", "revoke", "--name", name], env);
    assert.match(rev.stdout, /REVOKED/);
    assert.equal(await works(r.stdout.trim()), false);
    const noToken = await svc(["monitoring", "list", "--project", p.projectName], {
      SVC_BASE_URL: t.baseUrl,
    });
    assert.equal(noToken.code, 2);
    assert.match(noToken.stderr, /SVC_TOKEN/);
  });

  it("lists the project's VMs", async () => {
    const r = await svc(
      ["monitoring", "list", "--project", p.projectName, "--inventory-only", "--json"],
      env,
    );
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      (JSON.parse(r.stdout) as { name: string }[]).map((v) => v.name),
      p.vms,
    );
  });
});
