import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { testDialects } from "../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../server/testing/harness.ts";

const run = promisify(execFile);
const sdkDir = resolve(import.meta.dirname, "..");
const docs = readFileSync(resolve(sdkDir, "../../docs/sdk.md"), "utf8");

/** The first fenced block under a heading of docs/sdk.md (the doc-test runs it too, in the checkout). */
function docBlock(heading: string): string {
  const at = docs.indexOf(`\n## ${heading}\n`);
  assert.ok(at >= 0, `docs/sdk.md has a section "${heading}"`);
  const start = docs.indexOf("\n```", at);
  const body = docs.slice(docs.indexOf("\n", start + 1) + 1);
  return body.slice(0, body.indexOf("```"));
}

/** A TypeScript consumer: the declarations must describe what the example uses. */
const typed = `import { Code } from "@connectrpc/connect";
import { createKeyWithRecovery, createSvcClients, type IssuedKey, SvcError } from "@svc/sdk";
import type { VMMonitoring } from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";

const svc = createSvcClients({ baseUrl: process.env.SVC_BASE_URL ?? "", token: process.env.SVC_SESSION });
const vms: VMMonitoring[] = (
  await svc.monitoring.listVMMonitoring({ projectName: process.env.SVC_PROJECT ?? "", inventoryOnly: true })
).vms;
const issued: IssuedKey = await createKeyWithRecovery(svc.keys, {
  parent: process.env.SVC_SA ?? "",
  displayName: "packed",
  capabilities: ["monitoring.read"],
});
const e: unknown = undefined;
if (e instanceof SvcError && e.code === Code.InvalidArgument) console.log(e.reason, e.field, e.retryAfterSeconds);
console.log(vms.length, issued.key.name, issued.secret.startsWith("svcs_"));
`;

describe("@svc/sdk packed with npm pack works in a plain Node project", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  const dir = mkdtempSync(join(tmpdir(), "svc-sdk-consumer-"));
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("packed", ["web-1", "web-2"]);
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("builds, packs, installs the tarball, runs the docs example and type-checks a consumer", {
    timeout: 120_000,
  }, async () => {
    const { stdout: packed } = await run(process.execPath, [join(sdkDir, "scripts/pack.mjs"), dir]);
    const tarball = packed.trim().split("\n").at(-1)!;
    assert.match(tarball, /svc-sdk-1\.1\.2\.tgz$/);
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({ name: "consumer", private: true, type: "module" }),
    );
    await run(
      "npm",
      ["install", tarball, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"],
      {
        cwd: dir,
      },
    );
    const manifest = JSON.parse(readFileSync(join(dir, "node_modules/@svc/sdk/package.json"), "utf8"));
    assert.equal(manifest.exports["."].types, "./dist/index.d.ts");

    const owner = t.clients(p.owner.session);
    const sa = await owner.serviceAccounts.createServiceAccount({
      parent: p.projectName,
      displayName: "packed",
      template: "Metrics scraper",
    });
    const key = await owner.keys.createKey({
      parent: sa.name,
      displayName: "reader",
      capabilities: ["monitoring.read"],
      requestId: crypto.randomUUID(),
    });
    writeFileSync(join(dir, "quickstart.mjs"), docBlock("A first program"));
    // Only the consumer's own node_modules: no NODE_OPTIONS (tsx) from the test runner.
    const env = {
      PATH: process.env.PATH ?? "",
      SVC_BASE_URL: t.baseUrl,
      SVC_API_KEY: key.secret!,
      SVC_PROJECT: p.projectName,
    };
    const { stdout } = await run(process.execPath, ["quickstart.mjs"], { cwd: dir, env });
    const lines = stdout.trim().split("\n");
    assert.equal(lines.length, 3);
    for (const [i, vm] of p.vms.entries()) assert.equal(lines[i].split("\t")[0], vm);
    assert.equal(lines[2], "refused: invalid_argument INVALID_FIELD field=pageSize retryable=false");

    writeFileSync(join(dir, "typed.ts"), typed);
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    await run(
      process.execPath,
      [
        tsc,
        "--noEmit",
        "--strict",
        "--skipLibCheck",
        "--target",
        "ES2022",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
        "--types",
        "node",
        "--typeRoots",
        resolve(sdkDir, "../../node_modules/@types"),
        "typed.ts",
      ],
      { cwd: dir },
    ).catch((e: { stdout?: string }) => assert.fail(`the declarations do not type-check:\n${e.stdout}`));

    // The compiled recovery helper against the server, from the packed build.
    writeFileSync(
      join(dir, "typed.mjs"),
      typed
        .replace(/^import type .*$/m, "")
        .replace(/: VMMonitoring\[\]|: IssuedKey|: unknown/g, "")
        .replace(", type IssuedKey", ""),
    );
    const { stdout: out2 } = await run(process.execPath, ["typed.mjs"], {
      cwd: dir,
      env: {
        PATH: env.PATH,
        SVC_BASE_URL: t.baseUrl,
        SVC_SESSION: p.owner.session,
        SVC_SA: sa.name,
        SVC_PROJECT: p.projectName,
      },
    }).catch((e: { stderr?: string }) => assert.fail(String(e.stderr)));
    assert.match(out2, /^2 projects\/packed\/serviceAccounts\/[a-z0-9]+\/keys\/[a-z0-9]+ true$/m);
  });
});
