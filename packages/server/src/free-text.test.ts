import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { SvcError as ClientError } from "@svc/sdk";
import { testDialects } from "../testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../testing/harness.ts";
import { SvcError } from "./errors.ts";
import { checkFreeText, MAX_DISPLAY_NAME } from "./free-text.ts";

/** Issue 41: free text is bounded and refuses what can hide or forge what a reader sees. */
const refusedBy = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof SvcError, String(e));
    assert.equal(e.reason, "INVALID_FIELD");
    return e.message;
  }
  return "accepted";
};

describe("checkFreeText", () => {
  const name = { max: 10, required: true };
  it("answers the trimmed text; counts characters, not UTF-16 units", () => {
    assert.equal(checkFreeText("displayName", "  web  ", name), "web");
    assert.equal(checkFreeText("displayName", "🚀".repeat(10), name), "🚀".repeat(10));
    assert.equal(checkFreeText("password", "  pw  ", { max: 10, trim: false }), "  pw  ");
    assert.equal(
      checkFreeText("comment", "line 1\nline 2\tx\r\n", { max: 50, multiline: true }),
      "line 1\nline 2\tx",
    );
    assert.equal(checkFreeText("displayName", "", { max: 10 }), "");
    assert.equal(checkFreeText("displayName", "Ünïcödé — ok ‎", { max: 20 }), "Ünïcödé — ok ‎");
  });
  it("refuses, naming the field: too long, empty when required, NUL, controls, bidi overrides, lone surrogates", () => {
    assert.equal(
      refusedBy(() => checkFreeText("displayName", "x".repeat(11), name)),
      "displayName: must be at most 10 characters",
    );
    assert.equal(
      refusedBy(() => checkFreeText("displayName", "   ", name)),
      "displayName: is required",
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "a\u0000b", name)),
      /^displayName: must not contain a NUL/,
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "a\nb", name)),
      /control character \(U\+000A\)/,
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "a\u001bb", name)),
      /U\+001B/,
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "a\u0085b", name)),
      /U\+0085/,
    );
    assert.match(
      refusedBy(() => checkFreeText("comment", "a\u007fb", { max: 9, multiline: true })),
      /U\+007F/,
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "ab\u202ecd", name)),
      /bidirectional override or isolate \(U\+202E\)/,
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "ab\u2067cd", name)),
      /U\+2067/,
    );
    assert.match(
      refusedBy(() => checkFreeText("displayName", "a\ud800b", name)),
      /unpaired surrogate/,
    );
    assert.match(
      refusedBy(() => checkFreeText("password", "pw\u0000", { max: 10, trim: false })),
      /^password: /,
    );
  });
});

for (const { dialect, skip } of await testDialects()) {
  describe(`free text through the API (${dialect.name})`, { skip }, () => {
    let t: TestApp;
    let p: SeededProject;
    before(async () => {
      t = await startTestApp(dialect);
      p = await t.seedProject("texts", ["vm-1"]);
    });
    after(() => t?.close());

    async function field(call: Promise<unknown>): Promise<string> {
      try {
        await call;
      } catch (err) {
        const e = ClientError.fromError(err);
        assert.equal(e.reason, "INVALID_FIELD", e.message);
        return e.field ?? "";
      }
      return "accepted";
    }
    const huge = "x".repeat(100_000);

    it("operator-created display names are bounded (100,000 characters were accepted) and plain", async () => {
      assert.equal(
        await field(t.admin.projects.createProject({ projectId: "huge-name", displayName: huge })),
        "displayName",
      );
      assert.equal(
        await field(
          t.admin.projects.createProject({ projectId: "bidi-name", displayName: "acme\u202egnp.exe" }),
        ),
        "displayName",
      );
      const user = { email: "huge@example.com", password: "a-good-long-password" };
      assert.equal(await field(t.admin.users.createUser({ ...user, displayName: huge })), "displayName");
      assert.equal(
        await field(t.admin.users.createUser({ ...user, displayName: "Eve\u0000Admin" })),
        "displayName",
      );
      const vm = {
        parent: p.projectName,
        vmId: "vm-x",
        location: "dc-1",
        distribution: "debian-12",
        vcpus: 1,
        memoryBytes: 1n << 30n,
      };
      assert.equal(await field(t.admin.vms.createVM({ ...vm, displayName: huge })), "displayName");
      assert.equal(
        await field(t.admin.vms.updateVM({ name: p.vms[0], displayName: "a\u001b[31mred" })),
        "displayName",
      );
      assert.equal(
        await field(
          t.admin.vms.createMaintenanceWindow({
            parent: p.projectName,
            vms: [],
            startTimeUnix: 1n,
            endTimeUnix: 2n,
            reason: huge,
          }),
        ),
        "reason",
      );
      // None was saved; a plain name of the longest length is.
      const names = (await t.admin.projects.listProjects({})).projects.map((x) => x.name);
      assert.ok(!names.includes("projects/huge-name") && !names.includes("projects/bidi-name"));
      const ok = await t.admin.projects.createProject({
        projectId: "long-name",
        displayName: "é".repeat(MAX_DISPLAY_NAME),
      });
      assert.equal(ok.displayName, "é".repeat(MAX_DISPLAY_NAME));
    });

    it("passwords are bounded (4 MB was accepted and hashed), at creation and at sign-in", async () => {
      const big = "p".repeat(4_000_000); // 4 MB, inside the request body limit
      assert.equal(
        await field(
          t.admin.users.createUser({ email: "big-pw@example.com", displayName: "", password: big }),
        ),
        "password",
      );
      assert.equal(
        await field(t.clients().sessions.login({ email: p.owner.email, password: big })),
        "password",
      );
      assert.equal(
        await field(t.clients().sessions.login({ email: `${"e".repeat(300)}@example.com`, password: "x" })),
        "email",
      );
    });

    it("people's free text refuses NUL, control and bidi-override characters, naming the field", async () => {
      const owner = t.clients(p.owner.session);
      assert.equal(
        await field(
          owner.serviceAccounts.createServiceAccount({
            parent: p.projectName,
            displayName: "ci\u202e",
            template: "Metrics scraper",
          }),
        ),
        "displayName",
      );
      assert.equal(
        await field(
          owner.keys.createKey({
            parent: p.projectName,
            displayName: "k\u0000",
            capabilities: ["monitoring.read"],
            requestId: randomUUID(),
          }),
        ),
        "displayName",
      );
      assert.equal(
        await field(
          owner.destinations.createDestination({
            projectName: p.projectName,
            displayName: "ops\u0007",
            kind: "EMAIL",
            recipients: [p.owner.user],
            requestId: randomUUID(),
          }),
        ),
        "displayName",
      );
      const now = BigInt(Math.floor(t.clock.ms / 1000));
      assert.equal(
        await field(
          owner.silences.createSilence({
            projectName: p.projectName,
            requestId: randomUUID(),
            comment: "deploy \u2066window",
            vmNames: [p.vms[0]],
            startTimeUnix: now,
            endTimeUnix: now + 600n,
          }),
        ),
        "comment",
      );
      // A comment keeps its line breaks.
      const s = await owner.silences.createSilence({
        projectName: p.projectName,
        requestId: randomUUID(),
        comment: "deploy\nwindow",
        vmNames: [p.vms[0]],
        startTimeUnix: now,
        endTimeUnix: now + 600n,
      });
      assert.equal(s.comment, "deploy\nwindow");
    });
  });
}
