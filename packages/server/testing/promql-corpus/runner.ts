/** Runs promqltest scripts against the engine and counts passed / failed / skipped evals. */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type Expr, typeOf, type VectorSelector } from "../../src/promql/ast.ts";
import { createEngine, type Engine, type QueryResult } from "../../src/promql/engine/engine.ts";
import { labelsKey } from "../../src/promql/engine/labels.ts";
import { parse } from "../../src/promql/parser.ts";
import type { Labels, Queryable } from "../../src/storage/interface.ts";
import { MemStorage, matches } from "../memstorage.ts";
import { type EvalCmd, type LoadCmd, parseScript, type SeqValue } from "./script.ts";

export interface FileReport {
  readonly file: string;
  passed: number;
  failed: number;
  skipped: number;
  readonly failures: { line: number; expr: string; reason: string }[];
}

// Out of scope: native histograms and experimental syntax behind feature flags.
const SKIP_EXPR =
  /\b(histogram_(count|sum|avg|fraction|stddev|stdvar)|limitk|limit_ratio|info)\s*\(|\bfill(_left|_right)?\b|\[[^\]]*[+*/()][^\]]*\]/;

/** Where a script's `load` samples go: the in-memory store here, the real TSDB in metrics tests. */
export interface CorpusSink {
  append(labels: Labels, t: number, v: number): void;
  appendStale(labels: Labels, t: number): void;
}

/**
 * Feeds one `load` command to `sink`. Native-histogram series are not stored; their label sets are
 * pushed onto `hist` so evals that would select them are skipped.
 */
export function loadInto(cmd: LoadCmd, sink: CorpusSink, hist: Labels[]): void {
  for (const s of cmd.series) {
    if (s.histogram) {
      hist.push(s.labels);
      continue;
    }
    const name = s.labels.find((l) => l.name === "__name__")?.value ?? "";
    if (cmd.nhcb && name.endsWith("_bucket")) {
      // load_with_nhcb also stores a native histogram named without `_bucket`.
      hist.push(
        s.labels
          .filter((l) => l.name !== "le")
          .map((l) => (l.name === "__name__" ? { name: l.name, value: name.slice(0, -7) } : l)),
      );
    }
    s.values.forEach((v, k) => {
      if (v === null) return;
      if (v === "stale") sink.appendStale(s.labels, k * cmd.intervalMs);
      else sink.append(s.labels, k * cmd.intervalMs, v);
    });
  }
}

/** The verdict on one eval over `store`: "skipped", null when it passes, else why not. */
export function evalCommand(engine: Engine, store: Queryable, cmd: EvalCmd, hist: Labels[]): string | null {
  const skip =
    SKIP_EXPR.test(cmd.expr) || cmd.results.some((r) => r.histogram) || touchesHistograms(cmd.expr, hist);
  return skip ? "skipped" : runEval(engine, store, cmd);
}

export function runFile(path: string, engine: Engine = createEngine({ timeoutMs: 0 })): FileReport {
  const report: FileReport = { file: path, passed: 0, failed: 0, skipped: 0, failures: [] };
  const store = new MemStorage();
  let hist: Labels[] = [];
  for (const cmd of parseScript(readFileSync(path, "utf8"))) {
    if (cmd.kind === "clear") {
      store.clear();
      hist = [];
      continue;
    }
    if (cmd.kind === "load") {
      loadInto(cmd, store, hist);
      continue;
    }
    const reason = evalCommand(engine, store, cmd, hist);
    if (reason === "skipped") report.skipped++;
    else if (reason === null) report.passed++;
    else {
      report.failed++;
      report.failures.push({ line: cmd.line, expr: cmd.expr, reason });
    }
  }
  return report;
}

