import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  clone,
  create,
  type DescMessage,
  fromJson,
  type JsonValue,
  type MessageShape,
  toJson,
} from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSvcClients, type SvcClients } from "@svc/sdk";
import {
  type AlertRule,
  AlertRuleSchema,
  type AlertRuleSpec,
  AlertRuleSpecSchema,
  AlertRuleTemplateSchema,
  DeleteAlertRuleResponseSchema,
  type PreviewAlertRuleResponse,
  PreviewAlertRuleResponseSchema,
  type SaveAlertRuleRequest,
} from "@svc/sdk/gen/svc/monitoring/v1/alerts_pb";
import type { Command } from "commander";
import { parse as parseYaml } from "yaml";
import { baseUrlOf, printLines, printStructured, projectOption, tokenOf, UsageError } from "../common.ts";

/** What the commands reach outside; tests hand in a fetch, a sleep and collectors instead. */
export interface CliIo {
  readonly fetch?: typeof globalThis.fetch;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly stdout?: (s: string) => void;
  readonly stderr?: (s: string) => void;
}

export function outOf(io: CliIo): { out: (s: string) => void; err: (s: string) => void } {
  return {
    out: io.stdout ?? ((s) => process.stdout.write(s)),
    err: io.stderr ?? ((s) => process.stderr.write(s)),
  };
}

export function clientsOf(cmd: Command, io: CliIo): SvcClients {
  return createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf(), fetch: io.fetch, sleep: io.sleep });
}

/** A message as canonical protobuf JSON (int64 as strings, every field shown), the shape --file reads back. */
export function jsonOf<D extends DescMessage>(schema: D, msg: MessageShape<D>): JsonValue {
  return toJson(schema, msg, { alwaysEmitImplicit: true });
}

/**
 * `<parent> get <name>`: one resource read by `read`, printed by `print`, or with --json as canonical JSON
 * of `schema`.
 */
export function addGetCommand<D extends DescMessage>(
  parent: Command,
  io: CliIo,
  spec: {
    description: string;
    nameHelp: string;
    schema: D;
    read: (clients: SvcClients, name: string) => Promise<MessageShape<D>>;
    print: (out: (s: string) => void, msg: MessageShape<D>) => void;
  },
): void {
  const { out } = outOf(io);
  parent
    .command("get")
    .description(spec.description)
    .argument("<name>", spec.nameHelp)
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      const msg = await spec.read(clientsOf(cmd, io), name);
      if (opts.json) return printJson(out, jsonOf(spec.schema, msg));
      spec.print(out, msg);
    });
}

/** JSON, or YAML with --output yaml. */
export function printJson(out: (s: string) => void, value: JsonValue): void {
  printStructured(out, value);
}

/** Unix seconds as an ISO time; 0 is "-". */
export function iso(unix: bigint | number): string {
  return Number(unix) === 0 ? "-" : new Date(Number(unix) * 1000).toISOString().replace(".000Z", "Z");
}

/** 330 → "5m30s". */
export function human(seconds: number): string {
  if (seconds === 0) return "0s";
  const parts: string[] = [];
  for (const [unit, size] of [
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
    ["s", 1],
  ] as const) {
    if (seconds >= size) {
      parts.push(`${Math.floor(seconds / size)}${unit}`);
      seconds %= size;
    }
  }
  return parts.join("");
}

/** "300", "300s", "5m", "6h", "1d" → seconds. */
export function parseSeconds(s: string, flag: string): number {
  const m = /^(\d+)(s|m|h|d)?$/.exec(s.trim());
  if (!m)
    throw new UsageError(`${flag}: "${s}" is not a number of seconds or a duration like 90s, 5m, 6h, 1d`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? "s") as "s" | "m" | "h" | "d"];
}

const operatorSymbols: Record<string, string> = {
  ">": "GREATER_THAN",
  ">=": "GREATER_THAN_OR_EQUAL",
  "<": "LESS_THAN",
  "<=": "LESS_THAN_OR_EQUAL",
};
const symbolOf = Object.fromEntries(Object.entries(operatorSymbols).map(([k, v]) => [v, k]));

