import { toJson } from "@bufbuild/protobuf";
import {
  QueryVMMonitoringResponseSchema,
  VMMonitoringSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import type { Command } from "commander";
import { printStructured, printTable, projectOption, UsageError } from "../common.ts";
import { type CliIo, clientsOf, outOf } from "./alerts.ts";

function parseDuration(s: string): number {
  const m = /^(\d+)(s|m|h|d)$/.exec(s);
  if (!m) throw new UsageError(`"${s}" is not a duration like 30m, 6h or 7d`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as "s" | "m" | "h" | "d"];
}

export function registerMonitoringCommands(program: Command, io: CliIo = {}): void {
  const { out, err } = outOf(io);
  const mon = program
    .command("monitoring")
    .description("VM metrics (a key or CI token with monitoring.read in SVC_API_KEY)");

  mon
    .command("list")
    .description("the project's VMs, with latest CPU and memory unless --inventory-only")
    .addOption(projectOption())
    .option("--inventory-only", "list VMs without reading metrics")
    .option("--json", "print JSON")
    .addHelpText(
      "after",
      `
Examples:
  svc monitoring list --project projects/demo --inventory-only
  SVC_PROJECT=projects/demo svc monitoring list --output yaml`,
    )
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const vms = [];
      let pageToken = "";
      do {
        if (vms.length > 0 && process.stderr.isTTY) err(`\rread ${vms.length} VMs…`);
        const page = await clients.monitoring.listVMMonitoring({
          projectName: opts.project,
          pageSize: 50,
          pageToken,
          inventoryOnly: Boolean(opts.inventoryOnly),
        });
        vms.push(...page.vms);
        pageToken = page.nextPageToken ?? "";
      } while (pageToken);
      if (vms.length > 50 && process.stderr.isTTY) err("\n");
      if (opts.json)
        return printStructured(
          out,
          vms.map((v) => toJson(VMMonitoringSchema, v, { alwaysEmitImplicit: true })),
        );
      printTable(
        out,
        ["NAME", "STATE", "LEVEL", "CPU", "MEMORY", "QUALITY"],
        vms.map((v) => [
          v.name,
          v.state,
          v.monitoringLevel,
          v.cpuUtilizationPct === undefined ? "-" : `${v.cpuUtilizationPct.toFixed(1)}%`,
          v.memoryUsedBytes === undefined ? "-" : `${(v.memoryUsedBytes / 2 ** 30).toFixed(2)} GiB`,
          v.quality?.stale ? "STALE" : "",
        ]),
      );
    });

  mon
    .command("query")
    .description("time series of one VM (missing samples are shown as gaps, never as 0)")
    .requiredOption("--vm <name>", "full VM name as listed")
    .option("--metric <id...>", "metric ids", ["cpu_utilization_pct", "memory_used_bytes"])
    .option("--since <duration>", "range ending now, e.g. 1h, 7d", "1h")
    .option("--step <seconds>", "step, at least 30", "60")
    .option("--json", "print the response as JSON")
    .addHelpText(
      "after",
      `
Examples:
  svc monitoring query --vm projects/demo/locations/dc-1/vms/web-1 --since 6h --step 300
  svc monitoring query --vm projects/demo/locations/dc-1/vms/web-1 --metric cpu_utilization_pct --output json`,
    )
    .action(async (opts, cmd: Command) => {
      const clients = clientsOf(cmd, io);
      const end = Math.floor(Date.now() / 1000);
      const res = await clients.monitoring.queryVMMonitoring({
        name: opts.vm,
        metricIds: opts.metric,
        startTimeUnix: BigInt(end - parseDuration(opts.since)),
        endTimeUnix: BigInt(end),
        stepSeconds: Number(opts.step),
      });
      if (opts.json)
        return printStructured(
          out,
          toJson(QueryVMMonitoringResponseSchema, res, { alwaysEmitImplicit: true }),
        );
      out(
        `# ${res.startTimeUnix}..${res.endTimeUnix} step ${res.stepSeconds}s${res.quality?.stale ? " (stale)" : ""}\n`,
      );
      for (const s of res.series) {
        const labels = Object.entries(s.labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(",");
        out(`${s.metricId}{${labels}} ${s.unit} ${s.points.length} points\n`);
        for (const p of s.points) out(`  ${new Date(Number(p.timeUnix) * 1000).toISOString()}\t${p.value}\n`);
      }
      for (const e of res.quality?.errors ?? []) err(`error: ${e.metricId}: ${e.code}: ${e.message}\n`);
    });
}
