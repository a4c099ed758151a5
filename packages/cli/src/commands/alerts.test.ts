import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, afterEach, before, beforeEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { AlertRuleSpecSchema } from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import { Command } from "commander";
import { testDialects } from "../../../server/testing/dialects.ts";
import { type SeededProject, startTestApp, type TestApp } from "../../../server/testing/harness.ts";
import { UsageError } from "../common.ts";
import { buildSpec, type CliIo, parseRuleFile, parseSeconds, registerAlertCommands } from "./alerts.ts";
import { registerIncidentCommands } from "./incidents.ts";

const project = "projects/acme";
const vm1 = "projects/acme/locations/dc-1/vms/web-1";

const cpuTemplate = {
  displayName: "CPU above 90%",
  metricId: "cpu_utilization_pct",
  operator: "GREATER_THAN",
  threshold: 90,
  sustainedSeconds: 600,
  severity: "WARNING",
  allVms: true,
  repeatIntervalSeconds: 0,
  destinationNames: [],
  vmNames: [],
};

describe("parseSeconds()", () => {
  const cases: [string, number][] = [
    ["300", 300],
    ["90s", 90],
    ["5m", 300],
    ["6h", 21600],
    ["1d", 86400],
    ["0", 0],
  ];
  for (const [input, want] of cases)
    it(`${input} → ${want}`, () => assert.equal(parseSeconds(input, "--x"), want));
  for (const bad of ["", "5 minutes", "-1", "1.5h", "1h30m"])
    it(`refuses "${bad}"`, () => assert.throws(() => parseSeconds(bad, "--x"), UsageError));
});

describe("buildSpec()", () => {
  it("makes a whole spec from flags alone", () => {
    const s = buildSpec(undefined, {
      displayName: "web CPU",
      metric: "cpu_utilization_pct",
      operator: ">=",
      threshold: "85",
      sustained: "5m",
      vm: [vm1, "projects/acme/locations/dc-1/vms/web-2"],
      severity: "critical",
      repeatInterval: "1h",
      destination: ["projects/acme/destinations/ops"],
      disabled: true,
    });
    assert.deepEqual(
      { ...s, $typeName: undefined },
      {
        $typeName: undefined,
        displayName: "web CPU",
        metricId: "cpu_utilization_pct",
        operator: "GREATER_THAN_OR_EQUAL",
        threshold: 85,
        sustainedSeconds: 300,
        severity: "CRITICAL",
        allVms: false,
        vmNames: [vm1, "projects/acme/locations/dc-1/vms/web-2"],
        enabled: false,
        repeatIntervalSeconds: 3600,
        destinationNames: ["projects/acme/destinations/ops"],
        forecastHorizonSeconds: 0,
        forecastLookbackSeconds: 0,
      },
    );
  });

  it("--forecast-horizon and --forecast-lookback take durations", () => {
    const s = buildSpec(undefined, {
      displayName: "fs",
      metric: "filesystem_used_pct",
      operator: ">=",
      threshold: "100",
      allVms: true,
      forecastHorizon: "4h",
      forecastLookback: "6h",
    });
    assert.deepEqual([s.forecastHorizonSeconds, s.forecastLookbackSeconds], [14_400, 21_600]);
  });

  it("without a base, names the flags that are missing and asks for the VMs", () => {
    assert.throws(
      () => buildSpec(undefined, { metric: "cpu_utilization_pct", allVms: true }),
      /add --display-name, --operator, --threshold/,
    );
    assert.throws(
      () => buildSpec(undefined, { displayName: "x", metric: "m", operator: ">", threshold: "1" }),
      /--all-vms or --vm/,
    );
  });

  it("overrides only the given fields of a template, and --vm turns all-VMs off", () => {
    const base = create(AlertRuleSpecSchema, cpuTemplate);
    const s = buildSpec(base, { threshold: "85", sustained: "300", vm: [vm1] });
    assert.equal(s.threshold, 85);
    assert.equal(s.sustainedSeconds, 300);
    assert.equal(s.allVms, false);
    assert.deepEqual(s.vmNames, [vm1]);
    assert.equal(s.displayName, "CPU above 90%");
    assert.equal(s.enabled, undefined, "left out: the server's default (true)");
    assert.equal(base.threshold, 90, "the base is not changed");
    assert.equal(base.allVms, true);
  });

  it("refuses contradictory and malformed flags", () => {
    const base = create(AlertRuleSpecSchema, cpuTemplate);
    assert.throws(() => buildSpec(base, { allVms: true, vm: [vm1] }), /either --all-vms or --vm/);
    assert.throws(() => buildSpec(base, { enabled: true, disabled: true }), /either --enabled or --disabled/);
    assert.throws(() => buildSpec(base, { threshold: "ninety" }), /--threshold/);
    assert.throws(() => buildSpec(base, { threshold: "" }), /--threshold/);
    assert.equal(buildSpec(base, { threshold: "-5" }).threshold, -5);
  });
});

