/**
 * Signatures of the PromQL functions (Prometheus 3.5 parser/functions.go), used by the type
 * checker. `variadic`: 0 = exact arity; n > 0 = the last n+1 args are optional down to len-1...;
 * -1 = the last argument type repeats without bound. Same convention as Prometheus.
 */
import type { ValueType } from "./ast.ts";

export interface FunctionSignature {
  readonly argTypes: readonly ValueType[];
  readonly variadic: number;
  readonly returnType: ValueType;
}

const v: ValueType = "vector";
const m: ValueType = "matrix";
const s: ValueType = "scalar";
const str: ValueType = "string";

function sig(argTypes: ValueType[], returnType: ValueType = v, variadic = 0): FunctionSignature {
  return Object.freeze({ argTypes: Object.freeze(argTypes), variadic, returnType });
}

const simpleVector = [
  "abs",
  "acos",
  "acosh",
  "asin",
  "asinh",
  "atan",
  "atanh",
  "ceil",
  "cos",
  "cosh",
  "deg",
  "exp",
  "floor",
  "ln",
  "log10",
  "log2",
  "rad",
  "sgn",
  "sin",
  "sinh",
  "sqrt",
  "tan",
  "tanh",
  "timestamp",
  "sort",
  "sort_desc",
  "absent",
];
const overTime = [
  "avg_over_time",
  "count_over_time",
  "sum_over_time",
  "min_over_time",
  "max_over_time",
  "stddev_over_time",
  "stdvar_over_time",
  "last_over_time",
  "first_over_time",
  "present_over_time",
  "absent_over_time",
  "mad_over_time",
  "ts_of_min_over_time",
  "ts_of_max_over_time",
  "ts_of_last_over_time",
  "ts_of_first_over_time",
  "rate",
  "irate",
  "increase",
  "delta",
  "idelta",
  "deriv",
  "changes",
  "resets",
];
const timeFuncs = [
  "day_of_month",
  "day_of_week",
  "day_of_year",
  "days_in_month",
  "hour",
  "minute",
  "month",
  "year",
];

const table = new Map<string, FunctionSignature>();
for (const f of simpleVector) table.set(f, sig([v]));
for (const f of overTime) table.set(f, sig([m]));
for (const f of timeFuncs) table.set(f, sig([v], v, 1));
table.set("clamp", sig([v, s, s]));
table.set("clamp_max", sig([v, s]));
table.set("clamp_min", sig([v, s]));
table.set("round", sig([v, s], v, 1));
table.set("label_replace", sig([v, str, str, str, str]));
table.set("label_join", sig([v, str, str, str], v, -1));
table.set("sort_by_label", sig([v, str], v, -1));
table.set("sort_by_label_desc", sig([v, str], v, -1));
table.set("predict_linear", sig([m, s]));
table.set("quantile_over_time", sig([s, m]));
table.set("double_exponential_smoothing", sig([m, s, s]));
table.set("histogram_quantile", sig([s, v]));
table.set("scalar", sig([v], s));
table.set("vector", sig([s]));
table.set("time", sig([], s));
table.set("pi", sig([], s));

/** Signature of a function, or undefined when PromQL has no such function (or we do not support it). */
export function functionSignature(name: string): FunctionSignature | undefined {
  return table.get(name);
}

/** Functions of Prometheus that only apply to native histograms or are not supported here. */
export const UNSUPPORTED_FUNCTIONS: ReadonlySet<string> = new Set([
  "histogram_count",
  "histogram_sum",
  "histogram_avg",
  "histogram_fraction",
  "histogram_stddev",
  "histogram_stdvar",
  "info",
]);