/** True when a selector of the expression would select one of the (native histogram) label sets. */
function touchesHistograms(expr: string, hist: Labels[]): boolean {
  if (hist.length === 0) return false;
  let ast: Expr;
  try {
    ast = parse(expr);
  } catch {
    return false;
  }
  const hit = (vs: VectorSelector) =>
    hist.some((ls) => vs.matchers.every((m) => matches(m, ls.find((l) => l.name === m.name)?.value ?? "")));
  const walk = (e: Expr): boolean => {
    switch (e.kind) {
      case "VectorSelector":
        return hit(e);
      case "MatrixSelector":
        return hit(e.vector);
      case "Subquery":
      case "Paren":
      case "Unary":
        return walk(e.expr);
      case "Call":
        return e.args.some(walk);
      case "Aggregate":
        return walk(e.expr) || (e.param !== null && walk(e.param));
      case "Binary":
        return walk(e.lhs) || walk(e.rhs);
      default:
        return false;
    }
  };
  return walk(ast);
}

/** Null when the eval passes, else why not. */
function runEval(engine: Engine, store: Queryable, cmd: EvalCmd): string | null {
  const failExp = cmd.expects.find((e) => e.kind === "fail");
  let res: QueryResult;
  try {
    const expr = parse(cmd.expr);
    res = cmd.instant
      ? engine.instantQuery(store, expr, cmd.startMs)
      : engine.rangeQuery(store, expr, cmd.startMs, cmd.endMs, cmd.stepMs);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    if (!failExp) return `unexpected error: ${msg}`;
    if (failExp.msg !== undefined && failExp.msg !== msg) return `error message "${msg}" != "${failExp.msg}"`;
    if (failExp.regex !== undefined && !new RegExp(failExp.regex).test(msg))
      return `error "${msg}" !~ ${failExp.regex}`;
    return null;
  }
  if (failExp) return "expected an error, got none";
  const { warnings, infos } = res.annotations;
  const has = (k: string) => cmd.expects.some((e) => e.kind === k);
  for (const e of cmd.expects) {
    const list = e.kind === "warn" ? warnings : e.kind === "info" ? infos : null;
    if (!list) continue;
    if (list.length === 0) return `expected ${e.kind} annotations, got none`;
    if (e.msg !== undefined && !list.includes(e.msg))
      return `no ${e.kind} "${e.msg}" in ${JSON.stringify(list)}`;
    if (e.regex !== undefined && !list.some((w) => new RegExp(e.regex!).test(w)))
      return `no ${e.kind} matching ${e.regex}`;
  }
  if (!has("warn") && warnings.length > 0) return `unexpected warnings: ${JSON.stringify(warnings)}`;
  if (has("no_info") && infos.length > 0) return `unexpected infos: ${JSON.stringify(infos)}`;
  const verdict = compare(cmd, res, has("ordered"));
  if (verdict !== null || !cmd.instant) return verdict;
  return rangeConsistency(engine, store, cmd, res);
}

/**
 * As Prometheus' test runner does, re-runs an instant eval as a one-step range query and checks
 * that both paths agree (same series, same values).
 */
function rangeConsistency(engine: Engine, store: Queryable, cmd: EvalCmd, inst: QueryResult): string | null {
  const expr = parse(cmd.expr);
  const t = typeOf(expr);
  if (t !== "vector" && t !== "scalar") return null;
  const res = engine.rangeQuery(store, expr, cmd.startMs, cmd.startMs, 60_000);
  if (res.value.resultType !== "matrix") return "range query did not return a matrix";
  const got = new Map(res.value.result.map((s) => [labelsKey(s.metric), s.values[0]]));
  const want =
    inst.value.resultType === "scalar"
      ? new Map([["", inst.value.result.v]])
      : inst.value.resultType === "vector"
        ? new Map(inst.value.result.map((s) => [labelsKey(s.metric), s.v]))
        : new Map();
  if (got.size !== want.size) return `range-query mode returned ${got.size} series, instant ${want.size}`;
  for (const [k, v] of want) {
    const g = got.get(k);
    if (g === undefined || !almostEqual(g, v))
      return `range-query mode differs for ${k.replaceAll("\xff", " ")}: ${g} != ${v}`;
  }
  return null;
}

