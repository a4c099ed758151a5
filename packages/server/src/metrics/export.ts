import type { Db } from "../db/database.ts";
import type { VmTable } from "../db/schema.ts";
import { invalidArgument } from "../errors.ts";
import { vmName } from "../inventory/names.ts";
import type { Labels } from "../storage/interface.ts";
import type { MetricsBackend } from "./backend.ts";
import { seriesCatalog } from "./catalog.ts";
import type { ProjectLimiter } from "./concurrency.ts";
import { regexQuote } from "./latest.ts";
import type { MetricsOptions } from "./options.ts";

export interface ExportDeps {
  readonly db: Db;
  readonly metrics: MetricsBackend;
  readonly limiter: ProjectLimiter;
  /** Clock, ms. */
  readonly now: () => number;
  readonly options: MetricsOptions;
}

/** Content type of the export: Prometheus text exposition 0.0.4. */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Series rendered between yields to the event loop. */
const RENDER_BATCH = 1000;

/**
 * Stable VM → shard mapping: FNV-1a (32-bit) of the full VM name modulo the shard count. It depends
 * on nothing but the name, so a VM never moves while the shard count stays fixed.
 */
export function shardOf(vm: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < vm.length; i++) {
    h ^= vm.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % shards;
}

/** Parses the `shard` query parameter: an integer 0 ≤ shard < shards. */
export function parseShard(raw: unknown, shards: number): number {
  const s = typeof raw === "string" ? raw : "";
  if (!/^\d{1,3}$/.test(s) || Number(s) >= shards)
    throw invalidArgument("shard", `must be an integer 0..${shards - 1} (from scrape discovery)`);
  return Number(s);
}

/**
 * One export shard in the text exposition format: the newest sample of each stored series of the
 * shard's VMs within the export window, with its original millisecond timestamp (a series whose newest
 * sample is a staleness marker has ended and is left out), plus `svc_vm_info` per VM from the
 * inventory. `# HELP` / `# TYPE` come from the catalog; the tenant label is never written.
 */
export async function renderExportShard(deps: ExportDeps, projectId: string, shard: number): Promise<string> {
  const rows = await deps.db.selectFrom("vms").selectAll().where("project_id", "=", projectId).execute();
  const mine = rows
    .map((r) => ({ r, name: vmName({ projectId, location: r.location, vmId: r.vm_id }) }))
    .filter((v) => shardOf(v.name, deps.options.exportShards) === shard)
    .sort((a, b) => cmp(a.name, b.name));
  if (mine.length === 0) return "";
  const nowMs = deps.now();
  const data = await deps.limiter.run(projectId, () =>
    deps.metrics.latest(
      projectId,
      [{ type: "=~", name: "vm", value: mine.map((v) => regexQuote(v.name)).join("|") }],
      nowMs,
      deps.options.exportWindowMs,
    ),
  );
  const byName = new Map<string, string[]>();
  for (let i = 0; i < data.length; i++) {
    // A shard is ~10,000 lines (~30 ms to render): other requests get the event loop in between.
    if (i > 0 && i % RENDER_BATCH === 0) await new Promise((r) => setImmediate(r));
    const s = data[i];
    const name = s.labels.find((l) => l.name === "__name__")?.value ?? "";
    if (!(name in seriesCatalog)) continue;
    let lines = byName.get(name);
    if (!lines) {
      lines = [];
      byName.set(name, lines);
    }
    lines.push(`${name}${expositionLabels(s.labels)} ${formatValue(s.value)} ${s.timestampMs}`);
  }
  const out: string[] = [];
  for (const name of [...byName.keys()].sort()) {
    const spec = seriesCatalog[name];
    out.push(`# HELP ${name} ${escapeHelp(spec.help)}`, `# TYPE ${name} ${spec.type}`);
    out.push(...(byName.get(name) ?? []).sort());
  }
  const live = mine.filter((v) => v.r.state !== "DELETED");
  if (live.length > 0) {
    out.push(
      "# HELP svc_vm_info VM inventory (join target for dashboards): display name, state and monitoring level.",
      "# TYPE svc_vm_info gauge",
    );
    for (const v of live) out.push(`svc_vm_info${infoLabels(v.name, v.r)} 1`);
  }
  return `${out.join("\n")}\n`;
}

function infoLabels(name: string, r: VmTable): string {
  return expositionLabels([
    { name: "display_name", value: r.display_name },
    { name: "location", value: r.location },
    { name: "monitoring_level", value: r.monitoring_level },
    { name: "state", value: r.state },
    { name: "vm", value: name },
    { name: "vm_id", value: r.vm_id },
  ]);
}

/** What the text format escapes in a label value; most values have none (a test, not three replaces). */
const NEEDS_ESCAPE = /[\\"\n]/;

/** `{name="value",…}` as the text exposition format writes it, without the name and tenant labels. */
export function expositionLabels(labels: Labels): string {
  let out = "";
  for (const l of labels) {
    if (l.name === "__name__" || l.name === "project_id") continue;
    const v = NEEDS_ESCAPE.test(l.value)
      ? l.value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")
      : l.value;
    out += `${out === "" ? "{" : ","}${l.name}="${v}"`;
  }
  return out === "" ? "" : `${out}}`;
}

function escapeHelp(s: string): string {
  return s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Prometheus HTTP SD group. */
export interface HttpSdGroup {
  targets: string[];
  labels: Record<string, string>;
}

/**
 * Scrape discovery (HTTP SD): one group per export shard, each the same host with its own
 * `__param_shard`. The list depends only on the shard count, so it never changes as VMs come and go.
 * `svc_shard` keeps the shards' `up` series apart; the project id is in the path only.
 */
export function scrapeTargets(
  projectId: string,
  shards: number,
  host: string,
  scheme: string,
): HttpSdGroup[] {
  const groups: HttpSdGroup[] = [];
  for (let i = 0; i < shards; i++) {
    groups.push({
      targets: [host],
      labels: {
        __scheme__: scheme,
        __metrics_path__: `/v1/monitoring/projects/${projectId}/export`,
        __param_shard: String(i),
        svc_shard: String(i),
      },
    });
  }
  return groups;
}
