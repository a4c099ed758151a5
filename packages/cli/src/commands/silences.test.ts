import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { Command } from "commander";
import { testDialects } from "../../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { UsageError } from "../common.ts";
import type { CliIo } from "./alerts.ts";
import { parseTime, registerSilenceCommands, windowOf } from "./silences.ts";

describe("silence flags (pure parts)", () => {
  it("parseTime takes now, Unix seconds or an ISO time", () => {
    assert.equal(parseTime("now", "--start"), 0n);
    assert.equal(parseTime("1800000000", "--start"), 1800000000n);
    assert.equal(parseTime("2026-11-27T22:00:00Z", "--end"), BigInt(Date.UTC(2026, 10, 27, 22) / 1000));
    assert.throws(
      () => parseTime("tomorrow", "--end"),
      (e: Error) => e instanceof UsageError && /--end/.test(e.message),
    );
  });
  it("windowOf wants --end or --duration, not both, and counts a duration from the start", () => {
    assert.deepEqual(windowOf({ duration: "2h" }, 1000), { startTimeUnix: 0n, endTimeUnix: 8200n });
    assert.deepEqual(windowOf({ start: "5000", duration: "90s" }, 1000), {
      startTimeUnix: 5000n,
      endTimeUnix: 5090n,
    });
    assert.throws(() => windowOf({}, 0), /--end or --duration is required/);
    assert.throws(() => windowOf({ end: "9", duration: "1h" }, 0), /not both/);
  });
});

for (const { dialect, skip } of await testDialects()) {
  describe(`svc silences against the server (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("clisil", ["vm-1"]);
    });
    after(async () => {
      await t?.close();
    });

    async function run(args: string[]) {
      const out: string[] = [];
      const err: string[] = [];
      const io: CliIo = { stdout: (s) => out.push(s), stderr: (s) => err.push(s) };
      const program = new Command("svc")
        .option("--base-url <url>")
        .enablePositionalOptions()
        .exitOverride()
        .configureOutput({ writeOut: () => {}, writeErr: () => {} });
      registerSilenceCommands(program, io);
      const saved = process.env.SVC_TOKEN;
      process.env.SVC_TOKEN = p.owner.session;
      let thrown: unknown;
      try {
        await program.parseAsync(["--base-url", t.baseUrl, ...args], { from: "user" });
      } catch (e) {
        thrown = e;
      } finally {
        if (saved === undefined) delete process.env.SVC_TOKEN;
        else process.env.SVC_TOKEN = saved;
      }
      return { out: out.join(""), err: err.join(""), thrown };
    }

    it("create, list, update and expire a silence", async () => {
      const rule = await t.clients(p.owner.session).alerts.saveAlertRule({
        projectName: p.projectName,
        id: randomUUID(),
        requestId: randomUUID(),
        expectedVersion: "0",
        spec: {
          displayName: "CPU",
          metricId: "cpu_utilization_pct",
          operator: "GREATER_THAN",
          threshold: 90,
          sustainedSeconds: 0,
          severity: "WARNING",
          allVms: true,
          destinationNames: [],
          repeatIntervalSeconds: 0,
        },
      });
      // The server runs on the test clock: a window around it, in Unix seconds.
      const now = Math.floor(t.clock.ms / 1000);
      const created = await run([
        "silences",
        "create",
        "--project",
        p.projectName,
        "--rule",
        rule.name,
        "--vm",
        p.vms[0],
        "--start",
        String(now + 60),
        "--end",
        String(now + 3600),
        "--comment",
        "kernel upgrade",
        "--json",
      ]);
      assert.equal(created.thrown, undefined, String(created.thrown));
      const s = JSON.parse(created.out);
      assert.equal(s.state, "PENDING");
      assert.deepEqual(s.ruleNames, [rule.name]);
      const list = await run(["silences", "list", "--project", p.projectName, "--state", "pending"]);
      assert.match(list.out, new RegExp(`^${s.name}\\tPENDING\\t`));
      const upd = await run([
        "silences",
        "update",
        s.name,
        "--comment",
        "longer",
        "--duration",
        "2h",
        "--json",
      ]);
      assert.equal(upd.thrown, undefined, String(upd.thrown));
      const u = JSON.parse(upd.out);
      assert.deepEqual(
        [u.comment, u.version, Number(u.endTimeUnix) - Number(u.startTimeUnix)],
        ["longer", "2", 7200],
      );
      const exp = await run(["silences", "expire", s.name]);
      assert.match(exp.out, /state\s+EXPIRED/);
      const bad = await run([
        "silences",
        "create",
        "--project",
        p.projectName,
        "--duration",
        "1h",
        "--comment",
        "everything",
      ]);
      assert.match(String(bad.thrown), /ruleNames: a silence needs at least one matcher/);
    });
  });
}
