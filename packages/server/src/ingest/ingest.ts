import type { TimeSeries, WriteRequest } from "@svc/remotewrite";
import type { Db } from "../db/database.ts";
import { parseVmName, type VmRef, vmName } from "../inventory/names.ts";
import { type Source, seriesCatalog } from "../metrics/catalog.ts";
import {
  type AppendRefusal,
  isStaleNaNValue,
  type Label,
  type Labels,
  type Storage,
  staleNaN,
} from "../storage/interface.ts";
import type { IngestPrincipal } from "./credentials.ts";
import { derive, emptyBatch, type Point, type VmBatch, type VmDeriveState } from "./derive.ts";

/** Why ingest refused series or samples; a 400 names each with its counts. */
export type IngestRefusal =
  | AppendRefusal
  | "unknown_vm" // the `vm` label names no live VM of the inventory
  | "unknown_metric" // a name outside the catalog
  | "bad_labels" // missing/invalid `vm`, or a label the metric does not carry
  | "not_permitted" // the writer may not write this VM or this metric
  | "derived_series"; // a series svc computes itself

export interface IngestResult {
  acceptedSamples: number;
  /** Per reason: refused series and samples. */
  refused: Partial<Record<IngestRefusal, { series: number; samples: number }>>;
  /** Up to five concrete examples, for the error message (no values, no secrets). */
  examples: string[];
}

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export interface Ingester {
  ingest(principal: IngestPrincipal, req: WriteRequest): Promise<IngestResult>;
}

interface VmInfo {
  readonly ref: VmRef;
  readonly vcpus: number;
}

/**
 * The write path: validate each series against the catalog and the inventory, add the tenant and VM
 * labels, append the valid samples and the derived series, commit (durable in the WAL before the
 * promise resolves). Invalid series are refused and counted; the valid rest of the batch is kept.
 */