/** "cpu_utilization_pct > 85 for 5m". */
export function conditionOf(
  s: { metricId: string; operator: string; threshold: number },
  sustained?: number,
) {
  const op = symbolOf[s.operator] ?? s.operator;
  return `${s.metricId} ${op} ${s.threshold}${sustained ? ` for ${human(sustained)}` : ""}`;
}

/** The spec flags shared by save and preview, as commander hands them over. */
export interface SpecFlags {
  template?: string;
  metric?: string;
  operator?: string;
  threshold?: string;
  sustained?: string;
  displayName?: string;
  vm?: string[];
  allVms?: boolean;
  enabled?: boolean;
  disabled?: boolean;
  severity?: string;
  repeatInterval?: string;
  destination?: string[];
  forecastHorizon?: string;
  forecastLookback?: string;
}

/**
 * The spec the flags describe: `base` (a template's, a file's or the rule's current spec) with each
 * given flag replacing its field, or, without a base, a spec made from flags alone. The server checks
 * the values; this checks only what the command line itself can get wrong.
 */
export function buildSpec(base: AlertRuleSpec | undefined, f: SpecFlags): AlertRuleSpec {
  const spec = base ? clone(AlertRuleSpecSchema, base) : create(AlertRuleSpecSchema, { severity: "WARNING" });
  if (f.displayName !== undefined) spec.displayName = f.displayName;
  if (f.metric !== undefined) spec.metricId = f.metric;
  if (f.operator !== undefined) spec.operator = operatorSymbols[f.operator] ?? f.operator.toUpperCase();
  if (f.threshold !== undefined) {
    const t = Number(f.threshold);
    if (f.threshold.trim() === "" || !Number.isFinite(t))
      throw new UsageError(`--threshold: "${f.threshold}" is not a number`);
    spec.threshold = t;
  }
  if (f.sustained !== undefined) spec.sustainedSeconds = parseSeconds(f.sustained, "--sustained");
  if (f.severity !== undefined) spec.severity = f.severity.toUpperCase();
  if (f.repeatInterval !== undefined) {
    spec.repeatIntervalSeconds = parseSeconds(f.repeatInterval, "--repeat-interval");
  }
  if (f.destination !== undefined) spec.destinationNames = [...f.destination];
  if (f.forecastHorizon !== undefined)
    spec.forecastHorizonSeconds = parseSeconds(f.forecastHorizon, "--forecast-horizon");
  if (f.forecastLookback !== undefined)
    spec.forecastLookbackSeconds = parseSeconds(f.forecastLookback, "--forecast-lookback");
  if (f.vm !== undefined && f.allVms) throw new UsageError("give either --all-vms or --vm, not both");
  if (f.vm !== undefined) {
    spec.allVms = false;
    spec.vmNames = [...f.vm];
  }
  if (f.allVms) {
    spec.allVms = true;
    spec.vmNames = [];
  }
  if (f.enabled && f.disabled) throw new UsageError("give either --enabled or --disabled, not both");
  if (f.enabled) spec.enabled = true;
  if (f.disabled) spec.enabled = false;
  if (!base) {
    const missing = [
      ["--display-name", f.displayName],
      ["--metric", f.metric],
      ["--operator", f.operator],
      ["--threshold", f.threshold],
    ].filter(([, v]) => v === undefined);
    if (missing.length > 0) {
      throw new UsageError(
        `without --template, --file or --edit the spec comes from flags: add ${missing.map(([n]) => n).join(", ")}`,
      );
    }
    if (f.vm === undefined && !f.allVms)
      throw new UsageError("choose the VMs: --all-vms or --vm <name> (repeatable)");
  }
  return spec;
}

/** What a --file holds: a spec, or a whole rule as `svc alerts get --json` prints it. */
export interface RuleFile {
  spec: AlertRuleSpec;
  /** From a whole rule only. */
  name?: string;
  id?: string;
  version?: string;
}

/**
 * Parses a rule file: JSON when the name ends in .json, YAML otherwise (YAML also reads JSON). Field
 * names are the API's (camelCase or the proto's snake_case); an unknown field is an error, so a typo
 * is not silently dropped.
 */
