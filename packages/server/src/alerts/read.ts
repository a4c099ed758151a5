import type { Db } from "../db/database.ts";
import type { MetricsBackend } from "../metrics/backend.ts";
import { regexQuote } from "../metrics/latest.ts";
import type { LabelMatcher, SeriesData } from "../storage/interface.ts";
import { type RuleMetric, SUPPORTED_FSTYPES, storedSeries } from "./catalog.ts";
import type { InstanceSeries, VmTimeline } from "./condition.ts";

/** One instance's key: the VM name, and the mountpoint for filesystem rules. */
export function instanceKey(vmName: string, mountpoint: string): string {
  return mountpoint ? `${vmName}#${mountpoint}` : vmName;
}

export interface InstanceData {
  readonly vmName: string;
  readonly mountpoint: string;
  readonly series: InstanceSeries;
}

/** Sources in the order a rule prefers them when a VM reports a metric from both. */
const SOURCE_PRIORITY = ["hypervisor", "guest_agent"];

/**
 * Reads what one rule needs for [fromMs, toMs] in ONE store read for all its VMs (a `vm=~` matcher
 * when the rule names VMs), and turns it into each instance's values (catalog.ts says how). VMs
 * without samples are absent from the map; the caller decides they have no data.
 */
export async function readRuleData(
  metrics: MetricsBackend,
  projectId: string,
  metric: RuleMetric,
  vmNames: readonly string[] | undefined,
  fromMs: number,
  toMs: number,
): Promise<Map<string, InstanceData>> {
  if (storedSeries(metric).length === 0 || vmNames?.length === 0) return new Map();
  const data = await selectSeries(metrics, projectId, [metric], vmNames, fromMs, toMs);
  return ruleData(metric, indexSeries(data), vmNames && new Set(vmNames), fromMs, toMs);
}

/**
 * One store read of what several rules of a project need: every stored name of `metrics`, of the
 * VMs named (all when undefined), over [fromMs, toMs]. `ruleData` then cuts out each rule's share.
 * A filesystem rule's fstype matcher is applied there when other metrics share the read.
 */
export function selectSeries(
  store: MetricsBackend,
  projectId: string,
  metrics: readonly RuleMetric[],
  vmNames: readonly string[] | undefined,
  fromMs: number,
  toMs: number,
): Promise<SeriesData[]> {
  const names = [...new Set(metrics.flatMap(storedSeries))];
  const matchers: LabelMatcher[] = [{ type: "=~", name: "__name__", value: names.map(regexQuote).join("|") }];
  if (vmNames) matchers.push({ type: "=~", name: "vm", value: vmNames.map(regexQuote).join("|") });
  if (metrics.every((m) => m.perMountpoint))
    matchers.push({ type: "=~", name: "fstype", value: SUPPORTED_FSTYPES.join("|") });
  return store.select(projectId, matchers, fromMs, toMs, { labels: READ_LABELS });
}

/** The labels indexSeries looks at: the store builds no others for the evaluator's reads. */
const READ_LABELS: readonly string[] = ["__name__", "vm", "mountpoint", "source", "fstype"];

const SUPPORTED = new Set(SUPPORTED_FSTYPES);

/** A read's series with the labels the rules look at, by stored name (built once per read). */
export type SeriesIndex = ReadonlyMap<string, readonly IndexedSeries[]>;

interface IndexedSeries {
  readonly s: SeriesData;
  readonly vm: string;
  readonly mountpoint: string;
  readonly source: string;
  readonly supportedFs: boolean;
}

export function indexSeries(data: readonly SeriesData[]): SeriesIndex {
  const out = new Map<string, IndexedSeries[]>();
  for (const s of data) {
    let name = "";
    let vm = "";
    let mountpoint = "";
    let source = "";
    let fstype = "";
    for (const l of s.labels) {
      if (l.name === "__name__") name = l.value;
      else if (l.name === "vm") vm = l.value;
      else if (l.name === "mountpoint") mountpoint = l.value;
      else if (l.name === "source") source = l.value;
      else if (l.name === "fstype") fstype = l.value;
    }
    if (!vm) continue;
    const e = { s, vm, mountpoint, source, supportedFs: SUPPORTED.has(fstype) };
    const list = out.get(name);
    if (list) list.push(e);
    else out.set(name, [e]);
  }
  return out;
}

