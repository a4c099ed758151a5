import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { exitCodeOf } from "../common.ts";
import { buildProgram } from "../program.ts";

describe("svc auth login|whoami|logout (in-process against startTestApp)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("login", ["web-1"]);
  });
  after(() => t?.close());

  async function run(args: string[], env: Record<string, string>, stdin?: string) {
    const out: string[] = [];
    const err: string[] = [];
    const names = ["SVC_TOKEN", "SVC_API_KEY", "SVC_PASSWORD", "SVC_CONFIG"];
    const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
    for (const n of names) delete process.env[n];
    Object.assign(process.env, { SVC_CONFIG: "/nonexistent/svc-config.json", ...env });
    let code = 0;
    try {
      await buildProgram({
        stdout: (s) => out.push(s),
        stderr: (s) => err.push(s),
        stdin: stdin === undefined ? undefined : async () => stdin,
      }).parseAsync(["--base-url", t.baseUrl, ...args], { from: "user" });
    } catch (e) {
      code = exitCodeOf(e);
      err.push(String(e));
    } finally {
      for (const n of names) {
        if (saved[n] === undefined) delete process.env[n];
        else process.env[n] = saved[n];
      }
    }
    return { code, out: out.join(""), err: err.join("") };
  }

  it("signs in with the password from stdin or SVC_PASSWORD, never an argument; the session works until logout", async () => {
    const viaStdin = await run(["auth", "login", "--email", p.owner.email], {}, `${p.owner.password}\n`);
    assert.equal(viaStdin.code, 0, viaStdin.err);
    const token = viaStdin.out.trim();
    assert.ok(token.length > 20);
    assert.ok(!viaStdin.err.includes(token), "the token goes to stdout only");
    const viaEnv = await run(["auth", "login", "--email", p.owner.email], { SVC_PASSWORD: p.owner.password });
    assert.equal(viaEnv.code, 0, viaEnv.err);

    const who = await run(["auth", "whoami", "--output", "json"], { SVC_TOKEN: token });
    assert.equal(JSON.parse(who.out).kind, "HUMAN_SESSION");
    const list = await run(["service-accounts", "list", "--project", p.projectName], { SVC_TOKEN: token });
    assert.equal(list.code, 0, list.err);

    assert.equal((await run(["auth", "logout"], { SVC_TOKEN: token })).code, 0);
    assert.equal((await run(["auth", "whoami"], { SVC_TOKEN: token })).code, 4, "the session ended");
  });

  it("refuses a wrong password (exit 4) and takes no --password flag (exit 2)", async () => {
    const wrong = await run(["auth", "login", "--email", p.owner.email], {
      SVC_PASSWORD: "not-the-password-1",
    });
    assert.equal(wrong.code, 4, wrong.err);
    const flag = await run(["auth", "login", "--email", p.owner.email, "--password", "x"], {});
    assert.equal(flag.code, 2);
  });
});
