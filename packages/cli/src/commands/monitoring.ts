import { createSvcClients } from "@svc/sdk";
import type { Command } from "commander";
import { baseUrlOf, UsageError } from "../common.ts";
import { tokenOf } from "./token.ts";

function parseDuration(s: string): number {
  const m = /^(\d+)(s|m|h|d)$/.exec(s);
  if (!m) throw new UsageError(`"${s}" is not a duration like 30m, 6h or 7d`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2] as "s" | "m" | "h" | "d"];
}

export function registerMonitoringCommands(program: Command): void {
  const mon = program
    .command("monitoring")
    .description("VM metrics (token with monitoring.read in SVC_TOKEN)");

  mon
    .command("list")
    .description("the project's VMs, with latest CPU and memory unless --inventory-only")
    .requiredOption("--project <name>", "projects/<project_id>")
    .option("--inventory-only", "list VMs without reading metrics")
    .option("--json", "print JSON")
    .action(async (opts, cmd: Command) => {
      const clients = createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf() });
      const vms = [];
      let pageToken = "";
      do {
        const page = await clients.monitoring.listVMMonitoring({
          projectName: opts.project,
          pageSize: 50,
          pageToken,
          inventoryOnly: Boolean(opts.inventoryOnly),
        });
        vms.push(...page.vms);
        pageToken = page.nextPageToken ?? "";
      } while (pageToken);
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify(vms, (_k, v) => (typeof v === "bigint" ? String(v) : v), 2)}\n`,
        );
        return;
      }
      for (const v of vms) {
        const cpu = v.cpuUtilizationPct === undefined ? "-" : `${v.cpuUtilizationPct.toFixed(1)}%`;
        const mem = v.memoryUsedBytes === undefined ? "-" : `${(v.memoryUsedBytes / 2 ** 30).toFixed(2)} GiB`;
        process.stdout.write(
          `${v.name}\t${v.state}\t${v.monitoringLevel}\tcpu ${cpu}\tmem ${mem}${v.quality?.stale ? "\tSTALE" : ""}\n`,
        );
      }
    });

  mon
    .command("query")
    .description("time series of one VM (missing samples are shown as gaps, never as 0)")
    .requiredOption("--vm <name>", "full VM name as listed")
    .option("--metric <id...>", "metric ids", ["cpu_utilization_pct", "memory_used_bytes"])
    .option("--since <duration>", "range ending now, e.g. 1h, 7d", "1h")
    .option("--step <seconds>", "step, at least 30", "60")
    .option("--json", "print the response as JSON")
    .action(async (opts, cmd: Command) => {
      const clients = createSvcClients({ baseUrl: baseUrlOf(cmd), token: tokenOf() });
      const end = Math.floor(Date.now() / 1000);
      const res = await clients.monitoring.queryVMMonitoring({
        name: opts.vm,
        metricIds: opts.metric,
        startTimeUnix: BigInt(end - parseDuration(opts.since)),
        endTimeUnix: BigInt(end),
        stepSeconds: Number(opts.step),
      });
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify(res, (_k, v) => (typeof v === "bigint" ? String(v) : v), 2)}\n`,
        );
        return;
      }
      process.stdout.write(
        `# ${res.startTimeUnix}..${res.endTimeUnix} step ${res.stepSeconds}s${res.quality?.stale ? " (stale)" : ""}\n`,
      );
      for (const s of res.series) {
        const labels = Object.entries(s.labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(",");
        process.stdout.write(`${s.metricId}{${labels}} ${s.unit} ${s.points.length} points\n`);
        for (const p of s.points)
          process.stdout.write(`  ${new Date(Number(p.timeUnix) * 1000).toISOString()}\t${p.value}\n`);
      }
      for (const e of res.quality?.errors ?? [])
        process.stderr.write(`error: ${e.metricId}: ${e.code}: ${e.message}\n`);
    });
}
