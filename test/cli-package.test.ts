import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { testDialects } from "../packages/server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../packages/server/testing/harness.ts";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");
const [sqlite] = await testDialects();

/** The CLI as a user installs it: one bundled file in a tarball, installed globally, no registry needed. */
describe("the svc CLI package", () => {
  let work: string;
  let svc: string;
  let t: TestApp;
  let p: SeededProject;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), "svc-cli-pkg-"));
    const tarball = execFileSync(process.execPath, [join(root, "packages/cli/scripts/pack.mjs"), work], {
      encoding: "utf8",
    }).trim();
    // --offline: the package has no dependencies, so installing it must not need the registry.
    execFileSync(
      "npm",
      ["install", "-g", "--prefix", join(work, "global"), "--offline", "--no-audit", "--no-fund", tarball],
      {
        encoding: "utf8",
      },
    );
    svc = join(work, "global", "bin", "svc");
    t = await startTestApp(sqlite.dialect);
    p = await t.seedProject("clipkg", ["vm-1"]);
  });
  after(async () => {
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("answers --version and --help from the installed bin", async () => {
    const version = await run(svc, ["--version"]);
    assert.equal(version.stdout.trim(), "1.1.2");
    const help = await run(svc, ["--help"]);
    assert.match(help.stdout, /^Usage: svc/m);
    assert.match(help.stdout, /service-accounts/);
  });

  it("talks to a server: lists the project's VMs with a key from the environment", async () => {
    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "cli",
      template: "Metrics scraper",
    });
    const { secret } = await owner.keys.createKey({
      parent: sa.name,
      displayName: "cli",
      capabilities: ["monitoring.read"],
      requestId: crypto.randomUUID(),
    });
    const { stdout } = await run(
      svc,
      ["monitoring", "list", "--project", p.projectName, "--output", "json"],
      {
        env: { PATH: process.env.PATH, HOME: work, SVC_BASE_URL: t.baseUrl, SVC_API_KEY: secret },
      },
    );
    assert.match(stdout, /projects\/clipkg\/locations\/dc-1\/vms\/vm-1/);
  });
});
