/**
 * The endpoints' logic, independent of Fastify: each takes the project and its merged parameters and
 * returns the JSON body of a success, or throws (domain errors are mapped by the caller through
 * errors.ts). Every storage read goes through MetricsBackend (tenant pass, tenant label stripped) and
 * through the per-project limiter shared with the Connect RPCs.
 */
import { preferredCoding } from "../http/compression.ts";
import type { MetricsBackend, QueryAt } from "../metrics/backend.ts";
import { seriesCatalog } from "../metrics/catalog.ts";
import type { ProjectLimiter } from "../metrics/concurrency.ts";
import {
  type EncodedAnswer,
  parse,
  print,
  type QueryOptions,
  type QueryResult,
  type QueryValue,
  typeOf,
} from "../promql/index.ts";
import type { Labels } from "../storage/interface.ts";
import { ApiError, badParam } from "./errors.ts";
import {
  BoundedWriter,
  goJson,
  jsonString,
  labelsJson,
  queryAnswerJson,
  successBody,
  writeQueryData,
} from "./format.ts";
import type { PromApiOptions } from "./options.ts";
import { type Params, parseDurationParam, parseLimit, parseMatchers, parseTime } from "./params.ts";
import { translateAst } from "./parsequery.ts";

export interface HandlerDeps {
  readonly metrics: MetricsBackend;
  readonly limiter: ProjectLimiter;
  readonly now: () => number;
  readonly options: PromApiOptions;
}

/** What one request is about; `expr` is filled in once read, for parse-error positions. */
export interface RequestContext {
  readonly projectId: string;
  readonly params: Params;
  /** The decoded `<name>` of `label/<name>/values`. */
  readonly labelName?: string;
  /** Fires when the client goes away before the answer: its evaluation is stopped. */
  readonly signal?: AbortSignal;
  /** The request's Accept-Encoding: a body built in a query worker is compressed there. */
  readonly acceptEncoding?: string;
  expr: string;
}

/** A success body: JSON text, or a query's body already encoded where it ran (plugin.ts sends it as is). */
export type Handler = (deps: HandlerDeps, ctx: RequestContext) => Promise<string | EncodedAnswer>;

const TRUNCATED = "results truncated due to limit";
// Far enough in the future for any accepted sample (the TSDB refuses samples more than a day ahead).
const FAR_FUTURE_MS = 8_000_000_000_000_000;

function expression(deps: HandlerDeps, ctx: RequestContext): string {
  const expr = ctx.params.get("query") ?? "";
  ctx.expr = expr;
  const bytes = Buffer.byteLength(expr);
  const max = deps.options.maxExpressionBytes;
  if (bytes > max) {
    throw badParam(
      "query",
      `expression of ${bytes.toLocaleString("en-US")} bytes exceeds the limit of ${max.toLocaleString("en-US")} bytes [EXPRESSION_TOO_LONG]`,
    );
  }
  return expr;
}

function timeoutMs(deps: HandlerDeps, ctx: RequestContext): number {
  const asked = parseDurationParam(ctx.params, "timeout");
  const max = deps.options.timeoutMs;
  return asked !== undefined && asked > 0 ? Math.min(asked, max) : max;
}

function lookbackMs(ctx: RequestContext): number | undefined {
  const v = parseDurationParam(ctx.params, "lookback_delta");
  if (v !== undefined && v < 0) throw badParam("lookback_delta", "must not be negative");
  return v === 0 ? undefined : v;
}

/** The oldest instant with data: now − retention. */
function minTime(deps: HandlerDeps): number {
  return deps.now() - deps.options.retentionMs;
}

/** `start`/`end` of the metadata endpoints, clamped to retention; defaults to the whole of it. */
function seriesRange(deps: HandlerDeps, ctx: RequestContext): { start: number; end: number } {
  const floor = minTime(deps);
  const asked = parseTime(ctx.params, "start", floor);
  const end = parseTime(ctx.params, "end", FAR_FUTURE_MS);
  if (end < asked) throw badParam("end", "end timestamp must not be before start time");
  return { start: Math.max(asked, floor), end };
}

/**
 * A query's success body, under the project's query slot: built (and compressed as the client
 * accepts) by the backend where the query ran when it can — a query worker, so a large answer costs
 * the event loop only its writing — else here from the result. A `limit` (the first series of a
 * vector or matrix, with Prometheus' warning) and `stats` need the result, so those answers are
 * built here.
 */
