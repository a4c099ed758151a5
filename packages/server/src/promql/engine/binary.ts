/** Binary operators: arithmetic, comparison (filter or bool), set operators, vector matching. */
import type { Labels } from "../../storage/interface.ts";
import { type Binary, type BinaryOp, COMPARISON_OPS, type VectorMatching } from "../ast.ts";
import { QueryEvalError } from "../errors.ts";
import type { Evaluator } from "./evaluator.ts";
import { keepOnly, keyOn, keyWithout, labelsKey, labelsString, setLabel, without } from "./labels.ts";
import { newStepSeries, type StepSeries, type Value } from "./types.ts";

/** Go's math.Pow edge cases differ from Math.pow (1^NaN, (-1)^±Inf). */
function goPow(x: number, y: number): number {
  if (y === 0 || x === 1) return 1;
  if (x === -1 && !Number.isFinite(y) && !Number.isNaN(y)) return 1;
  return x ** y;
}

/** Arithmetic or comparison on two floats; comparisons return 1/0 (caller decides filter vs bool). */
export function arith(op: BinaryOp, l: number, r: number): number {
  switch (op) {
    case "+":
      return l + r;
    case "-":
      return l - r;
    case "*":
      return l * r;
    case "/":
      return l / r;
    case "%":
      return l % r;
    case "^":
      return goPow(l, r);
    case "atan2":
      return Math.atan2(l, r);
    case "==":
      return l === r ? 1 : 0;
    case "!=":
      return l !== r ? 1 : 0;
    case ">":
      return l > r ? 1 : 0;
    case "<":
      return l < r ? 1 : 0;
    case ">=":
      return l >= r ? 1 : 0;
    case "<=":
      return l <= r ? 1 : 0;
    default:
      throw new QueryEvalError(`operator "${op}" not allowed for floats`);
  }
}

export function evalBinary(ev: Evaluator, e: Binary, ts: Float64Array): Value {
  const l = ev.eval(e.lhs, ts);
  const r = ev.eval(e.rhs, ts);
  const n = ts.length;
  if (l.type === "scalar" && r.type === "scalar") {
    const out = new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = arith(e.op, l.values[i], r.values[i]);
    return { type: "scalar", values: out };
  }
  if (l.type === "vector" && r.type === "scalar") return vectorScalar(l.series, r.values, e, false, n);
  if (l.type === "scalar" && r.type === "vector") return vectorScalar(r.series, l.values, e, true, n);
  if (l.type !== "vector" || r.type !== "vector")
    throw new QueryEvalError("binary expression on non-numeric operands");
  const m = e.matching ?? { card: "one-to-one", on: false, labels: [], include: [] };
  switch (e.op) {
    case "and":
    case "or":
    case "unless":
      return { type: "vector", series: setOp(e.op, l.series, r.series, m, n) };
  }
  return { type: "vector", series: vectorVector(ev, l.series, r.series, e, m, n) };
}

function vectorScalar(vec: StepSeries[], sc: Float64Array, e: Binary, swap: boolean, n: number): Value {
  const cmp = COMPARISON_OPS.has(e.op);
  const out: StepSeries[] = [];
  for (const s of vec) {
    const o = newStepSeries(s.labels, n, cmp && !e.returnBool ? s.dropName : true);
    let any = false;
    for (let i = 0; i < n; i++) {
      if (!s.present[i]) continue;
      const v = s.values[i];
      const res = swap ? arith(e.op, sc[i], v) : arith(e.op, v, sc[i]);
      if (cmp) {
        if (e.returnBool) o.values[i] = res;
        else if (res === 1) o.values[i] = v;
        else continue;
      } else o.values[i] = res;
      o.present[i] = 1;
      any = true;
    }
    if (any) out.push(o);
  }
  return { type: "vector", series: out };
}

function signatureFn(m: VectorMatching): (ls: Labels) => string {
  if (m.on) {
    const names = [...m.labels].sort();
    return (ls) => keyOn(ls, names);
  }
  const names = new Set([...m.labels, "__name__"]);
  return (ls) => keyWithout(ls, names);
}

/** Series indices grouped by matching signature. */
function bySignature(
  series: StepSeries[],
  sig: (ls: Labels) => string,
): { sigs: string[]; groups: Map<string, number[]> } {
  const sigs = series.map((s) => sig(s.labels));
  const groups = new Map<string, number[]>();
  sigs.forEach((k, i) => {
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  });
  return { sigs, groups };
}

function setOp(
  op: "and" | "or" | "unless",
  ls: StepSeries[],
  rs: StepSeries[],
  m: VectorMatching,
  n: number,
): StepSeries[] {
  const sig = signatureFn(m);
  const L = bySignature(ls, sig);
  const R = bySignature(rs, sig);
  const anyPresent = (idx: number[] | undefined, arr: StepSeries[], i: number) => {
    if (!idx) return false;
    for (const k of idx) if (arr[k].present[i]) return true;
    return false;
  };
  const out: StepSeries[] = [];
  const push = (s: StepSeries, keep: (i: number) => boolean) => {
    const o = newStepSeries(s.labels, n, s.dropName);
    let any = false;
    for (let i = 0; i < n; i++) {
      if (s.present[i] && keep(i)) {
        o.values[i] = s.values[i];
        o.present[i] = 1;
        any = true;
      }
    }
    if (any) out.push(o);
  };
  ls.forEach((s, k) => {
    const rg = R.groups.get(L.sigs[k]);
    if (op === "and") push(s, (i) => anyPresent(rg, rs, i));
    else if (op === "unless") push(s, (i) => !anyPresent(rg, rs, i));
    else push(s, () => true);
  });
  if (op === "or") {
    rs.forEach((s, k) => {
      const lg = L.groups.get(R.sigs[k]);
      push(s, (i) => !anyPresent(lg, ls, i));
    });
  }
  return out;
}

