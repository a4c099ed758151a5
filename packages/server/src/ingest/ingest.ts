import { type CompactWriteRequest, labelsOfKeyBytes } from "@svc/remotewrite";
import type { Db } from "../db/database.ts";
import { parseVmName, type VmRef, vmName } from "../inventory/names.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { type Source, seriesCatalog } from "../metrics/catalog.ts";
import {
  type Appender,
  type AppendRefusal,
  isStaleNaNValue,
  type Label,
  type Labels,
  type Storage,
  staleNaN,
} from "../storage/interface.ts";
import type { IngestPrincipal } from "./credentials.ts";
import type { KeyNumbers } from "./decode/pool.ts";
import {
  derive,
  MAX_DERIVE_INTERVAL_MS,
  type Point,
  type UtilizationRefusal,
  type VmDeriveState,
} from "./derive.ts";
import type { IngestMetrics } from "./instrumentation.ts";
import { dataView, SeriesCache } from "./series-cache.ts";

/** Why ingest refused series or samples; a 400 names each with its counts. */
export type IngestRefusal =
  | AppendRefusal
  | "unknown_vm" // the `vm` label names no live VM of the inventory
  | "unknown_metric" // a name outside the catalog
  | "bad_labels" // missing/invalid `vm`, or a label the metric does not carry
  | "not_permitted" // the writer may not write this VM or this metric
  | "derived_series" // a series svc computes itself
  | "too_many_series"; // more devices of one kind from one VM than svc keeps (guest-map.ts)

export interface IngestResult {
  acceptedSamples: number;
  /** Per reason: refused series and samples. */
  refused: Partial<Record<IngestRefusal, { series: number; samples: number }>>;
  /** Up to five concrete examples, for the error message (no values, no secrets). */
  examples: string[];
}

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export interface Ingester {
  /**
   * Validates, stores and derives; resolves once everything kept is durable in the WAL. `keys`, from a
   * decode worker, numbers the request's label keys: a series seen before under its number is found by
   * an array index instead of its key's hash and bytes.
   */
  ingest(principal: IngestPrincipal, req: CompactWriteRequest, keys?: KeyNumbers): Promise<IngestResult>;
}

interface VmInfo {
  readonly ref: VmRef;
  readonly vcpus: number;
}

/** Per source (0 hypervisor, 1 guest agent) of one VM: the derived series' labels and derive state. */
interface VmSourceSlot {
  readonly vm: VmSlot;
  readonly state: VmDeriveState;
  /** Labels of svc_vm_cpu_utilization_pct, svc_vm_memory_used_bytes, svc_vm_last_observation_timestamp_seconds. */
  readonly derivedLabels: readonly [Labels, Labels, Labels];
  /** The store's refs for derivedLabels (Appender.appendRef), -1 until known. */
  readonly derivedRefs: [number, number, number];
  /** Request that last filled `batch` (batches are filled and derived within one synchronous section). */
  mark: number;
  readonly batch: {
    cpuSeconds: Point[];
    vcpus: Point[];
    memTotal: Point[];
    memFree: Point[];
    newestT: number;
  };
}

/** What ingest keeps per known VM, by VM name. */
interface VmSlot {
  readonly name: string;
  /** From the inventory, read at `at` (ms); undefined once a re-read no longer finds the VM. */
  info: VmInfo | undefined;
  at: number;
  readonly sources: [VmSourceSlot | undefined, VmSourceSlot | undefined];
}

/**
 * The write path: validate each series against the catalog and the inventory, add the tenant and VM
 * labels, append the valid samples and the derived series, commit (durable in the WAL before the
 * promise resolves). Invalid series are refused and counted; the valid rest of the batch is kept.
 */
