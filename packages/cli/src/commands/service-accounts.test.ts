import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse as parseYaml } from "yaml";
import { testDialects } from "../../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { runSvc as run } from "../run-in-process.ts";
import { templateOf } from "./service-accounts.ts";

describe("svc service-accounts, config, output and exit codes (in-process against startTestApp)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  let env: Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), "svc-cli-"));
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("sacli", ["web-1", "web-2"]);
    env = { SVC_BASE_URL: t.baseUrl, SVC_TOKEN: p.owner.session, SVC_CONFIG: join(dir, "none.json") };
  });
  after(() => t?.close());

  it("reads a template by name in any case or by its short form", () => {
    assert.equal(templateOf("Metrics scraper"), "Metrics scraper");
    assert.equal(templateOf("scraper"), "Metrics scraper");
    assert.equal(templateOf("alert-manager"), "Alert manager");
    assert.throws(() => templateOf("admin"), /--template must be one of/);
  });

  it("creates from a template, lists, gets, disables and enables; keys follow the account", async () => {
    const created = await run(
      [
        "service-accounts",
        "create",
        "--project",
        p.projectName,
        "--display-name",
        "graf",
        "--template",
        "scraper",
        "--json",
      ],
      env,
    );
    assert.equal(created.code, 0, created.err);
    const sa = JSON.parse(created.out) as {
      name: string;
      template: string;
      permissions: string[];
      state: string;
    };
    assert.equal(sa.template, "Metrics scraper");
    assert.deepEqual(sa.permissions, ["monitoring.read"]);
    assert.equal(sa.state, "ACTIVE");
    const id = sa.name.split("/").at(-1)!;

    const list = await run(["service-accounts", "list", "--project", p.projectName], env);
    assert.equal(list.code, 0, list.err);
    assert.match(list.out, /^NAME\s+STATE\s+TEMPLATE/);
    assert.match(list.out, new RegExp(`${sa.name}\\s+ACTIVE\\s+Metrics scraper`));

    // A bare id with the project from SVC_PROJECT.
    const got = await run(["sa", "get", id, "--output", "yaml"], { ...env, SVC_PROJECT: p.projectName });
    assert.equal(got.code, 0, got.err);
    assert.equal((parseYaml(got.out) as { name: string }).name, sa.name);

    const key = await run(["service-accounts", "keys", "create", sa.name, "--display-name", "ci"], env);
    assert.equal(key.code, 0, key.err);
    const secret = key.out.trim();
    const works = async () =>
      (
        await run(["monitoring", "list", "--project", p.projectName, "--inventory-only"], {
          ...env,
          SVC_TOKEN: "",
          SVC_API_KEY: secret,
        })
      ).code;
    assert.equal(await works(), 0);

    const disabled = await run(["service-accounts", "disable", sa.name], env);
    assert.equal(disabled.code, 0, disabled.err);
    assert.match(disabled.err, /is DISABLED/);
    assert.equal(await works(), 4, "a disabled account's key is denied (exit code 4)");
    await run(["service-accounts", "enable", sa.name], env);
    assert.equal(await works(), 0);

    const keys = await run(
      ["service-accounts", "keys", "list", id, "--project", p.projectName, "--json"],
      env,
    );
    assert.deepEqual(
      (JSON.parse(keys.out) as { displayName: string; state: string }[]).map((k) => [k.displayName, k.state]),
      [["ci", "ACTIVE"]],
    );
  });

  it("gives meaningful exit codes: usage 2, invalid 3, not found 5", async () => {
    assert.equal((await run(["service-accounts", "list"], env)).code, 2, "no project anywhere");
    const bad = await run(
      [
        "service-accounts",
        "create",
        "--project",
        p.projectName,
        "--display-name",
        "",
        "--template",
        "scraper",
      ],
      env,
    );
    assert.equal(bad.code, 3, bad.err);
    const missing = await run(["service-accounts", "get", `${p.projectName}/serviceAccounts/nosuch`], env);
    assert.equal(missing.code, 5, missing.err);
  });

  it("keeps defaults in a 0600 config file: project, output, and a key file instead of a key", async () => {
    const config = join(dir, "xdg", "svc", "config.json");
    const cenv = { SVC_CONFIG: config, SVC_BASE_URL: t.baseUrl };
    assert.equal((await run(["config", "set", "project", p.projectName], cenv)).code, 0);
    assert.equal(statSync(config).mode & 0o777, 0o600);
    assert.equal((await run(["config", "set", "output", "yaml"], cenv)).code, 0);
    const refused = await run(["config", "set", "keyFile", "svcs_notakeyfile"], cenv);
    assert.equal(refused.code, 2, "a key is never stored as a setting");
    const keyFile = join(dir, "key");
    writeFileSync(keyFile, `${p.owner.session}\n`, { mode: 0o600 });
    assert.equal((await run(["config", "set", "keyFile", keyFile], cenv)).code, 0);
    assert.match((await run(["config", "get"], cenv)).out, /project\tprojects\/sacli/);

    // No --project, no SVC_PROJECT, no key in the environment: all from the file.
    const listed = await run(["service-accounts", "list"], cenv);
    assert.equal(listed.code, 0, listed.err);
    assert.ok(Array.isArray(parseYaml(listed.out)), "output yaml from the config file");
    // A flag still wins over the file.
    const asJson = await run(["service-accounts", "list", "--output", "json"], cenv);
    assert.ok(Array.isArray(JSON.parse(asJson.out)));
    assert.equal((await run(["config", "unset", "keyFile"], cenv)).code, 0);
    const noKey = await run(["service-accounts", "list"], cenv);
    assert.equal(noKey.code, 2);
    assert.match(noKey.err, /SVC_API_KEY/);
  });

  it("prints completion scripts for bash, zsh and fish from the command tree", async () => {
    const bash = await run(["completion", "bash"], env);
    assert.match(bash.out, /complete -o default -F _svc svc/);
    const syntax = spawnSync("bash", ["-n"], { input: bash.out });
    if (!syntax.error) assert.equal(syntax.status, 0, String(syntax.stderr));
    assert.match(bash.out, /'service-accounts keys'\) words='create list rotate recover revoke/);
    assert.match((await run(["completion", "zsh"], env)).out, /^#compdef svc\n.*bashcompinit/s);
    const fish = await run(["completion", "fish"], env);
    assert.match(
      fish.out,
      /complete -c svc -n 'test \(__svc_path\) = '\\''keys'\\''' -a 'create list rotate recover revoke'/,
    );
    assert.equal((await run(["completion", "tcsh"], env)).code, 2);
  });
});
