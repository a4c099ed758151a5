/**
 * `parse_query`: the AST as Prometheus 3.x (web/api/v1/translate_ast.go) serialises it for its UI.
 * Deviations: numbers are shown with JS' shortest round-trip form (Go's 'f' form differs only for
 * very large or very small values), and experimental fields of later versions (`anchored`,
 * `smoothed`, `fillValues`, `alignEvalTime`) are not emitted.
 */
import { type AtModifier, type Expr, functionSignature } from "../promql/index.ts";
import type { LabelMatcher } from "../storage/interface.ts";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function matchers(ms: readonly LabelMatcher[]): Json {
  return ms.map((m) => ({ name: m.name, value: m.value, type: m.type }));
}

function at(a: AtModifier | null): { timestamp: Json; startOrEnd: Json } {
  if (a === null) return { timestamp: null, startOrEnd: null };
  if (a === "start" || a === "end") return { timestamp: null, startOrEnd: a };
  return { timestamp: a.time, startOrEnd: null };
}

function numberText(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

/** The JSON tree of one expression; the tenant pass is not applied (this is the user's text). */
export function translateAst(e: Expr): Json {
  switch (e.kind) {
    case "Aggregate":
      return {
        type: "aggregation",
        op: e.op,
        expr: translateAst(e.expr),
        param: e.param === null ? null : translateAst(e.param),
        grouping: [...e.grouping],
        without: e.without,
      };
    case "Binary":
      return {
        type: "binaryExpr",
        op: e.op,
        lhs: translateAst(e.lhs),
        rhs: translateAst(e.rhs),
        matching:
          e.matching === null
            ? null
            : {
                card: e.matching.card,
                labels: [...e.matching.labels],
                on: e.matching.on,
                include: [...e.matching.include],
              },
        bool: e.returnBool,
      };
    case "Call": {
      const sig = functionSignature(e.func);
      return {
        type: "call",
        func: {
          name: e.func,
          argTypes: sig ? [...sig.argTypes] : [],
          variadic: sig?.variadic ?? 0,
          returnType: sig?.returnType ?? "vector",
        },
        args: e.args.map(translateAst),
      };
    }
    case "MatrixSelector":
      return {
        type: "matrixSelector",
        name: e.vector.name,
        range: e.rangeMs,
        offset: e.vector.offsetMs,
        matchers: matchers(e.vector.matchers),
        ...at(e.vector.at),
      };
    case "Subquery":
      return {
        type: "subquery",
        expr: translateAst(e.expr),
        range: e.rangeMs,
        offset: e.offsetMs,
        step: e.stepMs,
        ...at(e.at),
      };
    case "NumberLiteral":
      return { type: "numberLiteral", val: numberText(e.value) };
    case "Paren":
      return { type: "parenExpr", expr: translateAst(e.expr) };
    case "StringLiteral":
      return { type: "stringLiteral", val: e.value };
    case "Unary":
      return { type: "unaryExpr", op: e.op, expr: translateAst(e.expr) };
    case "VectorSelector":
      return {
        type: "vectorSelector",
        name: e.name,
        offset: e.offsetMs,
        matchers: matchers(e.matchers),
        ...at(e.at),
      };
    default: {
      const never: never = e;
      throw new Error(`unknown node ${(never as { kind: string }).kind}`);
    }
  }
}