/**
 * One rule's instances from a read that may hold more (other metrics, other VMs, a longer window):
 * the series of the rule's stored names (and supported filesystems), of `vms` (all when undefined),
 * samples in [fromMs, toMs], exactly what the rule's own read would have returned.
 */
export function ruleData(
  metric: RuleMetric,
  index: SeriesIndex,
  vms: ReadonlySet<string> | undefined,
  fromMs: number,
  toMs: number,
): Map<string, InstanceData> {
  const out = new Map<string, InstanceData>();
  // instance → its sources, each with its series (cut to the rule's window)
  const grouped = new Map<
    string,
    { vm: string; mountpoint: string; sources: { source: string; list: Span[] }[] }
  >();
  for (const name of storedSeries(metric)) {
    for (const e of index.get(name) ?? []) {
      if (vms && !vms.has(e.vm)) continue;
      if (metric.perMountpoint && !e.supportedFs) continue;
      // A series without samples in the rule's own window is one its own read would not have returned.
      const t = e.s.timestamps;
      const a = firstIndex(t, fromMs, false, 0);
      const b = firstIndex(t, toMs, true, a);
      if (a === b) continue;
      const mountpoint = metric.perMountpoint ? e.mountpoint : "";
      const key = instanceKey(e.vm, mountpoint);
      let g = grouped.get(key);
      if (!g) {
        g = { vm: e.vm, mountpoint, sources: [] };
        grouped.set(key, g);
      }
      let src = g.sources.find((x) => x.source === e.source);
      if (!src) {
        src = { source: e.source, list: [] };
        g.sources.push(src);
      }
      src.list.push({ s: e.s, name, a, b });
    }
  }
  for (const [key, g] of grouped) {
    const src =
      g.sources.length === 1
        ? g.sources[0]
        : (SOURCE_PRIORITY.map((p) => g.sources.find((x) => x.source === p)).find((x) => x) ??
          [...g.sources].sort((x, y) => (x.source < y.source ? -1 : x.source > y.source ? 1 : 0))[0]);
    const series = derive(metric, src.list);
    if (series.t.length > 0) out.set(key, { vmName: g.vm, mountpoint: g.mountpoint, series });
  }
  return out;
}

/**
 * Index of the first timestamp in t[from…] (ascending) at or after ms (`after`: strictly after),
 * t.length when none: a binary search (a forecast's read holds hours a short rule cuts minutes from).
 */