function vectorVector(
  ev: Evaluator,
  lhs: StepSeries[],
  rhs: StepSeries[],
  e: Binary,
  m: VectorMatching,
  n: number,
): StepSeries[] {
  const cmp = COMPARISON_OPS.has(e.op);
  const sig = signatureFn(m);
  // The "one" side is looked up by signature; group_right swaps the roles.
  const swapped = m.card === "one-to-many";
  const many = swapped ? rhs : lhs;
  const one = swapped ? lhs : rhs;
  const manySigs = many.map((s) => sig(s.labels));
  const oneIdx = bySignature(one, sig);
  // Resolve each series' match candidates once, not per step.
  const candsOf = manySigs.map((k) => oneIdx.groups.get(k));
  const include = new Set(m.include);
  const onSet = new Set(m.labels);
  const outByKey = new Map<string, StepSeries>();
  const pairOut = new Map<number, StepSeries>();
  // The usual case: a series has one candidate, so its output is fixed and kept per series index.
  const soleOut: (StepSeries | undefined)[] = new Array(many.length);
  const out: StepSeries[] = [];
  // For one-to-one matching, a "many" side signature may match only once per step: signatures are
  // numbered once, and the step that last saw each one is stamped in a typed array.
  const oneToOne = m.card === "one-to-one";
  const sigId = new Int32Array(many.length);
  let seenAt = new Int32Array(0);
  let seenBy = new Int32Array(0);
  if (oneToOne) {
    const ids = new Map<string, number>();
    for (let a = 0; a < many.length; a++) {
      let id = ids.get(manySigs[a]);
      if (id === undefined) {
        id = ids.size;
        ids.set(manySigs[a], id);
      }
      sigId[a] = id;
    }
    seenAt = new Int32Array(ids.size).fill(-1);
    seenBy = new Int32Array(ids.size);
  }

  for (let i = 0; i < n; i++) {
    ev.tick();
    for (let a = 0; a < many.length; a++) {
      const ms = many[a];
      if (!ms.present[i]) continue;
      const cands = candsOf[a];
      if (!cands) continue;
      let b = -1;
      for (const c of cands) {
        if (!one[c].present[i]) continue;
        if (b >= 0) {
          const side = swapped ? "left" : "right";
          throw new QueryEvalError(
            `found duplicate series for the match group ${labelsString(matchGroup(ms.labels, m))} on the ${side} hand-side of the operation: [${labelsString(one[b].labels)}, ${labelsString(one[c].labels)}];many-to-many matching not allowed: matching labels must be unique on one side`,
          );
        }
        b = c;
      }
      if (b < 0) continue;
      if (oneToOne) {
        const id = sigId[a];
        if (seenAt[id] === i) {
          throw new QueryEvalError(
            `found duplicate series for the match group ${labelsString(matchGroup(ms.labels, m))} on the left hand-side of the operation: [${labelsString(many[seenBy[id]].labels)}, ${labelsString(ms.labels)}];many-to-many matching not allowed: matching labels must be unique on one side`,
          );
        }
        seenAt[id] = i;
        seenBy[id] = a;
      }
      const os = one[b];
      let lv = ms.values[i];
      let rv = os.values[i];
      if (swapped) [lv, rv] = [rv, lv];
      let v = arith(e.op, lv, rv);
      if (cmp) {
        if (e.returnBool) {
          /* v is 0/1 */
        } else if (v === 1) v = lv;
        else continue;
      }
      // Output series per (many, one) pair, resolved once; pairs may share an output.
      const sole = cands.length === 1;
      const pk = a * one.length + b;
      let o = sole ? soleOut[a] : pairOut.get(pk);
      if (!o) {
        const labels = resultLabels(ms.labels, os.labels, m, onSet, include);
        const key = labelsKey(labels);
        o = outByKey.get(key);
        if (!o) {
          o = newStepSeries(labels, n, cmp && !e.returnBool ? ms.dropName : true);
          outByKey.set(key, o);
          out.push(o);
        }
        if (sole) soleOut[a] = o;
        else pairOut.set(pk, o);
      }
      if (o.present[i]) {
        throw new QueryEvalError("multiple matches for labels: grouping labels must ensure unique matches");
      }
      o.values[i] = v;
      o.present[i] = 1;
    }
  }
  return out;
}

function matchGroup(ls: Labels, m: VectorMatching): Labels {
  return m.on ? keepOnly(ls, new Set(m.labels)) : without(ls, new Set([...m.labels, "__name__"]));
}

/** Prometheus' resultMetric (with delayed name removal the name stays until the query ends). */
function resultLabels(
  many: Labels,
  one: Labels,
  m: VectorMatching,
  onSet: ReadonlySet<string>,
  include: ReadonlySet<string>,
): Labels {
  let ls = many;
  if (m.card === "one-to-one") {
    if (m.on) ls = keepOnly(ls, onSet);
    else ls = without(ls, onSet);
  }
  for (const name of include) {
    let v = "";
    for (const l of one) if (l.name === name) v = l.value;
    ls = setLabel(ls, name, v);
  }
  return ls;
}