describe("parseRuleFile()", () => {
  const want = {
    displayName: "disk",
    metricId: "filesystem_used_pct",
    operator: "GREATER_THAN",
    threshold: 90,
    sustainedSeconds: 300,
    allVms: true,
  };

  it("reads a YAML spec", () => {
    const f = parseRuleFile(
      [
        "displayName: disk",
        "metricId: filesystem_used_pct",
        "operator: GREATER_THAN",
        "threshold: 90",
        "sustainedSeconds: 300",
        "allVms: true",
        "destinationNames: []",
        "",
      ].join("\n"),
      "rule.yaml",
    );
    assert.deepEqual(pick(f.spec, want), want);
    assert.equal(f.id, undefined);
  });

  it("reads a JSON spec, with the proto's snake_case names too", () => {
    const f = parseRuleFile(
      JSON.stringify({ ...want, sustainedSeconds: undefined, sustained_seconds: 300 }),
      "rule.json",
    );
    assert.deepEqual(pick(f.spec, want), want);
  });

  it("reads a whole rule as `get --json` prints it: spec, name, id and version", () => {
    const f = parseRuleFile(
      JSON.stringify({
        name: `${project}/alertRules/r1`,
        id: "r1",
        version: "4",
        appliedVersion: "4",
        syncStatus: "APPLIED",
        createTimeUnix: "1700000000",
        spec: want,
      }),
      "rule.json",
    );
    assert.deepEqual(pick(f.spec, want), want);
    assert.deepEqual([f.name, f.id, f.version], [`${project}/alertRules/r1`, "r1", "4"]);
  });

  it("names the file and the field when the file is wrong", () => {
    assert.throws(() => parseRuleFile("displayName: x\nthreshhold: 5\n", "r.yaml"), /r\.yaml: .*threshhold/);
    assert.throws(() => parseRuleFile("{", "r.json"), /r\.json: /);
    assert.throws(() => parseRuleFile("- a\n- b\n", "r.yml"), /r\.yml: expected an alert rule spec/);
    assert.throws(() => parseRuleFile("threshold: high\n", "r.yaml"), /r\.yaml: /);
  });
});

/** The fields of `s` that `like` has. */
function pick(s: object, like: object) {
  const o = s as Record<string, unknown>;
  return Object.fromEntries(Object.keys(like).map((k) => [k, o[k]]));
}

/** A Connect JSON peer in a fetch function: answers by RPC name and records what it was sent. */
class FakeServer {
  calls: { method: string; body: Record<string, unknown> }[] = [];
  handlers = new Map<string, (body: Record<string, unknown>, n: number) => Response | Promise<Response>>();
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
  on(method: string, h: (body: Record<string, unknown>, n: number) => Response | Promise<Response>): this {
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
function savedRule(body: Record<string, unknown>, version = "1", extra: Record<string, unknown> = {}) {
  return {
    name: `${project}/alertRules/${body.id}`,
    id: body.id,
    spec: body.spec,
    version,
    appliedVersion: "0",
    syncStatus: "PENDING",
    ...extra,
  };
}

/** Runs `svc <args>` in-process against the fake server (or a real one); returns what it printed. */
async function run(server: Pick<FakeServer, "fetch">, args: string[], baseUrl = "http://svc.test") {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const sleeps: number[] = [];
  const io: CliIo = {
    fetch: server.fetch,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    stdout: (s) => stdout.push(s),
    stderr: (s) => stderr.push(s),
  };
  const program = new Command("svc")
    .option("--base-url <url>")
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} });
  registerAlertCommands(program, io);
  registerIncidentCommands(program, io);
  let thrown: unknown;
  try {
    await program.parseAsync(["--base-url", baseUrl, ...args], { from: "user" });
  } catch (e) {
    thrown = e;
  }
  return { out: stdout.join(""), err: stderr.join(""), sleeps, thrown };
}