async function queryAnswer(
  deps: HandlerDeps,
  ctx: RequestContext,
  expr: string,
  at: QueryAt,
  opts: QueryOptions,
): Promise<string | EncodedAnswer> {
  const m = deps.metrics;
  const maxBytes = deps.options.maxResponseBytes;
  const limit = parseLimit(ctx.params);
  const stats = ctx.params.get("stats") !== undefined;
  const t0 = performance.now();
  return deps.limiter.run(ctx.projectId, async () => {
    if (m.queryEncoded && limit === 0 && !stats) {
      const coding = preferredCoding(ctx.acceptEncoding ?? "", false);
      return m.queryEncoded(ctx.projectId, expr, at, { maxBytes, coding }, opts);
    }
    const t1 = performance.now();
    const r =
      "timeMs" in at
        ? await m.instantQuery(ctx.projectId, expr, at.timeMs, opts)
        : await m.rangeQuery(ctx.projectId, expr, at.startMs, at.endMs, at.stepMs, opts);
    if (!stats) return queryAnswerJson(truncated(r, limit), maxBytes);
    const t2 = performance.now();
    const cut = truncated(r, limit);
    const data = new BoundedWriter(maxBytes);
    writeQueryData(data, cut.value);
    const body = data.finish();
    const timings = { queueMs: t1 - t0, evalMs: t2 - t1, totalMs: performance.now() - t0 };
    return successBody(`${body.slice(0, -1)},"stats":${statsJson(r, timings)}}`, cut.annotations);
  });
}

/**
 * Prometheus 3's `stats` (util/stats BuiltinStats): timings in seconds and the samples the query
 * read. svc times the evaluation as a whole (parsing and sorting are inside it, so
 * `queryPreparationTime` and `resultSortTime` are 0) and has no per-step counts (`stats=all` adds
 * none); `samples` is absent when the backend could not count them.
 */
function statsJson(r: QueryResult, t: { queueMs: number; evalMs: number; totalMs: number }): string {
  const s = (ms: number) => Math.max(0, ms) / 1000;
  const timings = {
    evalTotalTime: s(t.evalMs),
    resultSortTime: 0,
    queryPreparationTime: 0,
    innerEvalTime: s(t.evalMs),
    execQueueTime: s(t.queueMs),
    execTotalTime: s(t.totalMs),
  };
  const samples = r.stats && {
    totalQueryableSamples: r.stats.totalQueryableSamples,
    peakSamples: r.stats.peakSamples,
  };
  return JSON.stringify(samples ? { timings, samples } : { timings });
}

/** Prometheus 3's truncateResults: the first `limit` series of a vector or matrix, and a warning. */
function truncated(r: QueryResult, limit: number): QueryResult {
  const v = r.value;
  if (limit === 0 || (v.resultType !== "vector" && v.resultType !== "matrix") || v.result.length <= limit)
    return r;
  const value = { ...v, result: v.result.slice(0, limit) } as QueryValue;
  return { value, annotations: { ...r.annotations, warnings: [...r.annotations.warnings, TRUNCATED] } };
}

/** A list body with Prometheus' truncation warning when `limit` cut it. */
function listBody<T>(deps: HandlerDeps, items: T[], limit: number, each: (x: T) => string): string {
  const cut = limit > 0 && items.length > limit;
  const list = cut ? items.slice(0, limit) : items;
  const w = new BoundedWriter(deps.options.maxResponseBytes);
  w.write('{"status":"success","data":[');
  list.forEach((x, i) => {
    w.write(i > 0 ? `,${each(x)}` : each(x));
  });
  w.write(cut ? `],"warnings":[${jsonString(TRUNCATED)}]}` : "]}");
  return w.finish();
}

export const query: Handler = async (deps, ctx) => {
  const expr = expression(deps, ctx);
  const time = parseTime(ctx.params, "time", deps.now());
  parseLimit(ctx.params);
  const opts = { timeoutMs: timeoutMs(deps, ctx), lookbackDeltaMs: lookbackMs(ctx), signal: ctx.signal };
  return queryAnswer(deps, ctx, expr, { timeMs: time }, opts);
};

