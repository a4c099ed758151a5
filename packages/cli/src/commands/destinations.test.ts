import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { testDialects } from "../../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { UsageError } from "../common.ts";
import { registerDeliveryCommands } from "./deliveries.ts";
import {
  cleanUrl,
  createRequestOf,
  type DestinationIo,
  parseKind,
  parseOverlap,
  registerDestinationCommands,
  updateRequestOf,
  urlOf,
} from "./destinations.ts";

const project = "projects/acme";
const dest = `${project}/destinations/0123456789abcdef0123`;
const slackUrl = "https://hooks.slack.com/services/T000/B000/sekrit";

describe("destination flags (pure parts)", () => {
  it("parseKind upper-cases and refuses unknown kinds", () => {
    assert.equal(parseKind("slack"), "SLACK");
    assert.equal(parseKind("WEBHOOK"), "WEBHOOK");
    assert.throws(() => parseKind("sms"), /--kind must be one of EMAIL, WEBHOOK, SLACK, TEAMS, DISCORD/);
  });

  it("parseOverlap takes seconds or a duration up to 24h", () => {
    assert.equal(parseOverlap("0"), 0);
    assert.equal(parseOverlap("3600"), 3600);
    assert.equal(parseOverlap("30m"), 1800);
    assert.equal(parseOverlap("24h"), 86400);
    assert.equal(parseOverlap("1d"), 86400);
    assert.throws(() => parseOverlap("25h"), /0\.\.24h/);
    assert.throws(() => parseOverlap("-1"), UsageError);
    assert.throws(() => parseOverlap("soon"), UsageError);
  });

  it("cleanUrl trims a file's newline, wants one https URL, and never repeats the URL", () => {
    assert.equal(cleanUrl(`${slackUrl}\n`, "--url-file u"), slackUrl);
    for (const bad of [
      "",
      "  \n",
      `${slackUrl}\n${slackUrl}\n`,
      "not a url",
      "http://hooks.slack.com/sekrit",
    ]) {
      assert.throws(
        () => cleanUrl(bad, "--url-file u"),
        (e: Error) =>
          e instanceof UsageError && /^--url-file u: /.test(e.message) && !e.message.includes("sekrit"),
        JSON.stringify(bad),
      );
    }
  });

  it("urlOf reads a file or stdin without warning, and warns about --url for chat kinds only", async () => {
    const dir = mkdtempSync(join(tmpdir(), "svc-dest-url-"));
    try {
      const file = join(dir, "url");
      writeFileSync(file, `${slackUrl}\n`);
      const errs: string[] = [];
      const io: DestinationIo = { stderr: (s) => errs.push(s), stdin: async () => `${slackUrl}\r\n` };
      assert.equal(await urlOf({ urlFile: file }, "SLACK", io), slackUrl);
      assert.equal(await urlOf({ urlFile: "-" }, "SLACK", io), slackUrl);
      assert.equal(await urlOf({}, "SLACK", io), undefined);
      assert.equal(
        await urlOf({ url: "https://example.com/hook" }, "WEBHOOK", io),
        "https://example.com/hook",
      );
      assert.deepEqual(errs, []);
      await urlOf({ url: slackUrl }, "DISCORD", io);
      assert.match(errs.join(""), /warning: a DISCORD webhook URL is a secret .*shell history.*--url-file/);
      await urlOf({ url: "https://example.com/hook" }, undefined, io);
      assert.match(errs.at(-1) ?? "", /Slack, Teams or Discord webhook URL is a secret/);
      await assert.rejects(
        urlOf({ url: slackUrl, urlFile: file }, "SLACK", io),
        /either --url or --url-file/,
      );
      await assert.rejects(urlOf({ urlFile: join(dir, "missing") }, "SLACK", io), /--url-file: .*ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("createRequestOf wants recipients for EMAIL and a URL for the others", () => {
    const rid = randomUUID();
    assert.deepEqual(
      createRequestOf(
        { kind: "email", displayName: "ops", recipient: ["users/u1", "users/u2"] },
        undefined,
        rid,
      ),
      {
        projectName: "",
        kind: "EMAIL",
        displayName: "ops",
        recipients: ["users/u1", "users/u2"],
        url: "",
        requestId: rid,
      },
    );
    assert.equal(createRequestOf({ kind: "TEAMS", displayName: "t" }, slackUrl, rid).url, slackUrl);
    assert.throws(() => createRequestOf({ kind: "EMAIL", displayName: "x" }, undefined, rid), /--recipient/);
    assert.throws(
      () => createRequestOf({ kind: "EMAIL", displayName: "x", recipient: ["users/u"] }, slackUrl, rid),
      /has no URL/,
    );
    assert.throws(() => createRequestOf({ kind: "SLACK", displayName: "x" }, undefined, rid), /--url-file/);
    assert.deepEqual(
      createRequestOf({ kind: "opsgenie", displayName: "og" }, undefined, rid, "k").integrationKey,
      "k",
    );
    assert.throws(
      () => createRequestOf({ kind: "PAGERDUTY", displayName: "x" }, undefined, rid),
      /--integration-key-file/,
    );
    assert.throws(
      () => createRequestOf({ kind: "WEBHOOK", displayName: "x" }, slackUrl, rid, "k"),
      /only for PAGERDUTY and OPSGENIE/,
    );
    assert.throws(
      () => createRequestOf({ kind: "WEBHOOK", displayName: "x", recipient: ["users/u"] }, slackUrl, rid),
      /only for EMAIL/,
    );
  });

  it("updateRequestOf sends only what changes and refuses contradictions", () => {
    assert.deepEqual(updateRequestOf(dest, { pause: true }, undefined), {
      name: dest,
      displayName: undefined,
      paused: true,
      recipients: [],
      updateRecipients: false,
      url: undefined,
    });
    assert.equal(updateRequestOf(dest, { resume: true }, undefined).paused, false);
    const r = updateRequestOf(dest, { recipient: ["users/a"], replaceRecipients: true }, undefined);
    assert.deepEqual([r.recipients, r.updateRecipients], [["users/a"], true]);
    assert.throws(
      () => updateRequestOf(dest, { pause: true, resume: true }, undefined),
      /--pause or --resume/,
    );
    assert.throws(() => updateRequestOf(dest, { recipient: ["users/a"] }, undefined), /--replace-recipients/);
    assert.throws(() => updateRequestOf(dest, { replaceRecipients: true }, undefined), /needs the new list/);
    assert.throws(() => updateRequestOf(dest, {}, undefined), /nothing to change/);
  });
});

/** A Connect JSON peer in a fetch function: answers by RPC name and records what it was sent. */
class FakeServer {
  calls: { method: string; body: Record<string, unknown> }[] = [];
  handlers = new Map<string, (body: Record<string, unknown>, n: number) => Response>();
  fetch: typeof globalThis.fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const method = url.slice(url.lastIndexOf("/") + 1);
    const raw =
      init?.body instanceof Uint8Array ? new TextDecoder().decode(init.body) : String(init?.body ?? "{}");
    const body = JSON.parse(raw) as Record<string, unknown>;
    this.calls.push({ method, body });
    const h = this.handlers.get(method);
    if (!h) return error(501, "unimplemented", `${method} is not faked`);
    return h(body, this.calls.filter((c) => c.method === method).length);
  };
  on(method: string, h: (body: Record<string, unknown>, n: number) => Response): this {
    this.handlers.set(method, h);
    return this;
  }
  sent(method: string) {
    return this.calls.filter((c) => c.method === method).map((c) => c.body);
  }
}

function ok(body: unknown): Response {
  return new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } });
}
function error(status: number, code: string, message: string): Response {
  return new Response(JSON.stringify({ code, message }), {
    status,
    headers: { "content-type": "application/json" },
  });
}

