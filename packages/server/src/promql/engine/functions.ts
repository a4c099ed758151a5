/** Function calls: dispatch, instant-vector math, time, label and sort functions, absent. */
import type { Labels } from "../../storage/interface.ts";
import type { Call, Expr } from "../ast.ts";
import { QueryEvalError } from "../errors.ts";
import { isWellFormed } from "../lex.ts";
import { compileAnchored } from "../regex.ts";
import { type Evaluator, fillBounds as fillBoundsLocal } from "./evaluator.ts";
import { histogramQuantile } from "./histogram.ts";
import { compareLabels, getLabel, labelsKey, setLabel } from "./labels.ts";
import { evalRangeFunction } from "./rangefuncs.ts";
import { newStepSeries, type StepSeries, type Value } from "./types.ts";

const MATH: Record<string, (x: number) => number> = {
  abs: Math.abs,
  ceil: Math.ceil,
  floor: Math.floor,
  exp: Math.exp,
  sqrt: Math.sqrt,
  ln: Math.log,
  log2: Math.log2,
  log10: Math.log10,
  sgn: (x) => (x < 0 ? -1 : x > 0 ? 1 : x),
  deg: (x) => (x * 180) / Math.PI,
  rad: (x) => (x * Math.PI) / 180,
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  asin: Math.asin,
  acos: Math.acos,
  atan: Math.atan,
  sinh: Math.sinh,
  cosh: Math.cosh,
  tanh: Math.tanh,
  asinh: Math.asinh,
  acosh: Math.acosh,
  atanh: Math.atanh,
};

const TIME: Record<string, (d: Date) => number> = {
  day_of_month: (d) => d.getUTCDate(),
  day_of_week: (d) => d.getUTCDay(),
  day_of_year: (d) => Math.floor((d.getTime() - Date.UTC(d.getUTCFullYear(), 0, 1)) / 86_400_000) + 1,
  days_in_month: (d) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate(),
  hour: (d) => d.getUTCHours(),
  minute: (d) => d.getUTCMinutes(),
  month: (d) => d.getUTCMonth() + 1,
  year: (d) => d.getUTCFullYear(),
};

function unwrap(e: Expr): Expr {
  return e.kind === "Paren" ? unwrap(e.expr) : e;
}

function mapValues(
  series: StepSeries[],
  n: number,
  f: (v: number, i: number) => number,
  dropName = true,
): StepSeries[] {
  return series.map((s) => {
    const o = newStepSeries(s.labels, n, dropName || s.dropName);
    for (let i = 0; i < n; i++) {
      if (!s.present[i]) continue;
      o.values[i] = f(s.values[i], i);
      o.present[i] = 1;
    }
    return o;
  });
}

