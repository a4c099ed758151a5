/**
 * The PromQL syntax tree: frozen nodes tagged by `kind`. Rewrites (tenant injection) build new
 * trees; nothing mutates a node after `create`. Durations and times are milliseconds.
 */
import type { LabelMatcher } from "../storage/interface.ts";

export type ValueType = "scalar" | "vector" | "matrix" | "string";

/** `@` modifier: a fixed time in ms, or the query's start / end. */
export type AtModifier = { readonly time: number } | "start" | "end";

export interface VectorSelector {
  readonly kind: "VectorSelector";
  /** Metric name as written before the braces ("" when absent; then a `__name__` matcher may exist). */
  readonly name: string;
  /** Every matcher, including the `__name__` one implied by `name`. */
  readonly matchers: readonly LabelMatcher[];
  readonly offsetMs: number;
  readonly at: AtModifier | null;
}

export interface MatrixSelector {
  readonly kind: "MatrixSelector";
  readonly vector: VectorSelector;
  readonly rangeMs: number;
}

export interface Subquery {
  readonly kind: "Subquery";
  readonly expr: Expr;
  readonly rangeMs: number;
  /** 0 means "the engine's default resolution". */
  readonly stepMs: number;
  readonly offsetMs: number;
  readonly at: AtModifier | null;
}

export interface Call {
  readonly kind: "Call";
  readonly func: string;
  readonly args: readonly Expr[];
}

export type AggregateOp =
  | "sum"
  | "avg"
  | "min"
  | "max"
  | "count"
  | "group"
  | "stddev"
  | "stdvar"
  | "topk"
  | "bottomk"
  | "quantile"
  | "count_values";

export interface Aggregate {
  readonly kind: "Aggregate";
  readonly op: AggregateOp;
  readonly expr: Expr;
  readonly param: Expr | null;
  readonly grouping: readonly string[];
  readonly without: boolean;
}

export type BinaryOp =
  | "+"
  | "-"
  | "*"
  | "/"
  | "%"
  | "^"
  | "atan2"
  | "=="
  | "!="
  | ">"
  | "<"
  | ">="
  | "<="
  | "and"
  | "or"
  | "unless";

export type Cardinality = "one-to-one" | "many-to-one" | "one-to-many" | "many-to-many";

export interface VectorMatching {
  readonly card: Cardinality;
  /** True for `on(...)`, false for `ignoring(...)` (and for no modifier). */
  readonly on: boolean;
  readonly labels: readonly string[];
  /** Labels named in `group_left(...)` / `group_right(...)`. */
  readonly include: readonly string[];
}

export interface Binary {
  readonly kind: "Binary";
  readonly op: BinaryOp;
  readonly lhs: Expr;
  readonly rhs: Expr;
  readonly returnBool: boolean;
  /** Null unless both sides are instant vectors. */
  readonly matching: VectorMatching | null;
}

export interface Unary {
  readonly kind: "Unary";
  readonly op: "-" | "+";
  readonly expr: Expr;
}

export interface Paren {
  readonly kind: "Paren";
  readonly expr: Expr;
}

export interface NumberLiteral {
  readonly kind: "NumberLiteral";
  readonly value: number;
}

export interface StringLiteral {
  readonly kind: "StringLiteral";
  readonly value: string;
}

export type Expr =
  | VectorSelector
  | MatrixSelector
  | Subquery
  | Call
  | Aggregate
  | Binary
  | Unary
  | Paren
  | NumberLiteral
  | StringLiteral;

export type ExprKind = Expr["kind"];

type Fields<T extends Expr> = Omit<T, "kind">;

function make<K extends ExprKind>(kind: K) {
  type N = Extract<Expr, { kind: K }>;
  return Object.freeze({
    is(e: Expr): e is N {
      return e.kind === kind;
    },
    create(fields: Fields<N>): N {
      return Object.freeze({ kind, ...fields }) as unknown as N;
    },
  });
}

export const VectorSelector = Object.freeze({
  ...make("VectorSelector"),
  /** A copy of `vs` with other matchers (the name shown stays). */
  withMatchers(vs: VectorSelector, matchers: readonly LabelMatcher[]): VectorSelector {
    return Object.freeze({ ...vs, matchers: Object.freeze(matchers.map((m) => Object.freeze({ ...m }))) });
  },
});
export const MatrixSelector = make("MatrixSelector");
export const Subquery = make("Subquery");
export const Call = make("Call");
export const Aggregate = make("Aggregate");
export const Binary = make("Binary");
export const Unary = make("Unary");
export const Paren = make("Paren");
export const NumberLiteral = make("NumberLiteral");
export const StringLiteral = make("StringLiteral");

export const COMPARISON_OPS: ReadonlySet<BinaryOp> = new Set(["==", "!=", ">", "<", ">=", "<="]);
export const SET_OPS: ReadonlySet<BinaryOp> = new Set(["and", "or", "unless"]);

/** Static result type of an expression (the tree is type-checked at parse time). */
export function typeOf(e: Expr): ValueType {
  switch (e.kind) {
    case "VectorSelector":
    case "Aggregate":
      return "vector";
    case "MatrixSelector":
    case "Subquery":
      return "matrix";
    case "NumberLiteral":
      return "scalar";
    case "StringLiteral":
      return "string";
    case "Paren":
    case "Unary":
      return typeOf(e.expr);
    case "Binary":
      return typeOf(e.lhs) === "scalar" && typeOf(e.rhs) === "scalar" ? "scalar" : "vector";
    case "Call":
      return callReturnType(e.func);
  }
}

// Kept here (not in functions.ts) so the AST stays free of engine imports.
const SCALAR_FUNCS = new Set(["scalar", "time", "pi"]);
function callReturnType(func: string): ValueType {
  return SCALAR_FUNCS.has(func) ? "scalar" : "vector";
}
