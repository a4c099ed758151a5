import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { testDialects } from "../../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { registerKeyCommands } from "./keys.ts";

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
    assert.match(list.stdout, /ACTIVE\s+monitoring\.read/);
  });

  it("create --request-id: a rerun after a lost answer revokes the lost key and prints a replacement", async () => {
    const requestId = randomUUID();
    const args = ["keys", "create", "--parent", saName, "--display-name", "lost", "--request-id", requestId];
    const first = await svc(args, env);
    assert.match(first.stderr, new RegExp(`run it again with --request-id ${requestId}`));
    const lost = first.stdout.trim();
    assert.ok(await works(lost));
    // The caller never saw that answer and runs the same command again with the same request id.
    const again = await svc(args, env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /earlier attempt .* whose answer was lost; its secret cannot be shown again/);
    const replacement = again.stdout.trim();
    assert.match(replacement, /^svcs_/);
    assert.notEqual(replacement, lost);
    assert.equal(await works(lost), false, "the lost key is revoked");
    assert.ok(await works(replacement));
  });

  it("rotate --request-id: a rerun after a lost answer revokes the lost key and prints a replacement", async () => {
    const created = await svc(["keys", "create", "--parent", saName, "--display-name", "rot", "--json"], env);
    const { key, secret: original } = JSON.parse(created.stdout) as { key: { name: string }; secret: string };
    const requestId = randomUUID();
    const args = ["keys", "rotate", "--name", key.name, "--overlap", "3600", "--request-id", requestId];
    const lost = (await svc(args, env)).stdout.trim();
    const again = await svc([...args, "--json"], env);
    assert.equal(again.code, 0, again.stderr);
    const res = JSON.parse(again.stdout) as {
      secret: string;
      requestId: string;
      revokedKey: { state: string };
    };
    assert.equal(res.requestId, requestId);
    assert.equal(res.revokedKey.state, "REVOKED");
    assert.equal(await works(lost), false, "the lost key is revoked");
    assert.ok(await works(res.secret));
    assert.ok(await works(original), "the key rotated from keeps its overlap");
  });

  it("retries an ambiguous failure itself with the same request id, then recovers (in-process)", async () => {
    const ids: string[] = [];
    let dropped = false;
    // The first CreateKey reaches the server, which issues the key; its answer never comes back.
    const lossy: typeof globalThis.fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith("/CreateKey")) {
        ids.push(JSON.parse(new TextDecoder().decode(init?.body as Uint8Array)).requestId);
        if (!dropped) {
          dropped = true;
          await res.arrayBuffer();
          throw new TypeError("fetch failed");
        }
      }
      return res;
    };
    const out: string[] = [];
    const err: string[] = [];
    const program = new Command("svc").option("--base-url <url>").exitOverride();
    registerKeyCommands(program, {
      fetch: lossy,
      sleep: async () => {},
      stdout: (s) => out.push(s),
      stderr: (s) => err.push(s),
    });
    const saved = process.env.SVC_TOKEN;
    process.env.SVC_TOKEN = p.owner.session;
    try {
      await program.parseAsync(
        ["--base-url", t.baseUrl, "keys", "create", "--parent", saName, "--display-name", "flaky"],
        { from: "user" },
      );
    } finally {
      if (saved === undefined) delete process.env.SVC_TOKEN;
      else process.env.SVC_TOKEN = saved;
    }
    assert.equal(ids.length, 2);
    assert.equal(ids[0], ids[1], "one request id per invocation");
    assert.match(err.join(""), new RegExp(`retrying with the same request id ${ids[0]}`));
    const secret = out.join("").trim();
    assert.ok(await works(secret));
    const flaky = (await t.clients(p.owner.session).keys.listKeys({ parent: saName })).keys.filter(
      (k) => k.displayName === "flaky",
    );
    assert.deepEqual(
      flaky.map((k) => k.state).sort(),
      ["ACTIVE", "REVOKED"],
      "the lost key is revoked, the replacement works",
    );
  });

  it("after its last retry prints the request id to finish by hand; the rerun recovers", async () => {
    // Every CreateKey reaches the server and every answer is lost.
    const lossy: typeof globalThis.fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith("/CreateKey")) {
        await res.arrayBuffer();
        throw new TypeError("fetch failed");
      }
      return res;
    };
    const run = async (fetchFn: typeof globalThis.fetch, extra: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const program = new Command("svc").option("--base-url <url>").exitOverride();
      registerKeyCommands(program, {
        fetch: fetchFn,
        sleep: async () => {},
        stdout: (s) => out.push(s),
        stderr: (s) => err.push(s),
      });
      const saved = process.env.SVC_TOKEN;
      process.env.SVC_TOKEN = p.owner.session;
      let thrown: unknown;
      try {
        await program.parseAsync(
          [
            "--base-url",
            t.baseUrl,
            "keys",
            "create",
            "--parent",
            saName,
            "--display-name",
            "by-hand",
            ...extra,
          ],
          { from: "user" },
        );
      } catch (e) {
        thrown = e;
      } finally {
        if (saved === undefined) delete process.env.SVC_TOKEN;
        else process.env.SVC_TOKEN = saved;
      }
      return { out: out.join(""), err: err.join(""), thrown };
    };
    const first = await run(lossy, []);
    assert.ok(first.thrown, "no answer, no secret");
    const id = /Run the same command again with --request-id (\S+)/.exec(first.err)?.[1];
    assert.ok(id, first.err);
    const again = await run(globalThis.fetch, ["--request-id", id]);
    assert.equal(again.thrown, undefined, String(again.thrown));
    assert.ok(await works(again.out.trim()));
    const keys = (await t.clients(p.owner.session).keys.listKeys({ parent: saName })).keys.filter(
      (k) => k.displayName === "by-hand",
    );
    assert.deepEqual(
      keys.map((k) => k.state).sort(),
      ["ACTIVE", "REVOKED"],
      "one key issued by the lost run",
    );
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