describe("svc alerts save (against a fake Connect peer)", () => {
  let savedToken: string | undefined;
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "svc-alerts-cli-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(() => {
    savedToken = process.env.SVC_TOKEN;
    process.env.SVC_TOKEN = "svcp_test";
  });
  afterEach(() => {
    if (savedToken === undefined) delete process.env.SVC_TOKEN;
    else process.env.SVC_TOKEN = savedToken;
  });

  it("creates from a template with flags: id new, expectedVersion 0, the key from SVC_TOKEN only", async () => {
    let auth = "";
    const server = new FakeServer()
      .on("ListAlertRuleTemplates", () =>
        ok({ templates: [{ id: "cpu", displayName: "CPU", description: "d", spec: cpuTemplate }] }),
      )
      .on("SaveAlertRule", (b) => ok(savedRule(b)));
    const inner = server.fetch;
    server.fetch = (input, init) => {
      auth = new Headers(init?.headers).get("authorization") ?? "";
      return inner(input, init);
    };
    const r = await run(server, [
      "alerts",
      "save",
      "--project",
      project,
      "--template",
      "cpu",
      "--threshold",
      "85",
      "--sustained",
      "300",
      "--vm",
      vm1,
    ]);
    assert.equal(r.thrown, undefined, String(r.thrown));
    const [body] = server.sent("SaveAlertRule");
    assert.equal(body.projectName, project);
    assert.equal(body.expectedVersion, "0");
    assert.match(String(body.id), /^[0-9a-f-]{36}$/);
    assert.match(String(body.requestId), /^[0-9a-f-]{36}$/);
    assert.notEqual(body.id, body.requestId);
    assert.deepEqual(body.spec, {
      displayName: "CPU above 90%",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 85,
      sustainedSeconds: 300,
      severity: "WARNING",
      vmNames: [vm1],
    });
    assert.equal(auth, "Bearer svcp_test");
    assert.match(r.err, new RegExp(`request id ${body.requestId}`));
    assert.equal(r.out, `${project}/alertRules/${body.id}\tversion 1\tPENDING\n`);
  });

  it("retries a save whose answer was lost with the same requestId and body, then reports the replay", async () => {
    const server = new FakeServer().on("SaveAlertRule", (b, n) => {
      if (n === 1) throw new TypeError("fetch failed");
      if (n === 2) return error(503, "unavailable", "restarting");
      return ok(savedRule(b, "1", { replayed: true }));
    });
    const file = join(dir, "rule.yaml");
    writeFileSync(
      file,
      "displayName: web CPU\nmetricId: cpu_utilization_pct\noperator: GREATER_THAN\nthreshold: 80\nallVms: true\n",
    );
    const r = await run(server, ["alerts", "save", "--project", project, "--file", file, "--json"]);
    assert.equal(r.thrown, undefined, String(r.thrown));
    const bodies = server.sent("SaveAlertRule");
    assert.equal(bodies.length, 3);
    assert.deepEqual(bodies[1], bodies[0], "the retry is the same request");
    assert.deepEqual(bodies[2], bodies[0]);
    assert.deepEqual(r.sleeps, [1000, 2000]);
    assert.match(r.err, /retrying with the same request id/);
    assert.match(r.err, /earlier attempt of this request was applied/);
    const printed = JSON.parse(r.out);
    assert.equal(printed.replayed, true);
    assert.equal(printed.spec.threshold, 80);
  });

  it("gives up after three ambiguous failures and says how to retry by hand", async () => {
    const server = new FakeServer().on("SaveAlertRule", () => error(504, "deadline_exceeded", "slow"));
    const r = await run(server, [
      "alerts",
      "save",
      "--project",
      project,
      "--id",
      "11111111-1111-4111-8111-111111111111",
      "--request-id",
      "22222222-2222-4222-8222-222222222222",
      "--display-name",
      "x",
      "--metric",
      "cpu_utilization_pct",
      "--operator",
      ">",
      "--threshold",
      "1",
      "--all-vms",
    ]);
    assert.ok(r.thrown);
    const bodies = server.sent("SaveAlertRule");
    assert.equal(bodies.length, 3);
    assert.ok(bodies.every((b) => b.requestId === "22222222-2222-4222-8222-222222222222"));
    assert.match(
      r.err,
      /--id 11111111-1111-4111-8111-111111111111 --expected-version 0 --request-id 22222222-2222-4222-8222-222222222222/,
    );
  });

  it("does not retry a definite answer (a version conflict)", async () => {
    const server = new FakeServer().on("SaveAlertRule", () =>
      error(409, "aborted", "version is 5 [VERSION_CONFLICT]"),
    );
    const file = join(dir, "spec.json");
    writeFileSync(file, JSON.stringify(cpuTemplate));
    const r2 = await run(server, [
      "alerts",
      "save",
      "--project",
      project,
      "--id",
      "r1",
      "--expected-version",
      "4",
      "--file",
      file,
    ]);
    assert.match(String(r2.thrown), /VERSION_CONFLICT/);
    assert.equal(server.sent("SaveAlertRule").length, 1);
    assert.deepEqual(r2.sleeps, []);
  });

  it("--edit fetches the rule: its version is expected and its spec is the base of the flags", async () => {
    const server = new FakeServer()
      .on("GetAlertRule", (b) =>
        ok({
          name: b.name,
          id: "r1",
          version: "7",
          spec: { ...cpuTemplate, destinationNames: ["projects/acme/destinations/ops"] },
        }),
      )
      .on("SaveAlertRule", (b) => ok(savedRule(b, "8")));
    const r = await run(server, [
      "alerts",
      "save",
      "--project",
      project,
      "--id",
      "r1",
      "--edit",
      "--threshold",
      "95",
    ]);
    assert.equal(r.thrown, undefined, String(r.thrown));
    assert.deepEqual(server.sent("GetAlertRule"), [{ name: `${project}/alertRules/r1` }]);
    const [body] = server.sent("SaveAlertRule");
    assert.equal(body.id, "r1");
    assert.equal(body.expectedVersion, "7");
    const spec = body.spec as Record<string, unknown>;
    assert.equal(spec.threshold, 95);
    assert.equal(spec.sustainedSeconds, 600);
    assert.deepEqual(spec.destinationNames, ["projects/acme/destinations/ops"]);
    assert.match(r.out, /version 8/);
  });

  it("a rule file from `get --json` edits that rule at the version it was read at", async () => {
    const server = new FakeServer().on("SaveAlertRule", (b) => ok(savedRule(b, "4")));
    const file = join(dir, "got.json");
    writeFileSync(
      file,
      JSON.stringify({
        name: `${project}/alertRules/r9`,
        id: "r9",
        version: "3",
        syncStatus: "APPLIED",
        spec: cpuTemplate,
      }),
    );
    const r = await run(server, ["alerts", "save", "--file", file, "--severity", "critical"]);
    assert.equal(r.thrown, undefined, String(r.thrown));
    const [body] = server.sent("SaveAlertRule");
    assert.deepEqual([body.projectName, body.id, body.expectedVersion], [project, "r9", "3"]);
    assert.equal((body.spec as Record<string, unknown>).severity, "CRITICAL");
  });

  it("refuses a token on the command line: there is no such option, SVC_TOKEN is required", async () => {
    delete process.env.SVC_TOKEN;
    const r = await run(new FakeServer(), ["alerts", "list", "--project", project]);
    assert.match(String(r.thrown), /SVC_TOKEN/);
  });
});

