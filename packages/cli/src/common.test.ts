import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { CommanderError } from "commander";
import { bothCredentialsNote, exitCodeOf, printTable, tokenOf, UsageError } from "./common.ts";

describe("printTable()", () => {
  const rows = [
    ["projects/demo/serviceAccounts/abcdefghijklmnopqrstuvwxyz234567", "ACTIVE", "Metrics scraper"],
    ["projects/demo/serviceAccounts/x", "DISABLED", "Alert manager"],
  ];
  for (const { name, width, want } of [
    { name: "pads columns and keeps everything when piped", width: undefined, want: 89 },
    { name: "shortens the widest column to fit a terminal", width: 50, want: 50 },
  ]) {
    it(name, () => {
      const lines: string[] = [];
      printTable((s) => lines.push(s), ["NAME", "STATE", "TEMPLATE"], rows, width);
      const text = lines.join("");
      assert.equal(Math.max(...text.split("\n").map((l) => l.length)), want);
      assert.match(text, /^NAME\s+STATE\s+TEMPLATE\n/);
      if (width) assert.match(text, /…/);
    });
  }
});

describe("exitCodeOf()", () => {
  for (const { err, want } of [
    { err: new UsageError("x"), want: 2 },
    { err: new CommanderError(1, "commander.unknownOption", "x"), want: 2 },
    { err: new CommanderError(0, "commander.helpDisplayed", "x"), want: 0 },
    { err: new ConnectError("x", Code.InvalidArgument), want: 3 },
    { err: new ConnectError("x", Code.FailedPrecondition), want: 3 },
    { err: new ConnectError("x", Code.Unauthenticated), want: 4 },
    { err: new ConnectError("x", Code.PermissionDenied), want: 4 },
    { err: new ConnectError("x", Code.NotFound), want: 5 },
    { err: new ConnectError("x", Code.Aborted), want: 6 },
    { err: new ConnectError("x", Code.ResourceExhausted), want: 7 },
    { err: new ConnectError("x", Code.Unavailable), want: 7 },
    { err: new ConnectError("x", Code.Internal), want: 1 },
    { err: new Error("socket hang up"), want: 1 },
  ]) {
    it(`${err instanceof ConnectError ? Code[err.code] : err.constructor.name} → ${want}`, () => {
      assert.equal(exitCodeOf(err), want);
    });
  }
});

describe("tokenOf()", () => {
  const dir = mkdtempSync(join(tmpdir(), "svc-token-"));
  const file = join(dir, "key");
  writeFileSync(file, "svcs_fromfile\nignored\n", { mode: 0o600 });
  const none = join(dir, "no-config.json");
  for (const { name, env, want } of [
    {
      name: "SVC_API_KEY first",
      env: { SVC_API_KEY: "svcs_a", SVC_TOKEN: "svcs_b", SVC_API_KEY_FILE: file },
      want: "svcs_a",
    },
    { name: "then SVC_TOKEN", env: { SVC_TOKEN: "svcs_b", SVC_API_KEY_FILE: file }, want: "svcs_b" },
    {
      name: "then the first line of SVC_API_KEY_FILE",
      env: { SVC_API_KEY_FILE: file },
      want: "svcs_fromfile",
    },
  ]) {
    it(name, () => assert.equal(tokenOf({ SVC_CONFIG: none, ...env }), want));
  }
  it("says which credential it uses when both SVC_API_KEY and SVC_TOKEN are set, without either secret", () => {
    const note = bothCredentialsNote({ SVC_API_KEY: "svcs_a", SVC_TOKEN: "svcs_b" });
    assert.match(note ?? "", /using SVC_API_KEY \(unset it to use SVC_TOKEN\)/);
    assert.ok(!note?.includes("svcs_a") && !note?.includes("svcs_b"));
    assert.equal(bothCredentialsNote({ SVC_TOKEN: "svcs_b" }), undefined);
    assert.equal(bothCredentialsNote({ SVC_API_KEY: "svcs_a", SVC_TOKEN: "svcs_a" }), undefined);
  });
  it("refuses when none is set, naming where a key may come from", () => {
    assert.throws(
      () => tokenOf({ SVC_CONFIG: none }),
      (e: Error) => e instanceof UsageError && /SVC_API_KEY_FILE/.test(e.message),
    );
  });
});