export function createIngester(deps: { db: Db; storage: Storage }): Ingester {
  const state = new Map<string, VmDeriveState>();

  // Known VMs, re-read at most every VM_CACHE_TTL_MS: a collector sends every VM every 30 s, and one
  // SQLite query per request was a fifth of ingest CPU. Unknown VMs are never cached, so a VM created
  // a moment ago is accepted at once; a deleted one is refused within the TTL.
  const vmCache = new Map<string, { info: VmInfo; at: number }>();

  async function lookupVms(names: Set<string>): Promise<Map<string, VmInfo>> {
    const now = Date.now();
    const out = new Map<string, VmInfo>();
    const byProject = new Map<string, string[]>();
    for (const name of names) {
      const hit = vmCache.get(name);
      if (hit && now - hit.at < VM_CACHE_TTL_MS) {
        out.set(name, hit.info);
        continue;
      }
      const ref = tryParseVm(name);
      if (!ref) continue;
      byProject.set(ref.projectId, [...(byProject.get(ref.projectId) ?? []), ref.vmId]);
    }
    if (vmCache.size > 200_000) vmCache.clear();
    for (const [projectId, ids] of byProject) {
      const rows = await deps.db
        .selectFrom("vms")
        .select(["project_id", "vm_id", "location", "vcpus"])
        .where("project_id", "=", projectId)
        .where("vm_id", "in", ids)
        .where("state", "!=", "DELETED")
        .execute();
      for (const r of rows) {
        const ref = { projectId: r.project_id, location: r.location, vmId: r.vm_id };
        const info = { ref, vcpus: r.vcpus };
        const name = vmName(ref);
        out.set(name, info);
        vmCache.set(name, { info, at: now });
      }
    }
    return out;
  }

  // Validated label sets by the labels as sent: the same series arrives every interval, and building,
  // checking and sorting its labels again each time was most of the ingest path's own CPU.
  const seriesCache = new Map<string, Resolved>();

  return {
    async ingest(principal, req) {
      const result: IngestResult = { acceptedSamples: 0, refused: {}, examples: [] };
      const refuse = (reason: IngestRefusal, ts: TimeSeries, why: string) => {
        const r = refusalOf(result, reason);
        r.series++;
        r.samples += ts.samples.length;
        if (result.examples.length < 5) result.examples.push(`${reason}: ${why}`);
      };
      const source: Source = principal.kind === "collector" ? "hypervisor" : "guest_agent";
      const n = req.timeseries.length;
      const keys = new Array<string>(n);
      const hits = new Array<Resolved | undefined>(n);
      const vmNames = new Set<string>();
      for (let i = 0; i < n; i++) {
        const ts = req.timeseries[i];
        keys[i] = seriesKey(source, ts.labels);
        hits[i] = seriesCache.get(keys[i]);
        const vm = hits[i]?.vm ?? ts.labels.find((l) => l.name === "vm")?.value;
        if (vm) vmNames.add(vm);
      }
      const vms = await lookupVms(vmNames);
      const app = deps.storage.appender();
      const batches = new Map<string, { info: VmInfo; batch: VmBatch & { newestT: number } }>();
      if (seriesCache.size > 1_000_000) seriesCache.clear();

      for (let i = 0; i < n; i++) {
        const ts = req.timeseries[i];
        let resolved = hits[i];
        if (resolved === undefined) {
          const r = resolveSeries(ts, source, vms);
          if (typeof r === "string") {
            const [reason, why] = r.split("\u0000") as [IngestRefusal, string];
            refuse(reason, ts, why);
            continue;
          }
          resolved = r;
          seriesCache.set(keys[i], r);
        }
        const info = vms.get(resolved.vm);
        if (!info) {
          refuse("unknown_vm", ts, `vm "${resolved.vm.slice(0, 200)}" is not a known VM`);
          continue;
        }
        if (principal.kind === "agent" && vmName(principal.vm) !== resolved.vm) {
          refuse("not_permitted", ts, "a guest agent writes only its own VM");
          continue;
        }
        let entry = batches.get(resolved.vm);
        if (!entry) {
          entry = { info, batch: { ...emptyBatch(), newestT: Number.NEGATIVE_INFINITY } };
          batches.set(resolved.vm, entry);
        }
        const sink = resolved.feeds === undefined ? undefined : entry.batch[resolved.feeds];
        for (const s of ts.samples) {
          // Values go to the appender untouched so a staleness marker keeps its bits.
          if (!app.append(resolved.labels, s.timestampMs, s.value)) continue;
          if (s.timestampMs > entry.batch.newestT) entry.batch.newestT = s.timestampMs;
          sink?.push({ t: s.timestampMs, v: s.value, stale: isStaleNaNValue(s.value) });
        }
      }

      let derivedSamples = 0;
      for (const [vm, { info, batch }] of batches) {
        const key = `${vm}|${source}`;
        let st = state.get(key);
        if (!st) {
          st = {};
          state.set(key, st);
        }
        const d = derive(batch, st, info.vcpus);
        derivedSamples +=
          appendDerived(app, "svc_vm_cpu_utilization_pct", info.ref, source, d.cpuUtilizationPct) +
          appendDerived(app, "svc_vm_memory_used_bytes", info.ref, source, d.memoryUsedBytes) +
          appendDerived(
            app,
            "svc_vm_last_observation_timestamp_seconds",
            info.ref,
            source,
            d.lastObservation,
          );
      }

      const committed = await app.commit();
      result.acceptedSamples = Math.max(0, committed.accepted - derivedSamples);
      for (const [reason, n] of Object.entries(committed.refused) as [AppendRefusal, number][]) {
        if (!n) continue;
        refusalOf(result, reason).samples += n;
        if (result.examples.length < 5) {
          result.examples.push(
            reason === "out_of_order"
              ? `out_of_order: ${n} samples older than the out-of-order window`
              : reason === "out_of_bounds"
                ? `out_of_bounds: ${n} samples outside retention or too far in the future`
                : `${reason}: ${n} samples`,
          );
        }
      }
      return result;
    },
  };
}

/** How long a known VM is trusted without re-reading the inventory, ms. */
export const VM_CACHE_TTL_MS = 10_000;

/** A series that passed validation: its stored labels, its VM, and which derivation it feeds. */
interface Resolved {
  readonly labels: Labels;
  readonly vm: string;
  readonly feeds: "cpuSeconds" | "vcpus" | "memTotal" | "memFree" | undefined;
}

const feeds: Readonly<Record<string, Resolved["feeds"]>> = {
  svc_vm_cpu_seconds_total: "cpuSeconds",
  svc_vm_vcpus: "vcpus",
  svc_vm_memory_total_bytes: "memTotal",
  svc_vm_memory_free_bytes: "memFree",
};

function seriesKey(source: Source, labels: readonly Label[]): string {
  let k = source;
  for (const l of labels) k += `\u0001${l.name}\u0000${l.value}`;
  return k;
}

