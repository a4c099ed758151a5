/**
 * The PromQL package surface. Other folders import only from here.
 *
 * - `parse(expr)` -> typed, frozen AST (throws PromQLParseError with a position).
 * - `print(ast)` -> PromQL text that parses back to an equal tree.
 * - `injectTenant(ast, projectId)` -> new tree with `project_id="<id>"` ANDed onto every selector.
 * - `createEngine(opts)` -> Engine with `instantQuery` / `rangeQuery` over a storage Queryable.
 * - `createQueryPool(opts)` -> the same two queries in worker threads, off the event loop.
 */
export type {
  Aggregate,
  AggregateOp,
  AtModifier,
  Binary,
  BinaryOp,
  Call,
  Cardinality,
  Expr,
  ExprKind,
  MatrixSelector,
  NumberLiteral,
  Paren,
  StringLiteral,
  Subquery,
  Unary,
  ValueType,
  VectorMatching,
  VectorSelector,
} from "./ast.ts";
export { typeOf } from "./ast.ts";
export type {
  Engine,
  InstantSample,
  QueryResult,
  QueryStats,
  QueryValue,
  RangeSeries,
} from "./engine/engine.ts";
export { createEngine } from "./engine/engine.ts";
export { linearRegression, predictLinear } from "./engine/regression.ts";
export {
  PointBudgetError,
  PromQLParseError,
  QueryEvalError,
  QueryOverloadError,
  QueryTimeoutError,
  ResponseTooLargeError,
  TooManySamplesError,
  UnsupportedNodeError,
} from "./errors.ts";
export {
  defaultEngineOptions,
  type EngineOptions,
  type QueryOptions,
  resolveEngineOptions,
} from "./options.ts";
export { parse } from "./parser.ts";
export { registerQueryPoolMetrics } from "./pool/instrumentation.ts";
export {
  createQueryPool,
  defaultQueryPoolOptions,
  type PoolQueryOptions,
  type QueryPool,
  type QueryPoolOptions,
  type QueryPoolStats,
  workersPerTenant,
} from "./pool/pool.ts";
export type { AnswerEncoding, EncodedAnswer } from "./pool/protocol.ts";
export { chargingCpu } from "./pool/thread-cpu.ts";
export { print } from "./printer.ts";
export { type FunctionSignature, functionSignature } from "./signatures.ts";
export { injectTenant, TENANT_LABEL, withoutTenant } from "./tenant.ts";