export function createIngester(deps: {
  db: Db;
  storage: Storage;
  metrics?: IngestMetrics;
  /** Reads a VM's previous CPU counter sample back from the store (docs/ingest.md); absent: memory only. */
  readBack?: Pick<MetricsBackend, "select">;
}): Ingester {
  const state = new Map<string, VmDeriveState>();

  // Known VMs, re-read at most every VM_CACHE_TTL_MS: a collector sends every VM every 30 s, and one
  // SQLite query per request was a fifth of ingest CPU. Unknown VMs are never cached, so a VM created
  // a moment ago is accepted at once; a deleted one is refused within the TTL.
  const vmSlots = new Map<string, VmSlot>();

  /** Reads the named VMs from the inventory into their slots (created for VMs found). */
  async function refreshVms(names: Set<string>, now: number): Promise<void> {
    const byProject = new Map<string, string[]>();
    for (const name of names) {
      const ref = tryParseVm(name);
      if (!ref) continue;
      byProject.set(ref.projectId, [...(byProject.get(ref.projectId) ?? []), ref.vmId]);
    }
    const found = new Set<string>();
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
        const name = vmName(ref);
        let slot = vmSlots.get(name);
        if (!slot) {
          slot = { name, info: undefined, at: 0, sources: [undefined, undefined] };
          vmSlots.set(name, slot);
        }
        slot.info = { ref, vcpus: r.vcpus };
        slot.at = now;
        found.add(name);
      }
    }
    // Only now, so concurrent requests keep using the previous answer while the queries run.
    for (const name of names) {
      const slot = vmSlots.get(name);
      if (slot && !found.has(name)) slot.info = undefined;
    }
  }

  /**
   * The previous CPU counter sample of each VM in the request whose derive state does not hold the one
   * just before it (this replica restarted, or the writer came from another replica), read back from
   * the store, so its first utilization point is not lost (issue 48). Once per VM and move: the state
   * holds it afterwards.
   */
  async function readBackPrevious(req: CompactWriteRequest, known: Known, src: 0 | 1): Promise<void> {
    const readBack = deps.readBack;
    if (!readBack) return;
    const wanted = new Map<VmSourceSlot, number>();
    for (let i = 0; i < req.seriesCount; i++) {
      let ss: VmSourceSlot | undefined;
      const hit = known.hits[i];
      if (hit) {
        if (hit.sink === hit.ss.batch.cpuSeconds) ss = hit.ss;
      } else {
        const labels = known.misses?.[i];
        if (labels?.some((l) => l.name === "__name__" && l.value === CPU_SECONDS)) {
          const slot = vmSlots.get(labels.find((l) => l.name === "vm")?.value ?? "");
          if (slot?.info) ss = sourceSlot(slot, src);
        }
      }
      if (!ss) continue;
      let minT = Number.POSITIVE_INFINITY;
      for (let k = req.sampleStart[i]; k < req.sampleStart[i + 1]; k++)
        minT = Math.min(minT, req.timestampsMs[k]);
      const last = ss.state.lastCpu;
      if (last && (last.t >= minT || !skipped(ss.state, minT - last.t))) continue;
      wanted.set(ss, Math.min(minT, wanted.get(ss) ?? minT));
    }
    await Promise.all(
      [...wanted].map(async ([ss, minT]) => {
        const ref = ss.vm.info?.ref;
        if (!ref) return;
        let newest: { t: number; v: number } | undefined;
        try {
          const series = await readBack.select(
            ref.projectId,
            [
              { type: "=", name: "__name__", value: CPU_SECONDS },
              { type: "=", name: "vm", value: ss.vm.name },
              { type: "=", name: "source", value: SOURCES[src] },
            ],
            minT - MAX_DERIVE_INTERVAL_MS,
            minT - 1,
            // Ingest's own read, not a query of the tenant's: not in its query CPU.
            { charge: false },
          );
          for (const sd of series) {
            const i = sd.timestamps.length - 1;
            if (i < 0 || (newest && sd.timestamps[i] <= newest.t)) continue;
            newest = { t: sd.timestamps[i], v: sd.values[i] };
          }
        } catch {
          // The store unavailable: the utilization starts a sample later, as without the read.
          return;
        }
        // A staleness marker ends the series: nothing to derive from. A newer state (another request
        // derived meanwhile) wins.
        if (!newest || Number.isNaN(newest.v)) return;
        const last = ss.state.lastCpu;
        if (!last || last.t < newest.t) ss.state.lastCpu = newest;
      }),
    );
  }

  const fresh = (slot: VmSlot | undefined, now: number): boolean =>
    slot?.info !== undefined && now - slot.at < VM_CACHE_TTL_MS;

  function sourceSlot(slot: VmSlot, src: 0 | 1): VmSourceSlot {
    let s = slot.sources[src];
    if (!s) {
      const source = SOURCES[src];
      const key = `${slot.name}|${source}`;
      let st = state.get(key);
      if (!st) {
        st = {};
        state.set(key, st);
      }
      const ref = slot.info!.ref;
      const lab = (name: string) => sortLabels(vmLabels(name, ref, source));
      s = {
        vm: slot,
        state: st,
        derivedLabels: [
          lab("svc_vm_cpu_utilization_pct"),
          lab("svc_vm_memory_used_bytes"),
          lab("svc_vm_last_observation_timestamp_seconds"),
        ],
        derivedRefs: [-1, -1, -1],
        mark: 0,
        batch: { cpuSeconds: [], vcpus: [], memTotal: [], memFree: [], newestT: Number.NEGATIVE_INFINITY },
      };
      slot.sources[src] = s;
    }
    return s;
  }

  // Validated label sets by the labels as sent (their wire bytes), per source: the same series
  // arrives every interval, and decoding, checking and sorting its labels again each time was most
  // of the ingest path's own CPU.
  const seriesCaches = [new SeriesCache<Resolved>(), new SeriesCache<Resolved>()] as const;
  let requests = 0;
  // The same resolutions by a decode worker's key numbers, per worker numbering and source; dropped
  // (generation bumped) whenever the caches above are cleared, as their entries point at the same slots.
  const numbered = new WeakMap<object, { gen: number; byId: [ById, ById] }>();
  let generation = 0;
  function byIdOf(keys: KeyNumbers, src: 0 | 1): ById {
    let s = numbered.get(keys.space);
    if (!s || s.gen !== generation) {
      s = { gen: generation, byId: [[], []] };
      numbered.set(keys.space, s);
    }
    return s.byId[src];
  }

  /**
   * Validates, appends and derives one request, synchronously (per-VM batches are filled and derived
   * without interleaving); returns the appender to commit and what is already known of the result.
   */
  function stage(principal: IngestPrincipal, req: CompactWriteRequest, known: Known): Staged {
    const result: IngestResult = { acceptedSamples: 0, refused: {}, examples: [] };
    const { sampleStart, timestampsMs, values } = req;
    const refuse = (reason: IngestRefusal, i: number, why: string) => {
      const r = refusalOf(result, reason);
      r.series++;
      r.samples += sampleStart[i + 1] - sampleStart[i];
      if (result.examples.length < 5) result.examples.push(`${reason}: ${why}`);
    };
    const src = principal.kind === "collector" ? 0 : 1;
    const source = SOURCES[src];
    const cache = seriesCaches[src];
    const { hits, misses, byId, ids } = known;
    const n = req.seriesCount;
    const mark = ++requests;
    const app = deps.storage.appender();
    const touched: VmSourceSlot[] = [];
    const agentVm = principal.kind === "agent" ? vmName(principal.vm) : undefined;
    for (let i = 0; i < n; i++) {
      let resolved = hits[i];
      if (resolved === undefined) {
        const r = resolveSeries(misses![i]!, source, vmSlots, (slot) => sourceSlot(slot, src));
        if (typeof r === "string") {
          const [reason, why] = r.split("\u0000") as [IngestRefusal, string];
          refuse(reason, i, why);
          continue;
        }
        resolved = r;
        cache.set(req.labelHashes[i], req.labelBytes, req.labelKeyStart[i], req.labelKeyEnd[i], r);
        if (byId) setById(byId, ids![i], r);
      }
      const info = resolved.slot.info;
      if (!info) {
        refuse("unknown_vm", i, `vm "${resolved.vm.slice(0, 200)}" is not a known VM`);
        continue;
      }
      if (agentVm !== undefined && agentVm !== resolved.vm) {
        refuse("not_permitted", i, "a guest agent writes only its own VM");
        continue;
      }
      const ss = resolved.ss;
      const batch = ss.batch;
      if (ss.mark !== mark) {
        ss.mark = mark;
        batch.cpuSeconds.length = 0;
        batch.vcpus.length = 0;
        batch.memTotal.length = 0;
        batch.memFree.length = 0;
        batch.newestT = Number.NEGATIVE_INFINITY;
        touched.push(ss);
      }
      const sink = resolved.sink;
      for (let k = sampleStart[i]; k < sampleStart[i + 1]; k++) {
        // Values go to the appender untouched (read from the Float64Array, never through
        // arithmetic) so a staleness marker keeps its bits.
        const t = timestampsMs[k];
        const v = values[k];
        const ref = appendRef(app, resolved.ref, resolved.labels, t, v);
        if (ref < 0) continue;
        resolved.ref = ref;
        if (t > batch.newestT) batch.newestT = t;
        sink?.push({ t, v, stale: isStaleNaNValue(v) });
      }
    }

    let derivedSamples = 0;
    const refusedUtilization: UtilizationRefusal[] = [];
    for (const ss of touched) {
      const batch = ss.batch;
      const d = derive(batch, ss.state, ss.vm.info!.vcpus);
      for (const r of d.refusedUtilization) refusedUtilization.push(r.reason);
      derivedSamples +=
        appendDerived(app, ss, 0, d.cpuUtilizationPct) +
        appendDerived(app, ss, 1, d.memoryUsedBytes) +
        appendDerived(app, ss, 2, d.lastObservation);
      // Emptied now, not when the VM's next request comes (30 s later): its points die young
      // instead of being promoted and kept until a full collection.
      batch.cpuSeconds.length = 0;
      batch.vcpus.length = 0;
      batch.memTotal.length = 0;
      batch.memFree.length = 0;
    }
    return { app, result, derivedSamples, refusedUtilization, src, series: n, samples: req.sampleCount };
  }

  /** Commits a staged request (durable in the WAL) and completes its result. */
  async function commitStaged(s: Staged): Promise<IngestResult> {
    const { result, derivedSamples, src } = s;
    const committed = await s.app.commit();
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
    const m = deps.metrics;
    if (m) {
      // Once per request, not per sample: the hot path stays free of metric updates.
      let refusedSeries = 0;
      for (const [reason, r] of Object.entries(result.refused)) {
        if (r.samples) m.refusedSamples.inc({ reason }, r.samples);
        if (r.series) m.refusedSeries.inc({ reason }, r.series);
        refusedSeries += r.series;
      }
      m.acceptedSeries.inc({ source: PRINCIPAL_KINDS[src] }, s.series - refusedSeries);
      m.acceptedSamples.inc({ source: PRINCIPAL_KINDS[src] }, result.acceptedSamples);
      m.derivedSamples.inc(derivedSamples);
      for (const reason of s.refusedUtilization) m.refusedUtilization.inc({ reason });
      m.batchSamples.observe(s.samples);
    }
    return result;
  }

  /** Each series' cached resolution, or its decoded labels; and the VMs to read from the inventory. */
  function lookUp(
    req: CompactWriteRequest,
    src: 0 | 1,
    now: number,
    keys: KeyNumbers | undefined,
  ): Known & { lookup?: Set<string> } {
    const cache = seriesCaches[src];
    const n = req.seriesCount;
    const hits = new Array<Resolved | undefined>(n);
    let misses: (Label[] | undefined)[] | undefined;
    let lookup: Set<string> | undefined;
    const { labelBytes, labelKeyStart, labelKeyEnd, labelHashes } = req;
    const view = dataView(labelBytes);
    const byId = keys && byIdOf(keys, src);
    const ids = keys?.ids;
    for (let i = 0; i < n; i++) {
      let hit = byId ? byId[ids![i]] : undefined;
      if (hit === undefined) {
        hit = cache.get(labelHashes[i], labelBytes, view, labelKeyStart[i], labelKeyEnd[i]);
        if (hit !== undefined && byId) setById(byId, ids![i], hit);
      }
      let vm: string | undefined;
      if (hit !== undefined) {
        hits[i] = hit;
        if (!fresh(hit.slot, now)) vm = hit.vm;
      } else {
        const labels = labelsOfKeyBytes(labelBytes, labelKeyStart[i], labelKeyEnd[i]);
        misses ??= new Array(n);
        misses[i] = labels;
        vm = labels.find((l) => l.name === "vm")?.value;
        if (vm !== undefined && fresh(vmSlots.get(vm), now)) vm = undefined;
      }
      if (vm) {
        lookup ??= new Set();
        lookup.add(vm);
      }
    }
    return { hits, misses, lookup, byId, ids };
  }

  return {
    async ingest(principal, req, keys) {
      const src = principal.kind === "collector" ? 0 : 1;
      if (vmSlots.size > 200_000) {
        // Cached series point at their VM's slot: both go together.
        vmSlots.clear();
        for (const c of seriesCaches) c.clear();
        generation++;
      }
      const now = Date.now();
      let known = lookUp(req, src, now, keys);
      if (known.lookup) await refreshVms(known.lookup, now);
      await readBackPrevious(req, known, src);
      if (seriesCaches[src].size > 1_000_000) {
        seriesCaches[src].clear();
        generation++;
        // This request's numbers point into the table just dropped.
        if (known.byId) known = { ...known, byId: keys && byIdOf(keys, src) };
      }
      // Staged synchronously, committed by another function: while the commit waits for the WAL, this
      // frame holds nothing, so the decoded request (its label keys and columns) dies young instead
      // of being promoted and kept until a full collection.
      return commitStaged(stage(principal, req, known));
    },
  };
}