export function evalCall(ev: Evaluator, e: Call, ts: Float64Array): Value {
  const n = ts.length;
  const f = e.func;
  const vec = (series: StepSeries[]): Value => ({ type: "vector", series });
  const scalarArg = (k: number) => ev.evalScalar(e.args[k], ts);
  const stringArg = (k: number) => {
    const v = ev.eval(e.args[k], ts);
    if (v.type !== "string") throw new QueryEvalError(`expected string argument to ${f}`);
    return v.value;
  };

  const mathFn = MATH[f];
  if (mathFn) return vec(mapValues(ev.evalVector(e.args[0], ts), n, mathFn));
  const timeFn = TIME[f];
  if (timeFn) {
    const input: StepSeries[] =
      e.args.length === 0
        ? [
            {
              labels: [],
              values: ts.map((t) => t / 1000),
              present: new Uint8Array(n).fill(1),
              dropName: false,
            },
          ]
        : ev.evalVector(e.args[0], ts);
    const d = new Date(0);
    return vec(
      mapValues(input, n, (v) => {
        d.setTime(Math.trunc(v) * 1000);
        return timeFn(d);
      }),
    );
  }

  switch (f) {
    case "time":
      return { type: "scalar", values: ts.map((t) => t / 1000) };
    case "pi":
      return { type: "scalar", values: new Float64Array(n).fill(Math.PI) };
    case "vector": {
      const v = scalarArg(0);
      return vec([
        { labels: [], values: Float64Array.from(v), present: new Uint8Array(n).fill(1), dropName: false },
      ]);
    }
    case "scalar": {
      const series = ev.evalVector(e.args[0], ts);
      const out = new Float64Array(n).fill(Number.NaN);
      for (let i = 0; i < n; i++) {
        let cnt = 0;
        for (const s of series) {
          if (s.present[i]) {
            cnt++;
            out[i] = s.values[i];
          }
        }
        if (cnt !== 1) out[i] = Number.NaN;
      }
      return { type: "scalar", values: out };
    }
    case "timestamp": {
      const useSample = unwrap(e.args[0]).kind === "VectorSelector";
      const series = ev.evalVector(e.args[0], ts);
      return vec(
        series.map((s) => {
          const o = newStepSeries(s.labels, n, true);
          for (let i = 0; i < n; i++) {
            if (!s.present[i]) continue;
            o.values[i] = (useSample && s.sampleTs ? s.sampleTs[i] : ts[i]) / 1000;
            o.present[i] = 1;
          }
          return o;
        }),
      );
    }
    case "clamp":
    case "clamp_min":
    case "clamp_max": {
      const series = ev.evalVector(e.args[0], ts);
      const a = scalarArg(1);
      const b = f === "clamp" ? scalarArg(2) : null;
      const out = series.map((s) => {
        const o = newStepSeries(s.labels, n, true);
        for (let i = 0; i < n; i++) {
          if (!s.present[i]) continue;
          const x = s.values[i];
          if (f === "clamp") {
            if (b![i] < a[i]) continue;
            o.values[i] = Math.max(a[i], Math.min(b![i], x));
          } else o.values[i] = f === "clamp_min" ? Math.max(x, a[i]) : Math.min(x, a[i]);
          o.present[i] = 1;
        }
        return o;
      });
      return vec(out.filter((s) => s.present.some((p) => p === 1)));
    }
    case "round": {
      const series = ev.evalVector(e.args[0], ts);
      const to = e.args.length > 1 ? scalarArg(1) : new Float64Array(n).fill(1);
      return vec(
        mapValues(series, n, (v, i) => {
          const inv = 1 / to[i];
          return Math.floor(v * inv + 0.5) / inv;
        }),
      );
    }
    case "absent":
    case "absent_over_time":
      return vec(absent(ev, e, ts));
    case "label_replace":
      return vec(
        labelReplace(ev.evalVector(e.args[0], ts), stringArg(1), stringArg(2), stringArg(3), stringArg(4)),
      );
    case "label_join": {
      const series = ev.evalVector(e.args[0], ts);
      const srcs = e.args.slice(3).map((_, k) => stringArg(k + 3));
      return vec(labelJoin(series, stringArg(1), stringArg(2), srcs));
    }
    case "sort":
    case "sort_desc":
      return vec(sortByValue(ev.evalVector(e.args[0], ts), f === "sort_desc", n));
    case "sort_by_label":
    case "sort_by_label_desc": {
      const series = ev.evalVector(e.args[0], ts);
      const names = e.args.slice(1).map((_, k) => stringArg(k + 1));
      return vec(sortByLabel(series, names, f === "sort_by_label_desc"));
    }
    case "histogram_quantile": {
      const q = scalarArg(0);
      return vec(histogramQuantile(ev, q, ev.evalVector(e.args[1], ts), n));
    }
  }

  // Range-vector functions: the matrix argument and the scalar parameters around it.
  const mIdx = e.args.findIndex((a) => {
    const k = unwrap(a).kind;
    return k === "MatrixSelector" || k === "Subquery";
  });
  if (mIdx < 0) throw new QueryEvalError(`unsupported function "${f}"`);
  const params = e.args
    .map((_a, k) => (k === mIdx ? null : scalarArg(k)))
    .filter((p) => p !== null) as Float64Array[];
  const m = unwrap(e.args[mIdx]);
  if (m.kind !== "MatrixSelector" && m.kind !== "Subquery") throw new QueryEvalError("expected range vector");
  const w = ev.windows(m, ts, f);
  return vec(evalRangeFunction(ev, f, w, params, ts));
}

/** absent(): 1 at steps where the argument has no series; labels from its equality matchers. */
function absent(ev: Evaluator, e: Call, ts: Float64Array): StepSeries[] {
  const n = ts.length;
  const arg = unwrap(e.args[0]);
  let has: Uint8Array;
  if (e.func === "absent") {
    const series = ev.evalVector(e.args[0], ts);
    has = new Uint8Array(n);
    for (const s of series) for (let i = 0; i < n; i++) has[i] |= s.present[i];
  } else {
    if (arg.kind !== "MatrixSelector" && arg.kind !== "Subquery")
      throw new QueryEvalError("expected range vector");
    const w = ev.windows(arg, ts, e.func);
    has = new Uint8Array(n);
    const lo = new Int32Array(n);
    const hi = new Int32Array(n);
    for (const s of w.series) {
      fillBoundsLocal(s, w, lo, hi);
      for (let i = 0; i < n; i++) if (hi[i] > lo[i]) has[i] = 1;
    }
  }
  const o = newStepSeries(absentLabels(arg), n);
  let any = false;
  for (let i = 0; i < n; i++) {
    if (has[i]) continue;
    o.values[i] = 1;
    o.present[i] = 1;
    any = true;
  }
  return any ? [o] : [];
}

function absentLabels(e: Expr): Labels {
  let vs = e;
  if (vs.kind === "MatrixSelector") vs = vs.vector;
  if (vs.kind !== "VectorSelector") return [];
  let ls: Labels = [];
  const seen = new Map<string, number>();
  for (const m of vs.matchers) seen.set(m.name, (seen.get(m.name) ?? 0) + 1);
  for (const m of vs.matchers) {
    if (m.type === "=" && m.name !== "__name__" && seen.get(m.name) === 1) ls = setLabel(ls, m.name, m.value);
  }
  return ls;
}

