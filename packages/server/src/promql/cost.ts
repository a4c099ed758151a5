/**
 * A query's cost estimated before evaluation, to choose where it runs: a cheap one inline on the
 * event loop (a dashboard panel over a few series, where a worker's hand-off costs more than the
 * evaluation), a costly one in a query worker. The unit is "sample visits": for each selector, the
 * series it matches × the steps × the samples a step's window holds at a 15 s interval (svc's
 * agents send every 30 s, so this errs high). Series counts come from the store's postings
 * (Querier.estimateSeries), read without decoding a sample.
 */
import type { Querier } from "../storage/interface.ts";
import type { Expr } from "./ast.ts";

/**
 * Sample visits up to which a query is evaluated inline rather than in a worker (metrics/backend.ts,
 * SVC_QUERY_INLINE_COST): a few ms of engine time, the order of a worker's round trip for a
 * dashboard panel; one VM's chart over 7 days at a 30 min step is ~40,000.
 */
export const DEFAULT_INLINE_QUERY_COST = 100_000;

/** Sampling interval assumed for windows, ms (Prometheus' default scrape interval). */
const ASSUMED_INTERVAL_MS = 15_000;
/** Lookback of an instant selector, ms (the engine's default lookback delta). */
const LOOKBACK_MS = 5 * 60_000;

/** Where the query is evaluated: one instant, or `startMs`…`endMs` by `stepMs`. */
export type CostRange = { readonly startMs: number; readonly endMs: number; readonly stepMs: number };

/**
 * The estimated sample visits of `expr` over `range`; Infinity when it cannot be bounded cheaply
 * (a subquery: its inner steps multiply the work) or the store gives no series estimate. Stops
 * counting once past `limit` (the caller's threshold), so a heavy query costs no more postings
 * reads than it takes to see it is heavy.
 */
export function estimateCost(expr: Expr, querier: Querier, range: CostRange, limit = Infinity): number {
  if (!querier.estimateSeries) return Number.POSITIVE_INFINITY;
  const estimate = querier.estimateSeries.bind(querier);
  const steps = range.stepMs > 0 ? Math.floor((range.endMs - range.startMs) / range.stepMs) + 1 : 1;
  let total = 0;
  const visit = (e: Expr, windowMs: number): void => {
    if (total > limit) return;
    switch (e.kind) {
      case "VectorSelector": {
        const mint = range.startMs - e.offsetMs - Math.max(windowMs, LOOKBACK_MS);
        const series = estimate(e.matchers, mint, range.endMs - e.offsetMs);
        total += series * steps * Math.max(1, Math.ceil(windowMs / ASSUMED_INTERVAL_MS));
        return;
      }
      case "MatrixSelector":
        visit(e.vector, e.rangeMs);
        return;
      case "Subquery":
        total = Number.POSITIVE_INFINITY;
        return;
      case "Call":
        for (const a of e.args) visit(a, 0);
        return;
      case "Aggregate":
        visit(e.expr, 0);
        if (e.param) visit(e.param, 0);
        return;
      case "Binary":
        visit(e.lhs, 0);
        visit(e.rhs, 0);
        return;
      case "Unary":
      case "Paren":
        visit(e.expr, 0);
        return;
      case "NumberLiteral":
      case "StringLiteral":
        return;
    }
  };
  visit(expr, 0);
  return total;
}