export const queryRange: Handler = async (deps, ctx) => {
  const expr = expression(deps, ctx);
  const p = ctx.params;
  if (p.get("start") === undefined) throw badParam("start", 'cannot parse "" to a valid timestamp');
  if (p.get("end") === undefined) throw badParam("end", 'cannot parse "" to a valid timestamp');
  let start = parseTime(p, "start", 0);
  const end = parseTime(p, "end", 0);
  if (end < start) throw badParam("end", "end timestamp must not be before start time");
  const step = parseDurationParam(p, "step");
  if (step === undefined) throw badParam("step", 'cannot parse "" to a valid duration');
  if (step <= 0)
    throw badParam(
      "step",
      "zero or negative query resolution step widths are not accepted. Try a positive integer",
    );
  const max = deps.options.maxPointsPerSeries;
  const points = Math.floor((end - start) / step) + 1;
  if (points > max) {
    const suggested = Math.ceil((end - start) / (max - 1) / 1000);
    throw new ApiError(
      "bad_data",
      `exceeded maximum resolution of ${max.toLocaleString("en-US")} points per timeseries (requested ${points.toLocaleString("en-US")}). Try decreasing the query resolution (?step=XX), e.g. step=${suggested}s [POINT_BUDGET_EXCEEDED]`,
    );
  }
  parseLimit(p);
  const opts = { timeoutMs: timeoutMs(deps, ctx), lookbackDeltaMs: lookbackMs(ctx), signal: ctx.signal };
  // Parse and type errors come first, even for a range wholly outside retention (Prometheus: 400).
  const type = typeOf(parse(expr));
  if (type !== "vector" && type !== "scalar") {
    const name = type === "matrix" ? "range vector" : type;
    throw badParam(
      "query",
      `invalid expression type "${name}" for range query, must be Scalar or instant Vector`,
    );
  }
  // Clamped to retention on the same step grid, so the points a dashboard gets stay where it asked.
  const floor = minTime(deps);
  if (start < floor) start += Math.ceil((floor - start) / step) * step;
  if (start > end) return successBody('{"resultType":"matrix","result":[]}');
  return queryAnswer(deps, ctx, expr, { startMs: start, endMs: end, stepMs: step }, opts);
};

export const series: Handler = async (deps, ctx) => {
  const sets = parseMatchers(ctx.params, deps.options.maxExpressionBytes);
  if (sets.length === 0) throw new ApiError("bad_data", "no match[] parameter provided");
  const { start, end } = seriesRange(deps, ctx);
  const limit = parseLimit(ctx.params);
  const found = await deps.limiter.run(ctx.projectId, () =>
    deps.metrics.series(ctx.projectId, sets, start, end),
  );
  return listBody<Labels>(deps, found, limit, labelsJson);
};

export const labelNames: Handler = async (deps, ctx) => {
  const sets = parseMatchers(ctx.params, deps.options.maxExpressionBytes);
  const { start, end } = seriesRange(deps, ctx);
  const limit = parseLimit(ctx.params);
  const names = await deps.limiter.run(ctx.projectId, () =>
    deps.metrics.labelNames(ctx.projectId, sets, start, end),
  );
  return listBody(deps, names, limit, jsonString);
};

/** `label/<name>/values`. */
export const labelValues: Handler = async (deps, ctx) => {
  const name = ctx.labelName ?? "";
  if (name === "") throw new ApiError("bad_data", `invalid label name: ${jsonString(name)}`);
  const sets = parseMatchers(ctx.params, deps.options.maxExpressionBytes);
  const { start, end } = seriesRange(deps, ctx);
  const limit = parseLimit(ctx.params);
  const values = await deps.limiter.run(ctx.projectId, () =>
    deps.metrics.labelValues(ctx.projectId, name, sets, start, end),
  );
  return listBody(deps, values, limit, jsonString);
};

/** Only catalog metrics this project actually has series of, within retention. */
export const metadata: Handler = async (deps, ctx) => {
  const limit = parseLimit(ctx.params);
  parseLimit(ctx.params, "limit_per_metric");
  const only = ctx.params.get("metric");
  const names = await deps.limiter.run(ctx.projectId, () =>
    deps.metrics.labelValues(ctx.projectId, "__name__", [], minTime(deps), FAR_FUTURE_MS),
  );
  const entries: string[] = [];
  for (const n of names) {
    if (limit > 0 && entries.length >= limit) break;
    if (only !== undefined && n !== only) continue;
    const spec = Object.hasOwn(seriesCatalog, n) ? seriesCatalog[n] : undefined;
    if (!spec) continue;
    entries.push(
      `${jsonString(n)}:[{"type":${jsonString(spec.type)},"help":${jsonString(spec.help)},"unit":${jsonString(spec.unit)}}]`,
    );
  }
  return successBody(`{${entries.join(",")}}`);
};

/** svc stores no exemplars: the query is still validated, the answer is always empty. */
export const queryExemplars: Handler = async (deps, ctx) => {
  const expr = expression(deps, ctx);
  parse(expr);
  const start = parseTime(ctx.params, "start", 0);
  const end = parseTime(ctx.params, "end", FAR_FUTURE_MS);
  if (end < start) throw badParam("end", "end timestamp must not be before start time");
  return successBody("[]");
};

export const formatQuery: Handler = async (deps, ctx) => {
  const expr = expression(deps, ctx);
  return successBody(jsonString(print(parse(expr))));
};

export const parseQuery: Handler = async (deps, ctx) => {
  const expr = expression(deps, ctx);
  return successBody(goJson(translateAst(parse(expr))));
};

export const buildInfo: Handler = async (deps) =>
  successBody(
    JSON.stringify({
      version: deps.options.version,
      revision: "svc",
      branch: "svc",
      buildUser: "svc",
      buildDate: "",
      goVersion: "none",
    }),
  );