function checkLabelName(name: string, fn: string, what: string): void {
  if (name === "" || !isWellFormed(name))
    throw new QueryEvalError(`invalid ${what} label name in ${fn}(): ${name}`);
}

function labelReplace(
  series: StepSeries[],
  dst: string,
  repl: string,
  src: string,
  regex: string,
): StepSeries[] {
  let re: ReturnType<typeof compileAnchored>;
  try {
    re = compileAnchored(regex);
  } catch {
    throw new QueryEvalError(`invalid regular expression in label_replace(): ${regex}`);
  }
  checkLabelName(dst, "label_replace", "destination");
  const out = series.map((s) => {
    const m = re.matcher(getLabel(s.labels, src));
    if (!m.matches()) return s;
    const value = expandTemplate(repl, (g) => m.group(g));
    const labels = setLabel(s.labels, dst, value);
    return { ...s, labels, dropName: dst === "__name__" ? false : s.dropName };
  });
  assertUnique(out);
  return out;
}

/** Go regexp.Expand: `$1`, `${1}`, `$name`, `${name}`, `$$`. */
function expandTemplate(tpl: string, group: (g: number | string) => string | null): string {
  let out = "";
  for (let i = 0; i < tpl.length; i++) {
    const c = tpl[i];
    if (c !== "$" || i + 1 >= tpl.length) {
      out += c;
      continue;
    }
    if (tpl[i + 1] === "$") {
      out += "$";
      i++;
      continue;
    }
    let name: string;
    let end: number;
    if (tpl[i + 1] === "{") {
      const close = tpl.indexOf("}", i + 2);
      const inner = close < 0 ? "" : tpl.slice(i + 2, close);
      if (close < 0 || !/^\w+$/.test(inner)) {
        out += c;
        continue;
      }
      name = inner;
      end = close;
    } else {
      const mm = /^\w+/.exec(tpl.slice(i + 1));
      if (!mm) {
        out += c;
        continue;
      }
      name = mm[0];
      end = i + name.length;
    }
    let v: string | null = null;
    try {
      v = /^\d+$/.test(name) ? group(Number(name)) : group(name);
    } catch {
      v = null;
    }
    out += v ?? "";
    i = end;
  }
  return out;
}

function labelJoin(series: StepSeries[], dst: string, sep: string, srcs: string[]): StepSeries[] {
  checkLabelName(dst, "label_join", "destination");
  for (const s of srcs)
    if (!isWellFormed(s)) throw new QueryEvalError(`invalid source label name in label_join(): ${s}`);
  const out = series.map((s) => {
    const value = srcs.map((src) => getLabel(s.labels, src)).join(sep);
    return {
      ...s,
      labels: setLabel(s.labels, dst, value),
      dropName: dst === "__name__" ? false : s.dropName,
    };
  });
  assertUnique(out);
  return out;
}

function assertUnique(series: StepSeries[]): void {
  const seen = new Map<string, StepSeries>();
  for (const s of series) {
    const k = labelsKey(s.labels);
    const o = seen.get(k);
    if (o) {
      for (let i = 0; i < s.present.length; i++) {
        if (s.present[i] && o.present[i])
          throw new QueryEvalError("vector cannot contain metrics with the same labelset");
      }
    } else seen.set(k, s);
  }
}

function sortByValue(series: StepSeries[], desc: boolean, n: number): StepSeries[] {
  if (n !== 1) return series;
  return [...series].sort((a, b) => {
    const x = a.values[0];
    const y = b.values[0];
    if (Number.isNaN(x)) return Number.isNaN(y) ? 0 : 1;
    if (Number.isNaN(y)) return -1;
    return desc ? y - x : x - y;
  });
}

/** Natural ("version") order: digit runs compare numerically. */
function natCompare(a: string, b: string): number {
  const ra = a.match(/\d+|\D+/g) ?? [];
  const rb = b.match(/\d+|\D+/g) ?? [];
  for (let i = 0; i < Math.min(ra.length, rb.length); i++) {
    const x = ra[i];
    const y = rb[i];
    if (x === y) continue;
    const dx = /^\d/.test(x);
    const dy = /^\d/.test(y);
    if (dx && dy) {
      const d = Number(x) - Number(y);
      if (d !== 0) return d;
      return x.length - y.length;
    }
    return x < y ? -1 : 1;
  }
  return ra.length - rb.length;
}

function sortByLabel(series: StepSeries[], names: string[], desc: boolean): StepSeries[] {
  return [...series].sort((a, b) => {
    for (const nm of names) {
      const c = natCompare(getLabel(a.labels, nm), getLabel(b.labels, nm));
      if (c !== 0) return desc ? -c : c;
    }
    const c = compareLabels(a.labels, b.labels);
    return desc ? -c : c;
  });
}
