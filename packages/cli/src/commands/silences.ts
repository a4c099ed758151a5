import { randomUUID } from "node:crypto";
import {
  ListSilencesResponseSchema,
  type Silence,
  SilenceSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/silences_pb";
import type { Command } from "commander";
import { pageSizeOption, printPage, projectOption, stateOption, UsageError } from "../common.ts";
import { type CliIo, clientsOf, isAmbiguous, iso, jsonOf, outOf, parseSeconds, printJson } from "./alerts.ts";

const states = ["PENDING", "ACTIVE", "EXPIRED"];
const collect = (v: string, prev: string[] = []) => [...prev, v];

/** "now", Unix seconds, or an ISO 8601 time → Unix seconds (0 = now). */
export function parseTime(s: string, flag: string): bigint {
  if (s === "now") return 0n;
  if (/^\d+$/.test(s)) return BigInt(s);
  const ms = Date.parse(s);
  if (Number.isNaN(ms) || !/^\d{4}-\d{2}-\d{2}T/.test(s))
    throw new UsageError(
      `${flag}: "${s}" is not "now", Unix seconds or an ISO time like 2026-11-27T22:00:00Z`,
    );
  return BigInt(Math.floor(ms / 1000));
}

/** The window from --start and --end or --duration: [start, end) in Unix seconds (start 0 = now). */
export function windowOf(
  opts: { start?: string; end?: string; duration?: string },
  nowS: number,
): { startTimeUnix: bigint; endTimeUnix: bigint } {
  const startTimeUnix = parseTime(opts.start ?? "now", "--start");
  if (opts.end !== undefined && opts.duration !== undefined)
    throw new UsageError("give --end or --duration, not both");
  if (opts.end !== undefined) return { startTimeUnix, endTimeUnix: parseTime(opts.end, "--end") };
  if (opts.duration === undefined) throw new UsageError("--end or --duration is required");
  const from = startTimeUnix === 0n ? BigInt(nowS) : startTimeUnix;
  return { startTimeUnix, endTimeUnix: from + BigInt(parseSeconds(opts.duration, "--duration")) };
}

function silenceLine(s: Silence): string {
  const matchers = [...s.ruleNames, ...s.vmNames].join(",");
  return [s.name, s.state, iso(s.startTimeUnix), iso(s.endTimeUnix), matchers, s.creator, s.comment].join(
    "\t",
  );
}

function printSilence(out: (s: string) => void, s: Silence): void {
  const rows: [string, string][] = [
    ["name", s.name],
    ["state", s.state],
    ["window", `${iso(s.startTimeUnix)} → ${iso(s.endTimeUnix)}`],
    ["rules", s.ruleNames.join(", ") || "(every rule)"],
    ["vms", s.vmNames.join(", ") || "(every VM)"],
    ["comment", s.comment],
    ["creator", s.creator],
    ["updated by", `${s.updatedBy} at ${iso(s.updateTimeUnix)} (version ${s.version})`],
  ];
  for (const [k, v] of rows) out(`${k.padEnd(11)} ${v}\n`);
}

/** `svc silences`: schedule, list, edit and expire silences (silences.write to change them). */
export function registerSilenceCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const silences = program
    .command("silences")
    .description("silences: windows that mute notifications of rules and/or VMs (SVC_TOKEN)");
  const show = (s: Silence, json: boolean) =>
    json ? printJson(out, jsonOf(SilenceSchema, s)) : printSilence(out, s);

  silences
    .command("create")
    .description(
      "schedule a silence (silences.write; a key: at most 24 h); retried as it is after an ambiguous failure",
    )
    .addOption(projectOption())
    .option("--rule <name>", "mute this rule: projects/<p>/alertRules/<id> (repeatable)", collect, [])
    .option("--vm <name>", "mute this VM (full name; repeatable)", collect, [])
    .option("--start <time>", "now (default), Unix seconds or an ISO time")
    .option("--end <time>", "Unix seconds or an ISO time")
    .option("--duration <d>", "instead of --end: 90m, 2h, 1d …")
    .requiredOption("--comment <text>", "why")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const window = windowOf(opts, Math.floor(Date.now() / 1000));
      const clients = clientsOf(cmd, io);
      const req = {
        projectName: opts.project,
        requestId: randomUUID(),
        comment: opts.comment,
        ruleNames: opts.rule,
        vmNames: opts.vm,
        ...window,
      };
      let s: Silence;
      for (let attempt = 1; ; attempt++) {
        try {
          s = await clients.silences.createSilence(req);
          break;
        } catch (e) {
          if (!isAmbiguous(e) || attempt >= 3) throw e;
          err(`no answer; retrying the same request (requestId ${req.requestId})\n`);
        }
      }
      show(s, opts.json);
    });

  silences
    .command("list")
    .description("one page of the project's silences, newest first")
    .addOption(projectOption())
    .option("--state <state>", "PENDING, ACTIVE or EXPIRED (default: all)")
    .option("--page-size <n>", "silences per page", "50")
    .option("--page-token <token>", "nextPageToken of the previous page")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const state = stateOption(opts.state, states);
      const pageSize = pageSizeOption(opts.pageSize);
      const res = await clientsOf(cmd, io).silences.listSilences({
        projectName: opts.project,
        state,
        pageSize,
        pageToken: opts.pageToken ?? "",
      });
      if (opts.json) return printJson(out, jsonOf(ListSilencesResponseSchema, res));
      printPage({ out, err, toTerminal: !io.stdout }, res.silences.map(silenceLine), res.nextPageToken);
    });

  silences
    .command("get")
    .description("one silence")
    .argument("<name>", "projects/<project_id>/silences/<id>")
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      show(await clientsOf(cmd, io).silences.getSilence({ name }), opts.json);
    });

  silences
    .command("update")
    .description("edit a silence that has not expired: flags not given keep their value (silences.write)")
    .argument("<name>", "projects/<project_id>/silences/<id>")
    .option("--rule <name>", "the rules to mute (repeatable; replaces the list)", collect)
    .option("--vm <name>", "the VMs to mute (repeatable; replaces the list)", collect)
    .option("--start <time>", "now, Unix seconds or an ISO time")
    .option("--end <time>", "Unix seconds or an ISO time")
    .option("--duration <d>", "instead of --end, from the start")
    .option("--comment <text>", "why")
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const cur = await clients.silences.getSilence({ name });
      const start = opts.start === undefined ? cur.startTimeUnix : parseTime(opts.start, "--start");
      let end = cur.endTimeUnix;
      if (opts.end !== undefined || opts.duration !== undefined)
        end = windowOf(
          { ...opts, start: String(start === 0n ? "now" : start) },
          Math.floor(Date.now() / 1000),
        ).endTimeUnix;
      const s = await clients.silences.updateSilence({
        name,
        expectedVersion: cur.version,
        startTimeUnix: start,
        endTimeUnix: end,
        comment: opts.comment ?? cur.comment,
        ruleNames: opts.rule ?? cur.ruleNames,
        vmNames: opts.vm ?? cur.vmNames,
      });
      show(s, opts.json);
    });

  silences
    .command("expire")
    .description("end a silence now (silences.write)")
    .argument("<name>", "projects/<project_id>/silences/<id>")
    .option("--json", "print JSON")
    .action(async (name: string, opts, cmd: Command) => {
      show(await clientsOf(cmd, io).silences.expireSilence({ name }), opts.json);
    });
}