/** What lookUp found per series: the cached resolution, else the labels as sent. */
interface Known {
  readonly hits: (Resolved | undefined)[];
  readonly misses: (Label[] | undefined)[] | undefined;
  /** Resolutions by the decode worker's key numbers (`ids`), when the request came with them. */
  readonly byId?: ById;
  readonly ids?: Uint32Array;
}

type ById = (Resolved | undefined)[];

/** byId[id] = r, the array grown densely (a far index would turn it into a slow dictionary). */
function setById(byId: ById, id: number, r: Resolved): void {
  while (byId.length < id) byId.push(undefined);
  byId[id] = r;
}

/** A request validated and appended, not yet committed. */
interface Staged {
  readonly app: Appender;
  readonly result: IngestResult;
  readonly derivedSamples: number;
  /** CPU utilizations derived but refused as impossible, by reason. */
  readonly refusedUtilization: UtilizationRefusal[];
  readonly src: 0 | 1;
  readonly series: number;
  readonly samples: number;
}

const CPU_SECONDS = "svc_vm_cpu_seconds_total";
/**
 * A VM's previous CPU sample is read back from the store when the derive state's is older than this
 * before the request's (three 30 s collections): a writer sending less often pays one read per batch.
 */
const READ_BACK_AFTER_MS = 90_000;

