/**
 * Tenant scoping: ANDs `project_id="<id>"` onto every vector and matrix selector (inside
 * subqueries, function arguments and aggregations too). The user's matchers are kept, so a
 * user matcher on `project_id` can only narrow the result, never widen it. Unknown node kinds
 * throw UnsupportedNodeError (fail closed).
 */
import {
  Aggregate,
  Binary,
  Call,
  type Expr,
  MatrixSelector,
  Paren,
  Subquery,
  Unary,
  VectorSelector,
} from "./ast.ts";
import type { QueryValue } from "./engine/engine.ts";
import { UnsupportedNodeError } from "./errors.ts";

export const TENANT_LABEL = "project_id";

/**
 * A query value without the tenant label on its series: what a scoped query answers, since the label
 * never reaches a response (used by the backends and by the query worker that encodes answers).
 */
export function withoutTenant(v: QueryValue): QueryValue {
  const strip = <T extends { metric: readonly { name: string }[] }>(s: T): T => ({
    ...s,
    metric: s.metric.filter((l) => l.name !== TENANT_LABEL),
  });
  switch (v.resultType) {
    case "vector":
      return { resultType: "vector", result: v.result.map(strip) };
    case "matrix":
      return { resultType: "matrix", result: v.result.map(strip) };
    default:
      return v;
  }
}

/** Returns a new tree scoped to `projectId`; `expr` is left untouched. */
export function injectTenant(expr: Expr, projectId: string): Expr {
  if (projectId === "") throw new Error("injectTenant: empty project id");
  return rewrite(expr, projectId);
}

function scope(vs: VectorSelector, projectId: string): VectorSelector {
  return VectorSelector.withMatchers(vs, [
    ...vs.matchers,
    { type: "=", name: TENANT_LABEL, value: projectId },
  ]);
}

function rewrite(e: Expr, p: string): Expr {
  switch (e.kind) {
    case "NumberLiteral":
    case "StringLiteral":
      return e;
    case "VectorSelector":
      return scope(e, p);
    case "MatrixSelector":
      return MatrixSelector.create({ ...e, vector: scope(e.vector, p) });
    case "Subquery":
      return Subquery.create({ ...e, expr: rewrite(e.expr, p) });
    case "Paren":
      return Paren.create({ expr: rewrite(e.expr, p) });
    case "Unary":
      return Unary.create({ ...e, expr: rewrite(e.expr, p) });
    case "Call":
      return Call.create({ ...e, args: Object.freeze(e.args.map((a) => rewrite(a, p))) });
    case "Aggregate":
      return Aggregate.create({
        ...e,
        expr: rewrite(e.expr, p),
        param: e.param ? rewrite(e.param, p) : null,
      });
    case "Binary":
      return Binary.create({ ...e, lhs: rewrite(e.lhs, p), rhs: rewrite(e.rhs, p) });
    default: {
      const unknown: never = e;
      throw new UnsupportedNodeError(String((unknown as { kind?: unknown })?.kind ?? typeof unknown));
    }
  }
}