export function parseRuleFile(text: string, path: string): RuleFile {
  let doc: unknown;
  try {
    doc = path.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new UsageError(`${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc))
    throw new UsageError(
      `${path}: expected an alert rule spec (an object of fields), or a rule with a "spec"`,
    );
  try {
    if ("spec" in doc) {
      const rule = fromJson(AlertRuleSchema, doc as JsonValue);
      if (!rule.spec) throw new Error('"spec" is empty');
      return {
        spec: rule.spec,
        name: rule.name || undefined,
        id: rule.id || undefined,
        version: rule.version || undefined,
      };
    }
    return { spec: fromJson(AlertRuleSpecSchema, doc as JsonValue) };
  } catch (e) {
    throw new UsageError(`${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** projects/<p>/alertRules/<id> → its parts. */
export function parseRuleName(name: string): { project: string; id: string } {
  const m = /^(projects\/[^/]+)\/alertRules\/([^/]+)$/.exec(name);
  if (!m) throw new UsageError(`"${name}" is not a rule name (projects/<project_id>/alertRules/<id>)`);
  return { project: m[1], id: m[2] };
}

/**
 * Failures after which the save may or may not have been applied: no HTTP answer at all (connect
 * wraps the fetch error as `unknown` with that error as its cause), `unavailable` and
 * `deadline_exceeded`. They are retried with the same requestId, which the server answers with the
 * original outcome. An `aborted` (version conflict) or any other answer is definite and is not retried.
 */
export function isAmbiguous(e: unknown): boolean {
  const err = ConnectError.from(e);
  if (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded) return true;
  return err.code === Code.Unknown && err.cause instanceof Error && !(err.cause instanceof ConnectError);
}

const SAVE_ATTEMPTS = 3;
const SAVE_TIMEOUT_MS = 30_000;

/** SaveAlertRule, retried as it is (the same requestId) after an ambiguous failure. */
export async function saveWithRetry(
  clients: SvcClients,
  req: Pick<SaveAlertRuleRequest, "projectName" | "id" | "requestId" | "expectedVersion" | "spec">,
  io: CliIo = {},
): Promise<AlertRule> {
  const { err: log } = outOf(io);
  const sleep = io.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  for (let attempt = 1; ; attempt++) {
    try {
      return await clients.alerts.saveAlertRule(req, { timeoutMs: SAVE_TIMEOUT_MS });
    } catch (e) {
      const err = ConnectError.from(e);
      if (!isAmbiguous(err)) throw err;
      if (attempt >= SAVE_ATTEMPTS) {
        log(
          `no clear answer after ${attempt} attempts: the save may or may not have been applied. To retry exactly ` +
            `this request, run the same command with --id ${req.id} --expected-version ${req.expectedVersion} ` +
            `--request-id ${req.requestId}\n`,
        );
        throw err;
      }
      log(`no clear answer (${err.rawMessage}); retrying with the same request id ${req.requestId}\n`);
      await sleep(attempt * 1000);
    }
  }
}

function collect(value: string, prev: string[] | undefined): string[] {
  return [...(prev ?? []), value];
}

/** The spec options of save and preview. */
function specOptions(c: Command): Command {
  return c
    .option(
      "--file <path>",
      "the spec (or a rule as `get --json` prints it) in JSON or YAML; flags override it",
    )
    .option(
      "--template <id>",
      "start from a template: cpu, memory, filesystem, filesystem-forecast, unexpected-stop, telemetry",
    )
    .option("--display-name <name>", "a name to recognise the rule by")
    .option("--metric <id>", "metricId: cpu_utilization_pct, memory_used_pct, filesystem_used_pct, …")
    .option(
      "--operator <op>",
      "GREATER_THAN, GREATER_THAN_OR_EQUAL, LESS_THAN, LESS_THAN_OR_EQUAL (or >, >=, <, <=)",
    )
    .option("--threshold <n>", "the value the metric is compared with")
    .option("--sustained <duration>", "how long the condition must hold: seconds or 90s, 5m, 1h")
    .option("--severity <s>", "INFO, WARNING or CRITICAL")
    .option("--all-vms", "watch every current and future VM of the project")
    .option("--vm <name>", "watch this VM (full name; repeatable)", collect)
    .option("--enabled", "enable the rule")
    .option("--disabled", "save the rule paused (it watches nothing)")
    .option("--repeat-interval <duration>", "notify a still-firing incident again after this (0 = never)")
    .option(
      "--forecast-horizon <duration>",
      "compare the value predicted this far ahead (memory and filesystem usage; 0 = the newest sample)",
    )
    .option("--forecast-lookback <duration>", "the samples the forecast's line is fitted to, e.g. 6h")
    .option(
      "--destination <name>",
      "projects/<p>/destinations/<id> (repeatable; replaces the list)",
      collect,
    );
}

async function templateSpec(clients: SvcClients, id: string, project: string | undefined) {
  const { templates } = await clients.alerts.listAlertRuleTemplates({ projectName: project ?? "" });
  const t = templates.find((x) => x.id === id);
  if (!t?.spec)
    throw new UsageError(`no template "${id}" (templates: ${templates.map((x) => x.id).join(", ")})`);
  return t.spec;
}

/** The spec of save and preview from --file, --template and the flags, plus what a rule file names. */
async function specFromInputs(
  opts: SpecFlags & { file?: string },
  clients: SvcClients,
  project: string | undefined,
): Promise<{ file?: RuleFile; base?: AlertRuleSpec }> {
  if (opts.file && opts.template) throw new UsageError("give either --file or --template, not both");
  let file: RuleFile | undefined;
  if (opts.file) {
    let text: string;
    try {
      text = readFileSync(opts.file, "utf8");
    } catch (e) {
      throw new UsageError(`--file: ${e instanceof Error ? e.message : String(e)}`);
    }
    file = parseRuleFile(text, opts.file);
  }
  const base =
    file?.spec ?? (opts.template ? await templateSpec(clients, opts.template, project) : undefined);
  return { file, base };
}

function printRule(out: (s: string) => void, r: AlertRule): void {
  const s = r.spec;
  const c = r.instanceCounts;
  const rows: [string, string][] = [
    ["name", r.name],
    ["display name", s?.displayName ?? ""],
    ["condition", s ? conditionOf(s, s.sustainedSeconds) : "-"],
    ["severity", s?.severity ?? ""],
    ["vms", s?.allVms ? "all (current and future)" : (s?.vmNames.join(", ") ?? "")],
    ["enabled", String(s?.enabled ?? true)],
    ["repeat", s?.repeatIntervalSeconds ? `every ${human(s.repeatIntervalSeconds)}` : "never"],
    ["destinations", s?.destinationNames.length ? s.destinationNames.join(", ") : "in-app only"],
    ["version", `${r.version} (applied ${r.appliedVersion})`],
    ["sync", r.syncReason ? `${r.syncStatus}: ${r.syncReason}` : r.syncStatus],
    ["created", iso(r.createTimeUnix)],
    ["updated", iso(r.updateTimeUnix)],
    [
      "instances",
      `${r.expectedInstances} watched; pending ${c?.pending ?? 0}, firing ${c?.firing ?? 0}, resolved ${c?.resolved ?? 0}, ` +
        `retired ${c?.retired ?? 0}, no data ${c?.noData ?? 0}, error ${c?.error ?? 0}`,
    ],
  ];
  const a = r.appliedSpec;
  if (a)
    rows.push(["applied spec", `${conditionOf(a, a.sustainedSeconds)}, ${a.severity}, "${a.displayName}"`]);
  for (const [k, v] of rows) out(`${k.padEnd(13)} ${v}\n`);
  if (r.instances.length === 0) return;
  out("instances:\n");
  for (const i of r.instances) {
    const cols = [
      i.mountpoint ? `${i.vmName} ${i.mountpoint}` : i.vmName,
      `${i.state}${i.retireReason ? ` (${i.retireReason})` : ""} since ${iso(i.stateSinceUnix)}`,
      `last ${i.lastValue ?? "-"}`,
    ];
    if (i.flag) cols.push(i.flagMessage ? `${i.flag}: ${i.flagMessage}` : i.flag);
    if (i.incident) cols.push(i.incident);
    out(`  ${cols.join("\t")}\n`);
  }
}

function ruleLine(r: AlertRule): string {
  const s = r.spec;
  const vms = s?.allVms ? "all VMs" : `${s?.vmNames.length ?? 0} VMs`;
  const firing = r.instanceCounts?.firing ?? 0;
  return [
    r.name,
    `v${r.version}${r.appliedVersion === r.version ? "" : ` (applied ${r.appliedVersion})`}`,
    r.syncStatus,
    s?.enabled === false ? "DISABLED" : (s?.severity ?? ""),
    s ? conditionOf(s, s.sustainedSeconds) : "-",
    vms,
    `firing ${firing}`,
    s?.displayName ?? "",
  ].join("\t");
}

export function printPreview(out: (s: string) => void, p: PreviewAlertRuleResponse): void {
  const pct =
    p.expectedSamples > 0n
      ? ` (${((Number(p.evaluatedSamples) / Number(p.expectedSamples)) * 100).toFixed(1)}%)`
      : "";
  out(`query ${p.queryStatus}${p.queryMessage ? `: ${p.queryMessage}` : ""}\n`);
  out(`history ${p.historyStatus}: ${p.evaluatedSamples} of ${p.expectedSamples} expected samples${pct}\n`);
  out(
    `window ${iso(p.startTimeUnix)} .. ${iso(p.endTimeUnix)}, evaluated every ${human(p.evaluationIntervalSeconds)}\n`,
  );
  out(`${p.firingInstances} of ${p.instances.length} instances would have fired\n`);
  for (const i of p.instances) {
    const where = i.mountpoint ? `${i.vmName} ${i.mountpoint}` : i.vmName;
    const gaps = [
      i.noDataEvaluations ? `${i.noDataEvaluations} without data` : "",
      i.errorEvaluations ? `${i.errorEvaluations} failed` : "",
    ].filter(Boolean);
    out(
      `${where}\t${i.finalState}\tfired ${i.firingIntervals.length}×\tsamples ${i.evaluatedSamples}/${i.expectedSamples}` +
        `${gaps.length ? `\tevaluations ${gaps.join(", ")}` : ""}\n`,
    );
    if (i.predictedCrossingTimeUnix !== undefined)
      out(`  forecast: the line at the end reaches the threshold at ${iso(i.predictedCrossingTimeUnix)}\n`);
    for (const f of i.firingIntervals) {
      out(
        f.endTimeUnix === 0n
          ? `  firing ${iso(f.startTimeUnix)} .. still firing at the end\n`
          : `  firing ${iso(f.startTimeUnix)} .. ${iso(f.endTimeUnix)} (${human(Number(f.endTimeUnix - f.startTimeUnix))})\n`,
      );
    }
  }
}

export function registerAlertCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const alerts = program
    .command("alerts")
    .description(
      "alert rules (monitoring.read to read and preview, monitoring.write to save and delete; SVC_TOKEN)",
    );

  alerts
    .command("templates")
    .description("ready specs to start a rule from (--template <id>)")
    .addOption(projectOption("projects/<project_id> (optional)", false))
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const { templates } = await clients.alerts.listAlertRuleTemplates({ projectName: opts.project ?? "" });
      if (opts.json)
        return printJson(
          out,
          templates.map((t) => jsonOf(AlertRuleTemplateSchema, t)),
        );
      for (const t of templates) {
        const s = t.spec;
        out(
          `${t.id}\t${s ? conditionOf(s, s.sustainedSeconds) : "-"}\t${s?.severity ?? ""}\t${t.displayName}: ${t.description}\n`,
        );
      }
    });

  alerts
    .command("list")
    .description("the project's rules (all pages)")
    .addOption(projectOption())
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const rules: AlertRule[] = [];
      let pageToken = "";
      do {
        const page = await clients.alerts.listAlertRules({
          projectName: opts.project,
          pageSize: 50,
          pageToken,
        });
        rules.push(...page.rules);
        pageToken = page.nextPageToken ?? "";
      } while (pageToken);
      if (opts.json)
        return printJson(
          out,
          rules.map((r) => jsonOf(AlertRuleSchema, r)),
        );
      printLines(out, rules.map(ruleLine), !io.stdout);
    });

  alerts
    .command("get")
    .description("one rule: spec, desired and applied version, instance counts")
    .argument("<name>", "projects/<project_id>/alertRules/<id>")
    .option("--instances", "ask for the rule's stored instances too")
    .option("--json", "print JSON (the shape `save --file` reads back)")
    .action(async (name: string, opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const r = await clients.alerts.getAlertRule({ name, includeInstances: Boolean(opts.instances) });
      if (opts.json) return printJson(out, jsonOf(AlertRuleSchema, r));
      printRule(out, r);
    });

  specOptions(
    alerts
      .command("save")
      .description("create a rule, or edit one (--edit, or --id with --expected-version)")
      .addOption(
        projectOption("projects/<project_id> (may be left out with a key bound to one project)", false),
      )
      .option("--id <uuid>", "the rule's id (default: a new one, i.e. create)"),
  )
    .option("--expected-version <v>", '"0" creates (the default); an edit gives the latest version')
    .option("--edit", "edit the rule --id: fetch it, start from its spec and (unless given) its version")
    .option("--request-id <uuid>", "reuse to retry an interrupted save by hand (default: a new one)")
    .option("--json", "print the saved rule as JSON")
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      let project: string | undefined = opts.project;
      const { file, base: given } = await specFromInputs(opts, clients, project);
      let base = given;
      if (file?.name) {
        const named = parseRuleName(file.name);
        if (project && project !== named.project)
          throw new UsageError(`--project ${project} differs from the file's rule ${file.name}`);
        project = named.project;
      }
      let id: string | undefined = opts.id ?? file?.id;
      let expectedVersion: string | undefined = opts.expectedVersion ?? file?.version;
      if (opts.edit) {
        if (!id) throw new UsageError("--edit needs --id (or a --file holding the rule)");
        if (!project) throw new UsageError("--edit needs --project (or a --file holding the rule)");
        const current = await clients.alerts.getAlertRule({ name: `${project}/alertRules/${id}` });
        expectedVersion = opts.expectedVersion ?? current.version;
        base ??= current.spec;
      }
      if (!id) {
        if (expectedVersion !== undefined && expectedVersion !== "0")
          throw new UsageError("an edit needs the rule's --id");
        id = randomUUID();
      }
      expectedVersion ??= "0";
      const spec = buildSpec(base, opts);
      const requestId: string = opts.requestId ?? randomUUID();
      err(
        `${expectedVersion === "0" ? "creating" : `editing version ${expectedVersion} of`} rule ${id}, request id ${requestId}\n`,
      );
      const rule = await saveWithRetry(
        clients,
        { projectName: project ?? "", id, requestId, expectedVersion, spec },
        io,
      );
      if (rule.replayed) err("an earlier attempt of this request was applied; this is its answer\n");
      if (opts.json) return printJson(out, jsonOf(AlertRuleSchema, rule));
      out(`${rule.name}\tversion ${rule.version}\t${rule.syncStatus}\n`);
    });

  specOptions(
    alerts
      .command("preview")
      .description("evaluate a spec over recent history; saves nothing, sends nothing")
      .addOption(
        projectOption("projects/<project_id> (may be left out with a key bound to one project)", false),
      ),
  )
    .option("--rule <name>", "start from this rule's current spec (projects/<p>/alertRules/<id>)")
    .option("--history <duration>", "how far back, ending now: seconds or 30m, 6h, 1d (at most 1d)", "6h")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const historySeconds = parseSeconds(opts.history, "--history");
      let project: string | undefined = opts.project;
      const { file, base: given } = await specFromInputs(opts, clients, project);
      let base = given;
      if (file?.name) project ??= parseRuleName(file.name).project;
      if (opts.rule) {
        project ??= parseRuleName(opts.rule).project;
        base ??= (await clients.alerts.getAlertRule({ name: opts.rule })).spec;
      }
      const spec = buildSpec(base, opts);
      const res = await clients.alerts.previewAlertRule({ projectName: project ?? "", spec, historySeconds });
      if (opts.json) return printJson(out, jsonOf(PreviewAlertRuleResponseSchema, res));
      printPreview(out, res);
    });

  alerts
    .command("delete")
    .description("retire the rule's instances and open incidents, then remove it")
    .argument("<name>", "projects/<project_id>/alertRules/<id>")
    .option("--expected-version <v>", "refuse unless the rule is still at this version")
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const res = await clients.alerts.deleteAlertRule({ name, expectedVersion: opts.expectedVersion ?? "" });
      if (opts.json) return printJson(out, jsonOf(DeleteAlertRuleResponseSchema, res));
      out(
        `deleted ${res.name}; retired ${res.retiredInstances} instances and ${res.retiredIncidents} open incidents\n`,
      );
    });
}