function almostEqual(a: number, b: number): boolean {
  if (Number.isNaN(a) && Number.isNaN(b)) return true;
  if (a === b) return true;
  const eps = 1e-6;
  const absSum = Math.abs(a) + Math.abs(b);
  const diff = Math.abs(a - b);
  if (a === 0 || b === 0 || absSum < Number.MIN_VALUE) return diff < eps * Number.MIN_VALUE;
  return diff / Math.min(absSum, Number.MAX_VALUE) < eps;
}

function num(v: SeqValue): number {
  return typeof v === "number" ? v : Number.NaN;
}

function compare(cmd: EvalCmd, res: QueryResult, ordered: boolean): string | null {
  const v = res.value;
  if (v.resultType === "scalar") {
    if (cmd.results.length !== 1 || cmd.results[0].values.length !== 1)
      return `got scalar ${v.result.v}, expected ${cmd.results.length} series`;
    const want = num(cmd.results[0].values[0]);
    return almostEqual(want, v.result.v) ? null : `scalar ${v.result.v} != ${want}`;
  }
  if (v.resultType === "string") return "string results are not compared";
  if (v.resultType === "vector") {
    if (v.result.length !== cmd.results.length) {
      return `got ${v.result.length} samples, expected ${cmd.results.length}: ${JSON.stringify(v.result.map((s) => [labelsKey(s.metric).replaceAll("\xff", " "), s.v]))}`;
    }
    const got = new Map(v.result.map((s, i) => [labelsKey(s.metric), { v: s.v, i }]));
    for (let k = 0; k < cmd.results.length; k++) {
      const r = cmd.results[k];
      const g = got.get(labelsKey(r.labels ?? []));
      if (!g) return `missing series ${labelsKey(r.labels ?? []).replaceAll("\xff", " ")}`;
      if (ordered && g.i !== k)
        return `series ${labelsKey(r.labels ?? []).replaceAll("\xff", " ")} at position ${g.i}, expected ${k}`;
      if (!almostEqual(num(r.values[0]), g.v))
        return `value ${g.v} != ${num(r.values[0])} for ${labelsKey(r.labels ?? [])}`;
    }
    return null;
  }
  // Matrix (range eval): expected values are per step, `_` = no point.
  const got = new Map(v.result.map((s) => [labelsKey(s.metric), s]));
  const wantSeries = cmd.results.filter((r) => r.values.some((x) => x !== null));
  if (got.size !== wantSeries.length) {
    return `got ${got.size} series, expected ${wantSeries.length}: ${[...got.keys()].map((k) => k.replaceAll("\xff", " ")).join(" | ")}`;
  }
  for (const r of wantSeries) {
    const s = got.get(labelsKey(r.labels ?? []));
    if (!s) return `missing series ${labelsKey(r.labels ?? []).replaceAll("\xff", " ")}`;
    const pts = new Map<number, number>();
    s.timestamps.forEach((t, i) => {
      pts.set(t, s.values[i]);
    });
    let want = 0;
    for (let k = 0; k < r.values.length; k++) {
      const t = cmd.startMs + k * cmd.stepMs;
      const x = r.values[k];
      if (x === null) {
        if (pts.has(t)) return `unexpected point at ${t} for ${labelsKey(r.labels ?? [])}`;
        continue;
      }
      want++;
      const gv = pts.get(t);
      if (gv === undefined) return `missing point at ${t} for ${labelsKey(r.labels ?? [])}`;
      if (!almostEqual(num(x), gv))
        return `point at ${t}: ${gv} != ${num(x)} for ${labelsKey(r.labels ?? [])}`;
    }
    if (want !== s.timestamps.length) return `got ${s.timestamps.length} points, expected ${want}`;
  }
  return null;
}

/** Every `.test` file of a corpus directory, sorted. */
export function corpusFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".test"))
    .sort()
    .map((f) => join(dir, f));
}
