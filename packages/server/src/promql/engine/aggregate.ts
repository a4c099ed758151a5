/** Aggregation operators (sum, avg, ..., topk, quantile, count_values) with by / without. */
import type { Labels } from "../../storage/interface.ts";
import type { Aggregate } from "../ast.ts";
import { QueryEvalError } from "../errors.ts";
import { formatFloatF, isWellFormed } from "../lex.ts";
import type { Evaluator } from "./evaluator.ts";
import { MeanAccumulator, quantileOf } from "./kahan.ts";
import { keepOnly, keyOn, keyWithout, labelsKey, setLabel, without } from "./labels.ts";
import { newStepSeries, type StepSeries, type Value } from "./types.ts";

interface Group {
  labels: Labels;
  members: StepSeries[];
}

export function evalAggregate(ev: Evaluator, e: Aggregate, ts: Float64Array): Value {
  const n = ts.length;
  let param: Float64Array | null = null;
  let label = "";
  if (e.param) {
    const pv = ev.eval(e.param, ts);
    if (pv.type === "scalar") param = pv.values;
    else if (pv.type === "string") label = pv.value;
    else throw new QueryEvalError("aggregation parameter must be a scalar or string");
  }
  const input = ev.evalVector(e.expr, ts);
  const groups = groupSeries(input, e);
  const out: StepSeries[] = [];
  switch (e.op) {
    case "topk":
    case "bottomk":
      return { type: "vector", series: topk(ev, groups, param!, e.op === "topk", n) };
    case "count_values":
      return { type: "vector", series: countValues(ev, groups, label, e, n) };
    case "quantile":
      for (let i = 0; i < n; i++) {
        const q = param![i];
        if (Number.isNaN(q) || q < 0 || q > 1) {
          ev.ctx.annotations.warn(`quantile value should be between 0 and 1, got ${goFloat(q)}`);
        }
      }
      break;
    case "sum":
    case "count":
    case "group":
    case "min":
    case "max":
      return { type: "vector", series: columnAggregate(ev, groups, e.op, n) };
  }
  // avg, stddev, stdvar and quantile: per step across the group's members.
  const mean = new MeanAccumulator();
  const vals: number[] = [];
  for (const g of groups) {
    ev.tick();
    const o = newStepSeries(
      g.labels,
      n,
      g.members.some((m) => m.dropName),
    );
    let any = false;
    for (let i = 0; i < n; i++) {
      let cnt = 0;
      let acc = 0;
      let m = 0;
      mean.reset();
      vals.length = 0;
      for (const s of g.members) {
        if (!s.present[i]) continue;
        const f = s.values[i];
        cnt++;
        switch (e.op) {
          case "avg":
            mean.add(f);
            break;
          case "stddev":
          case "stdvar":
            if (cnt === 1) {
              m = f;
              acc = Number.isFinite(f) ? 0 : Number.NaN;
            } else {
              const delta = f - m;
              m += delta / cnt;
              acc += delta * (f - m);
            }
            break;
          case "quantile":
            vals.push(f);
            break;
        }
      }
      if (cnt === 0) continue;
      let v: number;
      switch (e.op) {
        case "avg":
          v = mean.value();
          break;
        case "stdvar":
          v = acc / cnt;
          break;
        case "stddev":
          v = Math.sqrt(acc / cnt);
          break;
        default:
          v = quantileOf(param![i], vals);
      }
      o.values[i] = v;
      o.present[i] = 1;
      any = true;
    }
    if (any) out.push(o);
  }
  ev.addSamples(out.length * n);
  return { type: "vector", series: out };
}

/**
 * sum, count, group, min and max walk each member's columns once, accumulating every step in typed
 * arrays (members in input order per step, so Kahan sums are bit-identical to a per-step loop).
 */
function columnAggregate(
  ev: Evaluator,
  groups: Group[],
  op: "sum" | "count" | "group" | "min" | "max",
  n: number,
): StepSeries[] {
  const out: StepSeries[] = [];
  const acc = new Float64Array(n);
  const comp = new Float64Array(n);
  const cnt = new Uint32Array(n);
  for (const g of groups) {
    ev.tick();
    acc.fill(0);
    comp.fill(0);
    cnt.fill(0);
    let dropName = false;
    for (const s of g.members) {
      if (s.dropName) dropName = true;
      const pv = s.present;
      const vv = s.values;
      if (op === "sum") {
        for (let i = 0; i < n; i++) {
          if (pv[i] === 0) continue;
          cnt[i]++;
          // Prometheus' kahanSumInc, inlined.
          const f = vv[i];
          const sum = acc[i];
          const t = sum + f;
          if (!Number.isFinite(t) && !Number.isNaN(t)) comp[i] = 0;
          else if (Math.abs(sum) >= Math.abs(f)) comp[i] += sum - t + f;
          else comp[i] += f - t + sum;
          acc[i] = t;
        }
      } else if (op === "min" || op === "max") {
        const isMax = op === "max";
        for (let i = 0; i < n; i++) {
          if (pv[i] === 0) continue;
          const f = vv[i];
          const a = acc[i];
          if (++cnt[i] === 1 || (isMax ? a < f : a > f) || Number.isNaN(a)) acc[i] = f;
        }
      } else {
        for (let i = 0; i < n; i++) cnt[i] += pv[i];
      }
    }
    const o = newStepSeries(g.labels, n, dropName);
    let any = false;
    for (let i = 0; i < n; i++) {
      if (cnt[i] === 0) continue;
      o.values[i] = op === "sum" ? acc[i] + comp[i] : op === "count" ? cnt[i] : op === "group" ? 1 : acc[i];
      o.present[i] = 1;
      any = true;
    }
    if (any) out.push(o);
  }
  ev.addSamples(out.length * n);
  return out;
}