/** Runs `svc <args>` in-process against the fake server (or a real one); returns what it printed. */
async function run(
  server: Pick<FakeServer, "fetch">,
  args: string[],
  baseUrl = "http://svc.test",
  stdin?: string,
) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const sleeps: number[] = [];
  const io: DestinationIo = {
    fetch: server.fetch,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    stdout: (s) => stdout.push(s),
    stderr: (s) => stderr.push(s),
    stdin: stdin === undefined ? undefined : async () => stdin,
  };
  const program = new Command("svc")
    .option("--base-url <url>")
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} });
  registerDestinationCommands(program, io);
  registerDeliveryCommands(program, io);
  let thrown: unknown;
  try {
    await program.parseAsync(["--base-url", baseUrl, ...args], { from: "user" });
  } catch (e) {
    thrown = e;
  }
  return { out: stdout.join(""), err: stderr.join(""), sleeps, thrown };
}

function withToken(token: string) {
  let saved: string | undefined;
  beforeEach(() => {
    saved = process.env.SVC_TOKEN;
    process.env.SVC_TOKEN = token;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.SVC_TOKEN;
    else process.env.SVC_TOKEN = saved;
  });
}

describe("svc destinations and svc deliveries (against a fake Connect peer)", () => {
  withToken("svcp_test");

  it("create SLACK reads the URL from stdin, sends one request id and prints no secret", async () => {
    const server = new FakeServer().on("CreateDestination", (b) =>
      ok({
        destination: {
          name: dest,
          kind: b.kind,
          displayName: b.displayName,
          url: "https://hooks.slack.com/…",
        },
      }),
    );
    const r = await run(
      server,
      [
        "destinations",
        "create",
        "--project",
        project,
        "--kind",
        "slack",
        "--display-name",
        "ops",
        "--url-file",
        "-",
      ],
      undefined,
      `${slackUrl}\n`,
    );
    assert.equal(r.thrown, undefined, String(r.thrown));
    const [body] = server.sent("CreateDestination");
    assert.deepEqual(
      { ...body, requestId: undefined },
      {
        projectName: project,
        kind: "SLACK",
        displayName: "ops",
        url: slackUrl,
        requestId: undefined,
      },
    );
    assert.match(String(body.requestId), /^[0-9a-f-]{36}$/);
    assert.match(r.err, new RegExp(`request id ${body.requestId}`));
    assert.doesNotMatch(r.err, /warning/);
    assert.equal(r.out, `${dest}\tSLACK\tACTIVE\thttps://hooks.slack.com/…\tops\n`);
  });

  it("retries an ambiguous create with the same body, and a replayed WEBHOOK says how to get a secret", async () => {
    const server = new FakeServer().on("CreateDestination", (b, n) => {
      if (n === 1) throw new TypeError("fetch failed");
      if (n === 2) return error(503, "unavailable", "restarting");
      return ok({
        destination: { name: dest, kind: "WEBHOOK", displayName: b.displayName, url: b.url },
        replayed: true,
      });
    });
    const r = await run(server, [
      "destinations",
      "create",
      "--project",
      project,
      "--kind",
      "WEBHOOK",
      "--display-name",
      "hook",
      "--url",
      "https://example.com/hook",
    ]);
    assert.equal(r.thrown, undefined, String(r.thrown));
    const bodies = server.sent("CreateDestination");
    assert.equal(bodies.length, 3);
    assert.deepEqual(bodies[1], bodies[0]);
    assert.deepEqual(bodies[2], bodies[0]);
    assert.deepEqual(r.sleeps, [1000, 2000]);
    assert.doesNotMatch(r.err, /warning/, "a WEBHOOK URL is not a secret");
    assert.match(r.err, /retrying with the same request id/);
    assert.match(r.err, /earlier attempt of this request was applied/);
    assert.match(r.err, new RegExp(`rotate-secret ${dest} --overlap 0`));
    assert.equal(r.out, `${dest}\tWEBHOOK\tACTIVE\thttps://example.com/hook\thook\n`);
  });

  it("gives up after three ambiguous failures and prints the request id to retry by hand", async () => {
    const server = new FakeServer().on("CreateDestination", () => error(504, "deadline_exceeded", "slow"));
    const rid = "22222222-2222-4222-8222-222222222222";
    const r = await run(server, [
      "destinations",
      "create",
      "--kind",
      "DISCORD",
      "--display-name",
      "d",
      "--url",
      slackUrl,
      "--request-id",
      rid,
    ]);
    assert.ok(r.thrown);
    assert.ok(server.sent("CreateDestination").every((b) => b.requestId === rid));
    assert.equal(server.sent("CreateDestination").length, 3);
    assert.match(r.err, /warning: a DISCORD webhook URL is a secret/);
    assert.match(r.err, new RegExp(`run the same command with --request-id ${rid}`));
    assert.doesNotMatch(r.err, /sekrit/);
  });

  it("does not retry a definite answer; usage errors send nothing", async () => {
    const server = new FakeServer().on("CreateDestination", () =>
      error(400, "invalid_argument", "url: host is a loopback address"),
    );
    const r = await run(server, [
      "destinations",
      "create",
      "--kind",
      "WEBHOOK",
      "--display-name",
      "x",
      "--url",
      "https://127.0.0.1/h",
    ]);
    assert.match(String(r.thrown), /loopback/);
    assert.equal(server.sent("CreateDestination").length, 1);
    const bad = await run(server, ["destinations", "create", "--kind", "EMAIL", "--display-name", "x"]);
    assert.ok(bad.thrown instanceof UsageError);
    const overlap = await run(server, ["destinations", "rotate-secret", dest, "--overlap", "2d"]);
    assert.ok(overlap.thrown instanceof UsageError);
    assert.equal(server.calls.length, 1);
  });

  it("get prints an email destination's recipients; update sends recipients only with --replace-recipients", async () => {
    const email = {
      name: dest,
      kind: "EMAIL",
      displayName: "ops mail",
      recipients: [
        { user: "users/u1", email: "a@example.com", verified: true, verifyTimeUnix: "1700000000" },
        { user: "users/u2", email: "b@example.com" },
      ],
      createTimeUnix: "1700000000",
    };
    const server = new FakeServer()
      .on("GetDestination", () => ok(email))
      .on("UpdateDestination", () => ok(email))
      .on("ListDestinations", () => ok({ destinations: [email] }));
    const get = await run(server, ["destinations", "get", dest]);
    assert.match(get.out, /^kind +EMAIL$/m);
    assert.match(get.out, /recipients:\n {2}users\/u1\ta@example\.com\tverified 2023-11-14T22:13:20Z\n/);
    assert.match(get.out, /users\/u2\tb@example\.com\tNOT VERIFIED/);
    const list = await run(server, ["destinations", "list", "--project", project]);
    assert.equal(list.out, `${dest}\tEMAIL\tACTIVE\t2 recipients (1 verified)\tops mail\n`);
    const up = await run(server, [
      "destinations",
      "update",
      dest,
      "--recipient",
      "users/u1",
      "--recipient",
      "users/u3",
      "--replace-recipients",
    ]);
    assert.equal(up.thrown, undefined, String(up.thrown));
    assert.deepEqual(server.sent("UpdateDestination"), [
      { name: dest, recipients: ["users/u1", "users/u3"], updateRecipients: true },
    ]);
  });

  it("deliveries list sends the filters and prints one line each; get prints every attempt", async () => {
    const delivery = {
      name: `${dest}/deliveries/dlv_1`,
      deliveryId: "dlv_1",
      destination: dest,
      incident: `${project}/incidents/i1`,
      eventType: "incident.opened",
      state: "FAILED",
      createTimeUnix: "1700000000",
      expireTimeUnix: "1700086400",
      attempts: [
        { attemptId: "a1", timeUnix: "1700000000", status: "FAILED", detail: "timeout", durationMs: 10000 },
        { attemptId: "a2", timeUnix: "1700000300", status: "FAILED", responseCode: 503, durationMs: 42 },
      ],
    };
    const skipped = {
      ...delivery,
      name: `${dest}/deliveries/dlv_2`,
      state: "SKIPPED",
      skipReason: "DESTINATION_PAUSED",
      attempts: [],
    };
    const server = new FakeServer()
      .on("ListDeliveries", () => ok({ deliveries: [delivery, skipped], nextPageToken: "next" }))
      .on("GetDelivery", () => ok(delivery));
    const list = await run(server, [
      "deliveries",
      "list",
      "--project",
      project,
      "--destination",
      dest,
      "--state",
      "failed",
      "--page-size",
      "10",
    ]);
    assert.equal(list.thrown, undefined, String(list.thrown));
    assert.deepEqual(server.sent("ListDeliveries"), [
      { projectName: project, destination: dest, state: "FAILED", pageSize: 10 },
    ]);
    assert.equal(
      list.out,
      [
        `2023-11-14T22:13:20Z\t${dest}\tincident.opened\tFAILED\tattempts 2\tcode 503\t${dest}/deliveries/dlv_1`,
        `2023-11-14T22:13:20Z\t${dest}\tincident.opened\tSKIPPED (DESTINATION_PAUSED)\tattempts 0\tcode -\t${dest}/deliveries/dlv_2`,
        "",
      ].join("\n"),
    );
    assert.equal(list.err, "more: --page-token next\n");
    const bad = await run(server, ["deliveries", "list", "--project", project, "--state", "DONE"]);
    assert.match(String(bad.thrown), /--state must be one of PENDING, SENT, FAILED, SKIPPED/);
    const get = await run(server, ["deliveries", "get", `${dest}/deliveries/dlv_1`]);
    assert.match(get.out, /^state +FAILED$/m);
    assert.match(
      get.out,
      /attempts:\n {2}2023-11-14T22:13:20Z\tFAILED\tcode -\ttimeout\t10000 ms\ta1\n {2}2023-11-14T22:18:20Z\tFAILED\tcode 503\t-\t42 ms\ta2\n$/,
    );
  });
});