/**
 * Whether the writer may have sent a CPU sample elsewhere since the state's last one, `gapMs` before the
 * request's: a gap over READ_BACK_AFTER_MS, or over one and a half of its last interval here (it wrote
 * through another replica and came back: without the read its point would average the time away). A
 * steady writer's jitter stays below that; an irregular one pays a read when its interval grows.
 */
function skipped(state: VmDeriveState, gapMs: number): boolean {
  const interval = state.lastCpuIntervalMs;
  return gapMs > READ_BACK_AFTER_MS || (interval !== undefined && gapMs > 1.5 * interval);
}

/** How long a known VM is trusted without re-reading the inventory, ms. */
export const VM_CACHE_TTL_MS = 10_000;

/** A series that passed validation: its stored labels, its VM, and which derivation it feeds. */
interface Resolved {
  /** Where the SeriesCache holds the labels as sent (the CompactWriteRequest label key's bytes). */
  keyAt: number;
  keyLen: number;
  readonly labels: Labels;
  /** The store's handle for `labels` (Appender.appendRef), -1 until known. */
  ref: number;
  readonly vm: string;
  readonly slot: VmSlot;
  /** The VM's per-source slot (caches are per source too). */
  readonly ss: VmSourceSlot;
  /** The derive input this series feeds (an array of ss.batch, emptied per request), if any. */
  readonly sink: Point[] | undefined;
}