function groupSeries(input: StepSeries[], e: Aggregate): Group[] {
  const groups = new Map<string, Group>();
  const out: Group[] = [];
  const sorted = [...e.grouping].sort();
  const byNames = new Set(e.grouping);
  const withoutNames = new Set([...e.grouping, "__name__"]);
  for (const s of input) {
    const k = e.without ? keyWithout(s.labels, withoutNames) : keyOn(s.labels, sorted);
    let g = groups.get(k);
    if (!g) {
      const labels = e.without ? without(s.labels, withoutNames) : keepOnly(s.labels, byNames);
      g = { labels, members: [] };
      groups.set(k, g);
      out.push(g);
    }
    g.members.push(s);
  }
  return out;
}

function kOf(v: number, ev: Evaluator): number {
  if (Number.isNaN(v) || Math.abs(v) >= 2 ** 63)
    throw new QueryEvalError(`Scalar value ${goFloat(v)} overflows int64`);
  void ev;
  return Math.trunc(v);
}

/**
 * topk / bottomk per step with Prometheus' bounded heap (promql/engine.go aggregationK and
 * container/heap), so the series kept on ties are the ones Prometheus keeps: O(members · log k)
 * per step instead of sorting every group at every step.
 */
function topk(ev: Evaluator, groups: Group[], param: Float64Array, top: boolean, n: number): StepSeries[] {
  const out: StepSeries[] = [];
  const outFor = new Map<StepSeries, StepSeries>();
  let heap: StepSeries[] = [];
  let i = 0;
  // Go's vectorByValueHeap / vectorByReverseValueHeap Less: NaN is always "smaller" (evicted first).
  const less = (a: StepSeries, b: StepSeries): boolean => {
    const x = a.values[i];
    if (Number.isNaN(x)) return true;
    return top ? x < b.values[i] : x > b.values[i];
  };
  const up = (j: number): void => {
    for (;;) {
      const p = (j - 1) >> 1;
      if (j <= 0 || !less(heap[j], heap[p])) break;
      const t = heap[p];
      heap[p] = heap[j];
      heap[j] = t;
      j = p;
    }
  };
  const down = (len: number): void => {
    let j = 0;
    for (;;) {
      const l = 2 * j + 1;
      if (l >= len) break;
      let c = l;
      if (l + 1 < len && less(heap[l + 1], heap[l])) c = l + 1;
      if (!less(heap[c], heap[j])) break;
      const t = heap[c];
      heap[c] = heap[j];
      heap[j] = t;
      j = c;
    }
  };
  for (i = 0; i < n; i++) {
    const k = kOf(param[i], ev);
    if (k < 1) continue;
    for (const g of groups) {
      ev.tick();
      if (heap.length < Math.min(k, g.members.length)) heap = new Array(Math.min(k, g.members.length));
      let len = 0;
      for (const s of g.members) {
        if (!s.present[i]) continue;
        const f = s.values[i];
        if (len < k) {
          heap[len] = s;
          up(len++);
          continue;
        }
        const root = heap[0].values[i];
        const replace = (top ? root < f : root > f) || (Number.isNaN(root) && !Number.isNaN(f));
        if (!replace) continue;
        heap[0] = s;
        if (k > 1) down(len);
      }
      for (let j = 0; j < len; j++) {
        const s = heap[j];
        let o = outFor.get(s);
        if (!o) {
          o = newStepSeries(s.labels, n, s.dropName);
          outFor.set(s, o);
          out.push(o);
        }
        o.values[i] = s.values[i];
        o.present[i] = 1;
      }
    }
  }
  if (n === 1) {
    // Instant queries list each group's kept series best first (NaN last), as Prometheus does.
    const order = (a: StepSeries, b: StepSeries) => {
      const x = a.values[0];
      const y = b.values[0];
      if (Number.isNaN(x)) return Number.isNaN(y) ? 0 : 1;
      if (Number.isNaN(y)) return -1;
      return top ? y - x : x - y;
    };
    const rank = new Map<StepSeries, number>();
    for (const g of groups) {
      const ps = g.members.filter((s) => outFor.has(s)).sort(order);
      for (const s of ps) rank.set(s, rank.size);
    }
    const inv = new Map<StepSeries, StepSeries>();
    for (const [src, o] of outFor) inv.set(o, src);
    out.sort((a, b) => rank.get(inv.get(a)!)! - rank.get(inv.get(b)!)!);
  }
  return out;
}

function countValues(ev: Evaluator, groups: Group[], label: string, e: Aggregate, n: number): StepSeries[] {
  if (label === "" || !isWellFormed(label))
    throw new QueryEvalError(`invalid label name ${JSON.stringify(label)}`);
  const out: StepSeries[] = [];
  const byKey = new Map<string, StepSeries>();
  for (const g of groups) {
    for (let i = 0; i < n; i++) {
      ev.tick();
      for (const s of g.members) {
        if (!s.present[i]) continue;
        const labels = setLabel(g.labels, label, formatFloatF(s.values[i]));
        const k = labelsKey(labels);
        let o = byKey.get(k);
        if (!o) {
          o = newStepSeries(labels, n);
          byKey.set(k, o);
          out.push(o);
        }
        if (!o.present[i]) {
          o.present[i] = 1;
          o.values[i] = 0;
        }
        o.values[i]++;
      }
    }
  }
  void e;
  return out;
}

/** Go's %g-ish float text for messages. */
export function goFloat(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}