function firstIndex(t: Float64Array, ms: number, after: boolean, from: number): number {
  let lo = from;
  let hi = t.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (t[mid] < ms || (after && t[mid] === ms)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A series' samples [a, b) and its stored name. */
interface Span {
  readonly s: SeriesData;
  readonly name: string;
  readonly a: number;
  readonly b: number;
}

/**
 * Arrays of at most n numbers, filled by index and cut to length after: sized once, where `push`
 * would grow them a few times (for the forecast's 6 h of samples, half of a cycle's allocation).
 */
function sized(n: number): number[] {
  return new Array<number>(n);
}

/** Finite samples only: staleness markers and NaN are not values. */
function finite(sp: Span): { t: number[]; v: number[] } {
  const t = sized(sp.b - sp.a);
  const v = sized(sp.b - sp.a);
  let m = 0;
  const { timestamps, values } = sp.s;
  for (let i = sp.a; i < sp.b; i++) {
    const x = values[i];
    if (Number.isFinite(x)) {
      t[m] = timestamps[i];
      v[m] = x;
      m++;
    }
  }
  t.length = m;
  v.length = m;
  return { t, v };
}

function derive(metric: RuleMetric, list: readonly Span[]): InstanceSeries {
  switch (metric.kind) {
    case "gauge":
    case "telemetry_age":
      // One series per instance is expected; with several (e.g. two devices on one mountpoint) the
      // largest value at each time counts, so a breach of any of them is seen.
      return combine(list.map(finite), Math.max);
    case "ratio": {
      const single = singleRatio(metric, list);
      if (single) return single;
      const num = combine(list.filter((s) => s.name === metric.num).map(finite), Math.max);
      const den = combine(list.filter((s) => s.name === metric.den).map(finite), Math.max);
      const avail = metric.avail
        ? combine(list.filter((s) => s.name === metric.avail).map(finite), Math.max)
        : { t: [], v: [] };
      const t: number[] = [];
      const v: number[] = [];
      let j = 0;
      let k = 0;
      for (let i = 0; i < num.t.length; i++) {
        while (j < den.t.length && den.t[j] < num.t[i]) j++;
        while (k < avail.t.length && avail.t[k] < num.t[i]) k++;
        // Only readings taken together make a ratio; a missing side is no sample, never 0. df's
        // used ÷ (used + available) when the agent sent available bytes, used ÷ size when not.
        const d =
          k < avail.t.length && avail.t[k] === num.t[i]
            ? num.v[i] + avail.v[k]
            : j < den.t.length && den.t[j] === num.t[i]
              ? den.v[j]
              : 0;
        if (d > 0) {
          t.push(num.t[i]);
          v.push((100 * num.v[i]) / d);
        }
      }
      return { t, v };
    }
    case "rate":
      return combine(
        list.map((s) => perSecondIncrease(finite(s))),
        (a, b) => a + b,
      );
    case "unexpected_stop":
      return { t: [], v: [] };
  }
}

/**
 * The ratio of one series per side (the usual case) straight from the read's arrays: the same
 * samples and arithmetic as `finite` on each side and the merge in `derive`, without the copies.
 * Undefined when a side has several series (combined first, in `derive`).
 */
function singleRatio(
  metric: Extract<RuleMetric, { kind: "ratio" }>,
  list: readonly Span[],
): InstanceSeries | undefined {
  let num: Span | undefined;
  let den: Span | undefined;
  let avail: Span | undefined;
  for (const sp of list) {
    if (sp.name === metric.num) {
      if (num) return undefined;
      num = sp;
    } else if (sp.name === metric.den) {
      if (den) return undefined;
      den = sp;
    } else if (sp.name === metric.avail) {
      if (avail) return undefined;
      avail = sp;
    }
  }
  if (!num) return { t: [], v: [] };
  const t = sized(num.b - num.a);
  const v = sized(num.b - num.a);
  let m = 0;
  const nt = num.s.timestamps;
  const nv = num.s.values;
  const dt = den?.s.timestamps;
  const dv = den?.s.values;
  const at = avail?.s.timestamps;
  const av = avail?.s.values;
  let j = den?.a ?? 0;
  const jEnd = den?.b ?? 0;
  let k = avail?.a ?? 0;
  const kEnd = avail?.b ?? 0;
  for (let i = num.a; i < num.b; i++) {
    const x = nv[i];
    if (!Number.isFinite(x)) continue;
    const ts = nt[i];
    // Each cursor stops at its side's first finite sample at or after ts, as on `finite`'s copy.
    if (dt && dv) while (j < jEnd && (!Number.isFinite(dv[j]) || dt[j] < ts)) j++;
    if (at && av) while (k < kEnd && (!Number.isFinite(av[k]) || at[k] < ts)) k++;
    const d =
      at && av && k < kEnd && at[k] === ts ? x + av[k] : dt && dv && j < jEnd && dt[j] === ts ? dv[j] : 0;
    if (d > 0) {
      t[m] = ts;
      v[m] = (100 * x) / d;
      m++;
    }
  }
  t.length = m;
  v.length = m;
  return { t, v };
}

/** Per-second increase between consecutive counter samples; a reset counts the new value as the increase. */
function perSecondIncrease(s: { t: number[]; v: number[] }): InstanceSeries {
  const n = Math.max(0, s.t.length - 1);
  const t = sized(n);
  const v = sized(n);
  let m = 0;
  for (let i = 1; i < s.t.length; i++) {
    const dt = (s.t[i] - s.t[i - 1]) / 1000;
    if (dt <= 0) continue;
    const inc = s.v[i] >= s.v[i - 1] ? s.v[i] - s.v[i - 1] : s.v[i];
    t[m] = s.t[i];
    v[m] = inc / dt;
    m++;
  }
  t.length = m;
  v.length = m;
  return { t, v };
}

/** Merges series on equal timestamps with `fn` (the only series is returned as is). */
function combine(list: readonly InstanceSeries[], fn: (a: number, b: number) => number): InstanceSeries {
  if (list.length === 1) return list[0];
  const byTime = new Map<number, number>();
  for (const s of list) {
    for (let i = 0; i < s.t.length; i++) {
      const prev = byTime.get(s.t[i]);
      byTime.set(s.t[i], prev === undefined ? s.v[i] : fn(prev, s.v[i]));
    }
  }
  const t = [...byTime.keys()].sort((a, b) => a - b);
  return { t, v: t.map((x) => byTime.get(x) as number) };
}

export interface ProjectVm {
  readonly name: string;
  readonly state: string;
  readonly createTime: number;
}

export interface StateEventRow {
  readonly vm_id: string;
  readonly state: string;
  readonly stop_reason: string;
  readonly time: number;
}

export interface MaintenanceRow {
  readonly vm_ids: string;
  readonly start_time: number;
  readonly end_time: number;
}

/** The VM timelines of a project (state events and maintenance windows), for inventory rules. */
export async function readTimelines(
  db: Db,
  projectId: string,
  vms: readonly ProjectVm[],
  toMs: number,
): Promise<Map<string, VmTimeline>> {
  const [events, windows] = await Promise.all([
    db
      .selectFrom("vm_state_events")
      .select(["vm_id", "state", "stop_reason", "time"])
      .where("project_id", "=", projectId)
      .where("time", "<=", toMs)
      .orderBy("time")
      .orderBy("id")
      .execute(),
    db
      .selectFrom("maintenance_windows")
      .select(["vm_ids", "start_time", "end_time"])
      .where("project_id", "=", projectId)
      .execute(),
  ]);
  return timelinesOf(vms, events, windows);
}

/** The timelines of `vms` from their project's state events (time ascending) and maintenance windows. */
export function timelinesOf(
  vms: readonly ProjectVm[],
  events: readonly StateEventRow[],
  windows: readonly MaintenanceRow[],
): Map<string, VmTimeline> {
  const out = new Map<string, VmTimeline>();
  const byId = new Map<string, { time: number; state: string; stopReason: string }[]>();
  for (const e of events) {
    let list = byId.get(e.vm_id);
    if (!list) {
      list = [];
      byId.set(e.vm_id, list);
    }
    list.push({ time: e.time, state: e.state, stopReason: e.stop_reason });
  }
  const maintenance = new Map<string, { start: number; end: number }[]>();
  for (const w of windows) {
    for (const vm of JSON.parse(w.vm_ids) as string[]) {
      let list = maintenance.get(vm);
      if (!list) {
        list = [];
        maintenance.set(vm, list);
      }
      list.push({ start: w.start_time, end: w.end_time });
    }
  }
  for (const vm of vms) {
    const vmId = vm.name.slice(vm.name.lastIndexOf("/") + 1);
    const ev = byId.get(vmId) ?? [];
    out.set(vm.name, {
      events: ev,
      // A VM with recorded events was running before the first of them (it was created running or
      // its first event says otherwise from then on); without events, its current state stands.
      initialState: ev.length > 0 ? "RUNNING" : vm.state,
      initialStopReason: "",
      maintenance: maintenance.get(vm.name) ?? [],
    });
  }
  return out;
}