const bin = resolve(fileURLToPath(import.meta.url), "../../../bin/svc.js");

/** Runs the CLI as a child process (asynchronously: the server answers from this process). */
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

describe("svc destinations and svc deliveries (CLI against an in-process server)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  let env: Record<string, string>;
  let dir: string;
  before(async () => {
    t = await startTestApp(dialect, {
      notify: { dispatcherAutoStart: false, options: { allowHosts: ["127.0.0.1"] } },
    });
    p = await t.seedProject("cli-destinations", []);
    env = { SVC_BASE_URL: t.baseUrl, SVC_TOKEN: p.owner.session };
    dir = mkdtempSync(join(tmpdir(), "svc-destinations-e2e-"));
  });
  after(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const destinations = async () =>
    (await t.clients(p.owner.session).destinations.listDestinations({ projectName: p.projectName }))
      .destinations;

  it("creates a PAGERDUTY destination with its key from a file, never printing the key", async () => {
    const key = "R0ut1ngKeyR0ut1ngKeyR0ut1ngKey12";
    const file = join(dir, "pd-key");
    writeFileSync(file, `${key}\n`);
    const args = [
      "destinations",
      "create",
      "--project",
      p.projectName,
      "--kind",
      "pagerduty",
      "--display-name",
      "pd",
    ];
    const missing = await svc(args, env);
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /needs its integration key: --integration-key-file/);
    const created = await svc(
      [...args, "--url", "https://127.0.0.1:9/v2/enqueue", "--integration-key-file", file],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const [name, kind, , url] = created.stdout.split("\n")[0].split("\t");
    assert.deepEqual([kind, url], ["PAGERDUTY", "https://127.0.0.1:9/v2/enqueue"]);
    assert.ok(!created.stdout.includes(key) && !created.stderr.includes(key), "the key is never printed");
    writeFileSync(file, "short\n");
    const bad = await svc(["destinations", "update", name, "--integration-key-file", file], env);
    assert.equal(bad.code, 3, bad.stderr);
    assert.match(bad.stderr, /integrationKey: has the wrong shape/);
    assert.ok(!bad.stderr.includes("short"), "nor a wrong one");
    const del = await svc(["destinations", "delete", name], env);
    assert.equal(del.code, 0, del.stderr);
  });

  it("creates a WEBHOOK, lists, gets, rotates its secret, pauses and deletes it", async () => {
    const file = join(dir, "url");
    writeFileSync(file, "https://127.0.0.1:9/hook\n");
    const created = await svc(
      [
        "destinations",
        "create",
        "--project",
        p.projectName,
        "--kind",
        "webhook",
        "--display-name",
        "ops hook",
        "--url-file",
        file,
      ],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const [line, secret, ...rest] = created.stdout.split("\n");
    assert.deepEqual(rest, [""]);
    const [name, kind, state, url, displayName] = line.split("\t");
    assert.match(name, new RegExp(`^${p.projectName}/destinations/[a-z0-9]+$`));
    assert.deepEqual(
      [kind, state, url, displayName],
      ["WEBHOOK", "ACTIVE", "https://127.0.0.1:9/hook", "ops hook"],
    );
    assert.match(secret, /^whsec_/);
    assert.match(created.stderr, /request id [0-9a-f-]{36}/);
    assert.match(created.stderr, /store it now, it is not shown again/);

    const list = await svc(["destinations", "list", "--project", p.projectName], env);
    assert.equal(list.code, 0, list.stderr);
    assert.equal(list.stdout, `${line}\n`);

    const got = await svc(["destinations", "get", name], env);
    assert.equal(got.code, 0, got.stderr);
    assert.match(got.stdout, /^url +https:\/\/127\.0\.0\.1:9\/hook$/m);
    assert.match(got.stdout, /secrets:\n {2}[0-9a-f]+\tcreated \S+\tcurrent\n$/);
    assert.ok(!got.stdout.includes(secret), "get never shows the secret");

    const rotated = await svc(["destinations", "rotate-secret", name, "--overlap", "1h", "--json"], env);
    assert.equal(rotated.code, 0, rotated.stderr);
    const r = JSON.parse(rotated.stdout);
    assert.match(r.webhookSecret, /^whsec_/);
    assert.notEqual(r.webhookSecret, secret);
    assert.equal(r.destination.secrets.length, 2);
    assert.match(rotated.stderr, /not shown again/);
    const now = await svc(["destinations", "rotate-secret", name, "--overlap", "0"], env);
    assert.equal(now.code, 0, now.stderr);
    assert.match(now.stdout, /^whsec_\S+\n$/);
    assert.match(now.stderr, /older secrets were discarded/);

    const paused = await svc(["destinations", "update", name, "--pause"], env);
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(paused.stdout, new RegExp(`^${name}\tWEBHOOK\tPAUSED\t`));
    const shown = await svc(["destinations", "get", name, "--json"], env);
    assert.equal(JSON.parse(shown.stdout).paused, true);

    const deliveries = await svc(["deliveries", "list", "--project", p.projectName], env);
    assert.equal(deliveries.code, 0, deliveries.stderr);
    assert.equal(deliveries.stdout, "");
    assert.equal(deliveries.stderr, "");
    const json = await svc(["deliveries", "list", "--project", p.projectName, "--json"], env);
    assert.deepEqual(JSON.parse(json.stdout).deliveries, []);

    const del = await svc(["destinations", "delete", name], env);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(del.stdout, `deleted ${name}; 0 pending deliveries will be skipped\n`);
    assert.deepEqual(await destinations(), []);
    const gone = await svc(["destinations", "get", name], env);
    assert.equal(gone.code, 5, "not found exits 5");
  });

  it("an EMAIL destination to the owner starts unverified", async () => {
    const created = await svc(
      [
        "destinations",
        "create",
        "--project",
        p.projectName,
        "--kind",
        "EMAIL",
        "--display-name",
        "owner mail",
        "--recipient",
        p.owner.user,
        "--json",
      ],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const res = JSON.parse(created.stdout);
    assert.equal(res.webhookSecret, "");
    assert.deepEqual(
      res.destination.recipients.map((r: { user: string; verified: boolean }) => [r.user, r.verified]),
      [[p.owner.user, false]],
    );
    await t.clients(p.owner.session).destinations.deleteDestination({ name: res.destination.name });
  });

  it("a create whose answer is lost is retried with the same request id and replayed: one destination", async () => {
    const seen: string[] = [];
    let lost = false;
    // The first CreateDestination reaches the server, which applies it; its answer never comes back.
    const lossy: typeof globalThis.fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith("/CreateDestination")) {
        seen.push(JSON.parse(new TextDecoder().decode(init?.body as Uint8Array)).requestId);
        if (!lost) {
          lost = true;
          await res.arrayBuffer();
          throw new TypeError("fetch failed");
        }
      }
      return res;
    };
    const saved = process.env.SVC_TOKEN;
    process.env.SVC_TOKEN = p.owner.session;
    try {
      const args = [
        "destinations",
        "create",
        "--project",
        p.projectName,
        "--kind",
        "WEBHOOK",
        "--display-name",
        "replayed hook",
        "--url",
        "https://127.0.0.1:9/hook",
        "--json",
      ];
      const r = await run({ fetch: lossy }, args, t.baseUrl);
      assert.equal(r.thrown, undefined, String(r.thrown));
      assert.equal(seen.length, 2);
      assert.equal(seen[0], seen[1]);
      const res = JSON.parse(r.out);
      assert.equal(res.replayed, true);
      assert.equal(res.webhookSecret, "", "the secret went to the lost answer only");
      assert.match(r.err, /earlier attempt of this request was applied/);
      assert.match(r.err, /rotate-secret .* --overlap 0/);
      // By hand with the printed request id: the same destination again.
      const again = await run({ fetch: globalThis.fetch }, [...args, "--request-id", seen[0]], t.baseUrl);
      assert.equal(again.thrown, undefined, String(again.thrown));
      assert.equal(JSON.parse(again.out).destination.name, res.destination.name);
      const mine = (await destinations()).filter((d) => d.displayName === "replayed hook");
      assert.equal(mine.length, 1);
    } finally {
      if (saved === undefined) delete process.env.SVC_TOKEN;
      else process.env.SVC_TOKEN = saved;
    }
  });
});