/** Validates a series (catalog, writer, VM, labels); a refusal is "reason\0why". */
function resolveSeries(ts: TimeSeries, source: Source, vms: ReadonlyMap<string, VmInfo>): Resolved | string {
  const name = ts.labels.find((l) => l.name === "__name__")?.value ?? "";
  const spec = seriesCatalog[name];
  if (!spec) return `unknown_metric\u0000"${name.slice(0, 100)}" is not a svc VM metric`;
  if (spec.writers === "derived") return `derived_series\u0000${name} is computed by svc`;
  if (!spec.writers.includes(source)) {
    return `not_permitted\u0000${name} is written by ${spec.writers.join(" or ")}, not ${source}`;
  }
  const vm = ts.labels.find((l) => l.name === "vm")?.value ?? "";
  const info = vms.get(vm);
  if (!info) {
    const reason = tryParseVm(vm) ? "unknown_vm" : "bad_labels";
    return `${reason}\u0000${vm ? `vm "${vm.slice(0, 200)}" is not a known VM` : "no vm label"}`;
  }
  const labels = buildLabels(ts.labels, spec.labels, info.ref, source);
  if (typeof labels === "string") return `bad_labels\u0000${name}: ${labels}`;
  return { labels, vm, feeds: feeds[name] };
}

function refusalOf(result: IngestResult, reason: IngestRefusal): { series: number; samples: number } {
  let r = result.refused[reason];
  if (!r) {
    r = { series: 0, samples: 0 };
    result.refused[reason] = r;
  }
  return r;
}

function tryParseVm(name: string): VmRef | undefined {
  try {
    return parseVmName(name, "vm");
  } catch {
    return undefined;
  }
}

/** The stored label set, or why the client's labels are refused. */
function buildLabels(
  client: readonly Label[],
  allowed: readonly string[],
  vm: VmRef,
  source: Source,
): Labels | string {
  const out: Label[] = [];
  const seen = new Set<string>();
  for (const l of client) {
    if (seen.has(l.name)) return `label ${l.name} appears twice`;
    seen.add(l.name);
    if (l.name === "__name__" || l.name === "vm") continue;
    // Collectors may repeat the VM's own labels; they must agree with the inventory.
    if (l.name === "vm_id" || l.name === "location") {
      const want = l.name === "vm_id" ? vm.vmId : vm.location;
      if (l.value !== want) return `label ${l.name}="${l.value.slice(0, 60)}" contradicts the VM (${want})`;
      continue;
    }
    if (!LABEL_NAME.test(l.name)) return `label name "${l.name.slice(0, 60)}" is invalid`;
    if (!allowed.includes(l.name)) {
      return `label ${l.name} is not carried by this metric (allowed: ${allowed.join(", ") || "none"})`;
    }
    if (l.value.length > 256) return `label ${l.name} is longer than 256 bytes`;
    if (l.value !== "") out.push({ name: l.name, value: l.value });
  }
  for (const need of allowed) if (!seen.has(need) && need !== "fstype") return `label ${need} is required`;
  const name = client.find((l) => l.name === "__name__")!.value;
  return sortLabels([...out, ...vmLabels(name, vm, source)]);
}

function vmLabels(name: string, vm: VmRef, source: Source): Label[] {
  return [
    { name: "__name__", value: name },
    { name: "location", value: vm.location },
    { name: "project_id", value: vm.projectId },
    { name: "source", value: source },
    { name: "vm", value: vmName(vm) },
    { name: "vm_id", value: vm.vmId },
  ];
}

function sortLabels(ls: Label[]): Labels {
  return ls.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Appends derived points; returns how many the appender took (so client counts exclude them). */
function appendDerived(
  app: ReturnType<Storage["appender"]>,
  name: string,
  vm: VmRef,
  source: Source,
  points: readonly Point[],
): number {
  if (points.length === 0) return 0;
  const labels = sortLabels(vmLabels(name, vm, source));
  let n = 0;
  for (const p of points) if (app.append(labels, p.t, p.stale ? staleNaN() : p.v)) n++;
  return n;
}

/** A one-line summary for a 400 body: which refusals, how many, examples. */
export function describeRefusals(r: IngestResult): string {
  const parts = Object.entries(r.refused).map(
    ([reason, n]) => `${reason}: ${n.series ? `${n.series} series, ` : ""}${n.samples} samples`,
  );
  return `accepted ${r.acceptedSamples} samples; refused ${parts.join("; ")}. Examples: ${r.examples.join(" | ")}`;
}