type Feed = "cpuSeconds" | "vcpus" | "memTotal" | "memFree";

const SOURCES: readonly [Source, Source] = ["hypervisor", "guest_agent"];
const PRINCIPAL_KINDS = ["collector", "agent"] as const;

const feeds: Readonly<Record<string, Feed | undefined>> = {
  svc_vm_cpu_seconds_total: "cpuSeconds",
  svc_vm_vcpus: "vcpus",
  svc_vm_memory_total_bytes: "memTotal",
  svc_vm_memory_free_bytes: "memFree",
};

/** Validates a series (catalog, writer, VM, labels); a refusal is "reason\0why". */
function resolveSeries(
  client: readonly Label[],
  source: Source,
  vms: ReadonlyMap<string, VmSlot>,
  sourceSlot: (slot: VmSlot) => VmSourceSlot,
): Resolved | string {
  const name = client.find((l) => l.name === "__name__")?.value ?? "";
  const spec = seriesCatalog[name];
  if (!spec) return `unknown_metric\u0000"${name.slice(0, 100)}" is not a svc VM metric`;
  if (spec.writers === "derived") return `derived_series\u0000${name} is computed by svc`;
  if (!spec.writers.includes(source)) {
    return `not_permitted\u0000${name} is written by ${spec.writers.join(" or ")}, not ${source}`;
  }
  const vm = client.find((l) => l.name === "vm")?.value ?? "";
  const slot = vms.get(vm);
  if (!slot?.info) {
    const reason = tryParseVm(vm) ? "unknown_vm" : "bad_labels";
    return `${reason}\u0000${vm ? `vm "${vm.slice(0, 200)}" is not a known VM` : "no vm label"}`;
  }
  const labels = buildLabels(client, spec.labels, slot.info.ref, source);
  if (typeof labels === "string") return `bad_labels\u0000${name}: ${labels}`;
  const ss = sourceSlot(slot);
  const feed = feeds[name];
  return {
    keyAt: 0,
    keyLen: 0,
    labels,
    ref: -1,
    vm,
    slot,
    ss,
    sink: feed === undefined ? undefined : ss.batch[feed],
  };
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
function appendDerived(app: Appender, ss: VmSourceSlot, which: 0 | 1 | 2, points: readonly Point[]): number {
  let n = 0;
  for (const p of points) {
    const v = p.stale ? staleNaN() : p.v;
    const ref = appendRef(app, ss.derivedRefs[which], ss.derivedLabels[which], p.t, v);
    if (ref < 0) continue;
    ss.derivedRefs[which] = ref;
    n++;
  }
  return n;
}

/** The store's series-ref fast path when it has one; returns the ref (>= 0) or -1 when refused. */
function appendRef(app: Appender, ref: number, labels: Labels, t: number, v: number): number {
  if (app.appendRef) return app.appendRef(ref, labels, t, v);
  return app.append(labels, t, v) ? 0 : -1;
}

/** A one-line summary for a 400 body: which refusals, how many, examples. */
export function describeRefusals(r: IngestResult): string {
  const parts = Object.entries(r.refused).map(
    ([reason, n]) => `${reason}: ${n.series ? `${n.series} series, ` : ""}${n.samples} samples`,
  );
  return `accepted ${r.acceptedSamples} samples; refused ${parts.join("; ")}. Examples: ${r.examples.join(" | ")}`;
}