describe("svc alerts preview, list, get, delete and svc incidents (output)", () => {
  let savedToken: string | undefined;
  beforeEach(() => {
    savedToken = process.env.SVC_TOKEN;
    process.env.SVC_TOKEN = "svcp_test";
  });
  afterEach(() => {
    if (savedToken === undefined) delete process.env.SVC_TOKEN;
    else process.env.SVC_TOKEN = savedToken;
  });

  it("preview sends the history in seconds and prints statuses, samples and firing intervals", async () => {
    const server = new FakeServer().on("PreviewAlertRule", () =>
      ok({
        queryStatus: "OK",
        historyStatus: "PARTIAL",
        evaluatedSamples: "700",
        expectedSamples: "1440",
        startTimeUnix: "1700000000",
        endTimeUnix: "1700021600",
        evaluationIntervalSeconds: 30,
        firingInstances: 1,
        instances: [
          {
            vmName: vm1,
            finalState: "FIRING",
            evaluatedSamples: "700",
            expectedSamples: "720",
            noDataEvaluations: 3,
            firingIntervals: [
              { startTimeUnix: "1700001000", endTimeUnix: "1700001330" },
              { startTimeUnix: "1700020000" },
            ],
          },
          {
            vmName: "projects/acme/locations/dc-1/vms/web-2",
            finalState: "INACTIVE",
            expectedSamples: "720",
          },
        ],
      }),
    );
    const r = await run(server, [
      "alerts",
      "preview",
      "--project",
      project,
      "--display-name",
      "x",
      "--metric",
      "cpu_utilization_pct",
      "--operator",
      ">",
      "--threshold",
      "80",
      "--all-vms",
      "--history",
      "6h",
    ]);
    assert.equal(r.thrown, undefined, String(r.thrown));
    const [body] = server.sent("PreviewAlertRule");
    assert.equal(body.historySeconds, 21600);
    assert.equal(body.projectName, project);
    assert.match(r.out, /^query OK\n/);
    assert.match(r.out, /history PARTIAL: 700 of 1440 expected samples \(48\.6%\)/);
    assert.match(r.out, /1 of 2 instances would have fired/);
    assert.match(r.out, /web-1\tFIRING\tfired 2×\tsamples 700\/720\tevaluations 3 without data/);
    assert.match(r.out, /firing 2023-11-14T22:30:00Z \.\. 2023-11-14T22:35:30Z \(5m30s\)/);
    assert.match(r.out, /still firing at the end/);
  });

  it("list pages through every rule; get prints the rule; delete passes the expected version", async () => {
    const rule = (id: string) => ({
      name: `${project}/alertRules/${id}`,
      id,
      version: "2",
      appliedVersion: "1",
      syncStatus: "PENDING",
      spec: cpuTemplate,
      instanceCounts: { firing: 2 },
      expectedInstances: 3,
    });
    const server = new FakeServer()
      .on("ListAlertRules", (b) =>
        b.pageToken ? ok({ rules: [rule("b")] }) : ok({ rules: [rule("a")], nextPageToken: "p2" }),
      )
      .on("GetAlertRule", (b) =>
        ok({
          ...rule("a"),
          instances: b.includeInstances
            ? [
                {
                  vmName: vm1,
                  state: "FIRING",
                  stateSinceUnix: "1700000000",
                  lastValue: 97,
                  flag: "NO_DATA",
                  incident: `${project}/incidents/i1`,
                },
              ]
            : [],
        }),
      )
      .on("DeleteAlertRule", (b) => ok({ name: b.name, retiredInstances: 2, retiredIncidents: 1 }));
    const list = await run(server, ["alerts", "list", "--project", project]);
    assert.equal(list.thrown, undefined, String(list.thrown));
    assert.equal(
      list.out,
      [
        `${project}/alertRules/a\tv2 (applied 1)\tPENDING\tWARNING\tcpu_utilization_pct > 90 for 10m\tall VMs\tfiring 2\tCPU above 90%`,
        `${project}/alertRules/b\tv2 (applied 1)\tPENDING\tWARNING\tcpu_utilization_pct > 90 for 10m\tall VMs\tfiring 2\tCPU above 90%`,
        "",
      ].join("\n"),
    );
    const get = await run(server, ["alerts", "get", `${project}/alertRules/a`, "--instances"]);
    assert.deepEqual(server.sent("GetAlertRule"), [
      { name: `${project}/alertRules/a`, includeInstances: true },
    ]);
    assert.match(get.out, /version +2 \(applied 1\)/);
    assert.match(get.out, /instances +3 watched; pending 0, firing 2/);
    assert.match(
      get.out,
      /instances:\n {2}projects\/acme\/locations\/dc-1\/vms\/web-1\tFIRING since 2023-11-14T22:13:20Z\tlast 97\tNO_DATA\tprojects\/acme\/incidents\/i1\n$/,
    );
    const json = await run(server, ["alerts", "get", `${project}/alertRules/a`, "--json"]);
    assert.equal(JSON.parse(json.out).spec.sustainedSeconds, 600);
    const del = await run(server, ["alerts", "delete", `${project}/alertRules/a`, "--expected-version", "2"]);
    assert.deepEqual(server.sent("DeleteAlertRule"), [
      { name: `${project}/alertRules/a`, expectedVersion: "2" },
    ]);
    assert.match(del.out, /retired 2 instances and 1 open incidents/);
  });

  it("incidents list sends the filters and one page; get prints the timeline", async () => {
    const incident = {
      name: `${project}/incidents/i1`,
      rule: `${project}/alertRules/a`,
      ruleVersion: "2",
      ruleDisplayName: "CPU",
      severity: "WARNING",
      metricId: "cpu_utilization_pct",
      operator: "GREATER_THAN",
      threshold: 90,
      vmName: vm1,
      state: "OPEN",
      openTimeUnix: "1700000000",
      firingValue: 97.5,
      noData: true,
      events: [{ id: "e1", kind: "OPENED", timeUnix: "1700000000", actor: "evaluator", detail: "97.5 > 90" }],
      silencedBy: [`${project}/silences/0123456789abcdef0123`],
    };
    const server = new FakeServer()
      .on("ListIncidents", () => ok({ incidents: [incident], nextPageToken: "next" }))
      .on("GetIncident", () => ok(incident));
    const list = await run(server, [
      "incidents",
      "list",
      "--project",
      project,
      "--state",
      "open",
      "--vm",
      vm1,
      "--page-size",
      "10",
    ]);
    assert.equal(list.thrown, undefined, String(list.thrown));
    assert.deepEqual(server.sent("ListIncidents"), [
      { projectName: project, state: "OPEN", vmName: vm1, pageSize: 10 },
    ]);
    assert.match(
      list.out,
      /incidents\/i1\tOPEN\tWARNING\tprojects\/acme\/locations\/dc-1\/vms\/web-1\tcpu_utilization_pct > 90\t/,
    );
    assert.match(list.out, /\topen\tsilenced, NO DATA\tCPU\n$/, "a silenced incident is marked in the list");
    assert.equal(list.err, "more: --page-token next\n");
    const bad = await run(server, ["incidents", "list", "--project", project, "--state", "FIRING"]);
    assert.match(String(bad.thrown), /--state must be one of OPEN, RESOLVED, RETIRED/);
    const get = await run(server, ["incidents", "get", `${project}/incidents/i1`]);
    assert.match(get.out, /values +fired at 97\.5, last -/);
    assert.match(get.out, /silenced by +projects\/acme\/silences\/0123456789abcdef0123\n/);
    assert.match(get.out, /events:\n {2}2023-11-14T22:13:20Z\tOPENED\tevaluator\t97\.5 > 90\n/);
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

describe("svc alerts and svc incidents (CLI against an in-process server)", async () => {
  const [{ dialect }] = await testDialects();
  let t: TestApp;
  let p: SeededProject;
  let env: Record<string, string>;
  let dir: string;
  before(async () => {
    t = await startTestApp(dialect);
    p = await t.seedProject("cli-alerts", ["web-1", "web-2"]);
    env = { SVC_BASE_URL: t.baseUrl, SVC_TOKEN: p.owner.session };
    dir = mkdtempSync(join(tmpdir(), "svc-alerts-e2e-"));
  });
  after(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const rules = async () =>
    (await t.clients(p.owner.session).alerts.listAlertRules({ projectName: p.projectName, pageSize: 50 }))
      .rules;

  it("creates from a template, edits from `get --json` and with --edit, previews, deletes", async () => {
    const templates = await svc(["alerts", "templates"], env);
    assert.equal(templates.code, 0, templates.stderr);
    assert.match(templates.stdout, /^cpu\tcpu_utilization_pct > 90 for 5m\tWARNING\t/m);

    const created = await svc(
      [
        "alerts",
        "save",
        "--project",
        p.projectName,
        "--template",
        "cpu",
        "--threshold",
        "85",
        "--sustained",
        "300",
        "--vm",
        p.vms[0],
        "--json",
      ],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const rule = JSON.parse(created.stdout);
    assert.equal(rule.version, "1");
    assert.equal(rule.spec.threshold, 85);
    assert.deepEqual(rule.spec.vmNames, [p.vms[0]]);
    assert.match(created.stderr, /creating rule [0-9a-f-]{36}, request id [0-9a-f-]{36}/);

    const list = await svc(["alerts", "list", "--project", p.projectName], env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`^${rule.name}\tv1`));

    const got = await svc(["alerts", "get", rule.name, "--json"], env);
    const file = join(dir, "rule.json");
    writeFileSync(file, got.stdout);
    const edited = await svc(["alerts", "save", "--file", file, "--threshold", "95"], env);
    assert.equal(edited.code, 0, edited.stderr);
    assert.match(edited.stdout, new RegExp(`^${rule.name}\tversion 2\t`));
    const stale = await svc(["alerts", "save", "--file", file, "--threshold", "96"], env);
    assert.equal(stale.code, 6, "the file was read at version 1 (a conflict: exit code 6)");
    assert.match(stale.stderr, /VERSION_CONFLICT/);

    const paused = await svc(
      ["alerts", "save", "--project", p.projectName, "--id", rule.id, "--edit", "--disabled"],
      env,
    );
    assert.equal(paused.code, 0, paused.stderr);
    const shown = await svc(["alerts", "get", rule.name, "--instances"], env);
    assert.match(shown.stdout, /^enabled +false$/m);
    assert.match(shown.stdout, /^version +3 /m);
    assert.match(shown.stdout, /^condition +cpu_utilization_pct > 95 for 5m$/m);

    const preview = await svc(
      ["alerts", "preview", "--rule", rule.name, "--enabled", "--history", "1h"],
      env,
    );
    assert.equal(preview.code, 0, preview.stderr);
    assert.match(preview.stdout, /^query OK\n/);
    assert.match(preview.stdout, /0 of 1 instances would have fired/);

    const del = await svc(["alerts", "delete", rule.name, "--expected-version", "3"], env);
    assert.equal(del.code, 0, del.stderr);
    assert.match(del.stdout, new RegExp(`^deleted ${rule.name}; retired`));
    assert.deepEqual(await rules(), []);

    const incidents = await svc(["incidents", "list", "--project", p.projectName, "--state", "open"], env);
    assert.equal(incidents.code, 0, incidents.stderr);
    assert.equal(incidents.stdout, "");
  });

  it("a save whose answer is lost is retried with the same request id, and the server replays it", async () => {
    const seen: string[] = [];
    let lost = false;
    // The first SaveAlertRule reaches the server, which applies it; its answer never comes back.
    const lossy: typeof globalThis.fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (String(input).endsWith("/SaveAlertRule")) {
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
      const r = await run(
        { fetch: lossy },
        ["alerts", "save", "--project", p.projectName, "--template", "memory", "--json"],
        t.baseUrl,
      );
      assert.equal(r.thrown, undefined, String(r.thrown));
      assert.equal(seen.length, 2);
      assert.equal(seen[0], seen[1]);
      assert.equal(JSON.parse(r.out).replayed, true);
      assert.match(r.err, /earlier attempt of this request was applied/);
      assert.equal((await rules()).filter((x) => x.spec?.metricId === "memory_used_pct").length, 1);
    } finally {
      if (saved === undefined) delete process.env.SVC_TOKEN;
      else process.env.SVC_TOKEN = saved;
    }
  });

  it("re-running a save by hand with the printed ids returns the original answer", async () => {
    const args = [
      "alerts",
      "save",
      "--project",
      p.projectName,
      "--template",
      "telemetry",
      "--id",
      randomUUID(),
      "--request-id",
      randomUUID(),
    ];
    const first = await svc(args, env);
    assert.equal(first.code, 0, first.stderr);
    const again = await svc(args, env);
    assert.equal(again.code, 0, again.stderr);
    // The same rule and version (its sync status may have moved on since: the evaluator applied it).
    const nameAndVersion = (out: string) => out.split("\t").slice(0, 2).join("\t");
    assert.match(first.stdout, /\tversion 1\t/);
    assert.equal(nameAndVersion(again.stdout), nameAndVersion(first.stdout));
    assert.match(again.stderr, /earlier attempt of this request was applied/);
  });
});
