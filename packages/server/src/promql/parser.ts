/**
 * Lezer tree -> typed AST, then Prometheus' type checks (parser/parse.go checkAST). Any lezer node
 * this module does not know is refused with a PromQLParseError (fail closed), never passed on.
 */
import type { SyntaxNode } from "@lezer/common";
import { parser as lezer } from "@prometheus-io/lezer-promql";
import type { LabelMatcher, MatchType } from "../storage/interface.ts";
import {
  Aggregate,
  type AggregateOp,
  type AtModifier,
  Binary,
  type BinaryOp,
  Call,
  type Cardinality,
  COMPARISON_OPS,
  type Expr,
  MatrixSelector,
  NumberLiteral,
  Paren,
  SET_OPS,
  StringLiteral,
  Subquery,
  typeOf,
  Unary,
  type ValueType,
  VectorSelector,
} from "./ast.ts";
import { PromQLParseError } from "./errors.ts";
import { parseDurationMs, parseNumber, unquoteString } from "./lex.ts";
import { compileAnchored, fullMatch, regexError } from "./regex.ts";
import { functionSignature, UNSUPPORTED_FUNCTIONS } from "./signatures.ts";

const BINARY_OPS: Record<string, BinaryOp> = {
  Pow: "^",
  Mul: "*",
  Div: "/",
  Mod: "%",
  Add: "+",
  Sub: "-",
  Atan2: "atan2",
  Eql: "==",
  Neq: "!=",
  Gtr: ">",
  Lss: "<",
  Gte: ">=",
  Lte: "<=",
  And: "and",
  Or: "or",
  Unless: "unless",
};

const AGG_OPS: Record<string, AggregateOp> = {
  Sum: "sum",
  Avg: "avg",
  Min: "min",
  Max: "max",
  Count: "count",
  Group: "group",
  Stddev: "stddev",
  Stdvar: "stdvar",
  Topk: "topk",
  Bottomk: "bottomk",
  Quantile: "quantile",
  CountValues: "count_values",
};

const MATCH_OPS: Record<string, MatchType> = { EqlSingle: "=", Neq: "!=", EqlRegex: "=~", NeqRegex: "!~" };

const DOC_TYPE: Record<ValueType, string> = {
  scalar: "scalar",
  vector: "instant vector",
  matrix: "range vector",
  string: "string",
};

/** Parses and type-checks a PromQL expression. Throws PromQLParseError (with position) on any problem. */
/**
 * Parses with an LRU cache of results: dashboards send the same expressions again and again, and a
 * parse (lezer, then the conversion) costs ~0.1–0.7 ms of the event loop per query, about as much as
 * reading a light query's samples. Safe to share: every AST node is frozen. The cache is bounded by
 * the characters it holds, not only by entries: a fleet's dashboards are one set of panels per VM,
 * each with the VM in its selector, so 512 entries (the bound before) were cycled through and missed
 * every time by 100 VMs' six panels (docs/performance.md, "Small queries: where a query's time goes").
 */
export function parse(input: string): Expr {
  if (input.length > PARSE_CACHE_MAX_INPUT) return parseUncached(input);
  const hit = parseCache.get(input);
  if (hit) {
    // Most recently used last, so the first key is the one to evict.
    parseCache.delete(input);
    parseCache.set(input, hit);
    return hit;
  }
  const expr = parseUncached(input);
  parseCache.set(input, expr);
  parseCacheChars += input.length;
  evictParseCache();
  return expr;
}

/** The longest expression cached (characters). */
const PARSE_CACHE_MAX_INPUT = 4096;
/**
 * Expressions kept and their characters: ~3,500 dashboard panels of ~150 characters (a few KB of
 * frozen AST each, so ~10 MB of heap at most), or 128 of the longest cached expressions.
 */
const defaultParseCacheCapacity = Object.freeze({ entries: 4096, chars: 512 * 1024 });
let parseCacheLimit: { entries: number; chars: number } = defaultParseCacheCapacity;
let parseCacheChars = 0;
const parseCache = new Map<string, Expr>();

function evictParseCache(): void {
  while (parseCache.size > parseCacheLimit.entries || parseCacheChars > parseCacheLimit.chars) {
    const oldest = parseCache.keys().next().value;
    if (oldest === undefined) break;
    parseCache.delete(oldest);
    parseCacheChars -= oldest.length;
  }
}

/**
 * The parse cache's bounds (entries, characters); with an argument, sets them first (for benches
 * and tests: bench/vm-query/small-ab.ts compares the bound before and after).
 */
export function parseCacheCapacity(set?: { entries?: number; chars?: number }): {
  entries: number;
  chars: number;
} {
  if (set) {
    parseCacheLimit = {
      entries: set.entries ?? defaultParseCacheCapacity.entries,
      chars: set.chars ?? defaultParseCacheCapacity.chars,
    };
    evictParseCache();
  }
  return { ...parseCacheLimit };
}

function parseUncached(input: string): Expr {
  const tree = lezer.parse(normalizeNumbers(input));
  let err: { from: number; to: number } | null = null;
  tree.iterate({
    enter(n) {
      if (err) return false;
      if (n.type.isError) err = { from: n.from, to: n.to };
    },
  });
  if (err !== null) {
    const { from, to } = err as { from: number; to: number };
    const near = input.slice(from, Math.max(to, from + 1)).trim();
    throw new PromQLParseError(
      from >= input.length
        ? "unexpected end of input"
        : `unexpected character or token ${near === "" ? "" : `"${near}" `}at position ${from}`,
      { start: from, end: Math.max(to, from) },
    );
  }
  const c = new Converter(input);
  const exprs = kids(tree.topNode);
  if (exprs.length === 0) throw new PromQLParseError("no expression found in input", { start: 0, end: 0 });
  if (exprs.length > 1) throw c.fail(exprs[1], "unexpected trailing input");
  const expr = c.expr(exprs[0]);
  c.check(expr);
  return expr;
}

/**
 * lezer-promql does not accept a trailing dot in numbers ("1."), Prometheus does. Replacing the
 * dot with a space keeps every position and the value. Strings and comments are left alone.
 */
function normalizeNumbers(input: string): string {
  let out = "";
  let i = 0;
  while (i < input.length) {
    const c = input[i];
    if (c === '"' || c === "'" || c === "`") {
      let j = i + 1;
      while (j < input.length && input[j] !== c) j += input[j] === "\\" && c !== "`" ? 2 : 1;
      out += input.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if (c === "#") {
      const j = input.indexOf("\n", i);
      const end = j < 0 ? input.length : j;
      out += input.slice(i, end);
      i = end;
      continue;
    }
    if (/[A-Za-z_:]/.test(c)) {
      const m = /^[A-Za-z0-9_:]+/.exec(input.slice(i))!;
      out += m[0];
      i += m[0].length;
      continue;
    }
    if (/\d/.test(c)) {
      const m = /^\d+\.(?![\dA-Za-z_])/.exec(input.slice(i));
      if (m) {
        out += `${m[0].slice(0, -1)} `;
        i += m[0].length;
        continue;
      }
    }
    out += c;
    i++;
  }
  return out;
}

/** Children of a node, comments left out. */
function kids(n: SyntaxNode): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  for (let c = n.firstChild; c !== null; c = c.nextSibling) if (c.name !== "LineComment") out.push(c);
  return out;
}

class Converter {
  /** Source spans of AST nodes, for error positions in the type checker. */
  readonly #pos = new WeakMap<object, { start: number; end: number }>();
  constructor(readonly input: string) {}

  fail(n: SyntaxNode | null, msg: string): PromQLParseError {
    return new PromQLParseError(msg, n ? { start: n.from, end: n.to } : { start: 0, end: this.input.length });
  }

  text(n: SyntaxNode): string {
    return this.input.slice(n.from, n.to);
  }

  #at<T extends Expr>(n: SyntaxNode, e: T): T {
    this.#pos.set(e, { start: n.from, end: n.to });
    return e;
  }

  err(e: Expr, msg: string): PromQLParseError {
    return new PromQLParseError(msg, this.#pos.get(e) ?? { start: 0, end: this.input.length });
  }

  expr(n: SyntaxNode): Expr {
    switch (n.name) {
      case "ParenExpr": {
        const k = kids(n);
        if (k.length !== 1) throw this.fail(n, "unexpected content in parentheses");
        return this.#at(n, Paren.create({ expr: this.expr(k[0]) }));
      }
      case "NumberDurationLiteral": {
        const v = parseNumber(this.text(n));
        if (v === null) throw this.fail(n, `bad number or duration syntax: "${this.text(n)}"`);
        return this.#at(n, NumberLiteral.create({ value: v }));
      }
      case "StringLiteral":
        return this.#at(n, StringLiteral.create({ value: this.string(n) }));
      case "UnaryExpr": {
        const [op, inner] = kids(n);
        if (op?.name !== "UnaryOp" || !inner) throw this.fail(n, "malformed unary expression");
        const sign = this.text(op).trim() === "-" ? "-" : "+";
        const e = this.expr(inner);
        if (e.kind === "NumberLiteral") {
          return this.#at(n, NumberLiteral.create({ value: sign === "-" ? -e.value : e.value }));
        }
        return this.#at(n, Unary.create({ op: sign, expr: e }));
      }
      case "BinaryExpr":
        return this.binary(n);
      case "AggregateExpr":
        return this.aggregate(n);
      case "FunctionCall":
        return this.call(n);
      case "VectorSelector":
        return this.#at(n, this.vectorSelector(n));
      case "MatrixSelector": {
        const [vs, dur] = kids(n);
        if (vs?.name !== "VectorSelector") throw this.fail(n, "ranges only allowed for vector selectors");
        const rangeMs = this.duration(dur);
        if (rangeMs <= 0) throw this.fail(dur, "range must be greater than 0");
        return this.#at(n, MatrixSelector.create({ vector: this.vectorSelector(vs), rangeMs }));
      }
      case "SubqueryExpr": {
        const [inner, range, step] = kids(n);
        const e = this.expr(inner);
        const rangeMs = this.duration(range);
        if (rangeMs <= 0) throw this.fail(range, "range must be greater than 0");
        const stepMs = step ? this.duration(step) : 0;
        if (step && stepMs <= 0) throw this.fail(step, "step must be greater than 0");
        return this.#at(n, Subquery.create({ expr: e, rangeMs, stepMs, offsetMs: 0, at: null }));
      }
      case "OffsetExpr": {
        const [inner, kw, dur] = kids(n);
        if (kw?.name !== "Offset" || !dur) throw this.fail(n, "malformed offset");
        const offsetMs = this.offsetDuration(dur);
        return this.#at(
          n,
          this.modify(inner, (e) => this.withOffset(inner, e, offsetMs)),
        );
      }
      case "StepInvariantExpr": {
        const [inner, at, arg] = kids(n);
        if (at?.name !== "At" || !arg) throw this.fail(n, "malformed @ modifier");
        let mod: AtModifier;
        if (arg.name === "AtModifierPreprocessors") {
          const which = arg.firstChild?.name;
          if (which === "AtStart") mod = "start";
          else if (which === "AtEnd") mod = "end";
          else throw this.fail(arg, "unknown @ modifier preprocessor");
        } else if (arg.name === "NumberDurationLiteral") {
          const v = parseNumber(this.text(arg));
          if (v === null || !Number.isFinite(v) || Math.abs(v * 1000) > Number.MAX_SAFE_INTEGER) {
            throw this.fail(arg, "timestamp out of bounds for @ modifier");
          }
          mod = { time: Math.round(v * 1000) };
        } else throw this.fail(arg, "unexpected @ modifier argument");
        return this.#at(
          n,
          this.modify(inner, (e) => this.withAt(inner, e, mod)),
        );
      }
      default:
        throw this.fail(n, `unsupported expression: ${n.name}`);
    }
  }

  /** Applies a modifier to the selector or subquery a modifier node wraps. */
  modify(inner: SyntaxNode, f: (e: Expr) => Expr): Expr {
    return f(this.expr(inner));
  }

  withOffset(n: SyntaxNode, e: Expr, offsetMs: number): Expr {
    // lezer may attach a postfix modifier to a unary or binary expression; Prometheus binds it
    // to the selector it follows.
    if (e.kind === "Unary") return Unary.create({ ...e, expr: this.withOffset(n, e.expr, offsetMs) });
    if (e.kind === "Binary") return Binary.create({ ...e, rhs: this.withOffset(n, e.rhs, offsetMs) });
    const bad =
      "offset modifier must be preceded by an instant vector selector or range vector selector or a subquery";
    switch (e.kind) {
      case "VectorSelector":
        if (e.offsetMs !== 0) throw this.fail(n, "offset may not be set multiple times");
        return VectorSelector.create({ ...e, offsetMs });
      case "MatrixSelector":
        if (e.vector.offsetMs !== 0) throw this.fail(n, "offset may not be set multiple times");
        return MatrixSelector.create({ ...e, vector: VectorSelector.create({ ...e.vector, offsetMs }) });
      case "Subquery":
        if (e.offsetMs !== 0) throw this.fail(n, "offset may not be set multiple times");
        return Subquery.create({ ...e, offsetMs });
      default:
        throw this.fail(n, bad);
    }
  }

  withAt(n: SyntaxNode, e: Expr, at: AtModifier): Expr {
    if (e.kind === "Unary") return Unary.create({ ...e, expr: this.withAt(n, e.expr, at) });
    if (e.kind === "Binary") return Binary.create({ ...e, rhs: this.withAt(n, e.rhs, at) });
    const bad =
      "@ modifier must be preceded by an instant vector selector or range vector selector or a subquery";
    switch (e.kind) {
      case "VectorSelector":
        if (e.at !== null) throw this.fail(n, "@ <timestamp> may not be set multiple times");
        return VectorSelector.create({ ...e, at });
      case "MatrixSelector":
        if (e.vector.at !== null) throw this.fail(n, "@ <timestamp> may not be set multiple times");
        return MatrixSelector.create({ ...e, vector: VectorSelector.create({ ...e.vector, at }) });
      case "Subquery":
        if (e.at !== null) throw this.fail(n, "@ <timestamp> may not be set multiple times");
        return Subquery.create({ ...e, at });
      default:
        throw this.fail(n, bad);
    }
  }

  string(n: SyntaxNode): string {
    const s = unquoteString(this.text(n));
    if (s === null) throw this.fail(n, `invalid string literal ${this.text(n)}`);
    return s;
  }

  duration(n: SyntaxNode | undefined): number {
    if (!n) throw this.fail(null, "missing duration");
    if (n.name !== "DurationExpr") throw this.fail(n, `unexpected ${n.name} in duration`);
    const k = kids(n);
    if (k.length !== 1 || k[0].name !== "NumberDurationLiteralInDurationContext") {
      throw this.fail(n, "duration expressions are not supported");
    }
    const ms = parseDurationMs(this.text(k[0]));
    if (ms === null) throw this.fail(n, `bad duration syntax: "${this.text(k[0])}"`);
    return ms;
  }

  offsetDuration(n: SyntaxNode): number {
    if (n.name !== "OffsetDurationExpr") throw this.fail(n, `unexpected ${n.name} in offset`);
    const k = kids(n);
    if (k.length === 2 && k[0].name === "UnaryOp") {
      const v = this.offsetDuration(k[1]);
      return this.text(k[0]).trim() === "-" ? -v : v;
    }
    if (k.length !== 1 || k[0].name !== "NumberDurationLiteralInDurationContext") {
      throw this.fail(n, "duration expressions are not supported");
    }
    const ms = parseDurationMs(this.text(k[0]));
    if (ms === null) throw this.fail(n, `bad duration syntax: "${this.text(k[0])}"`);
    return ms;
  }

  labelName(n: SyntaxNode): string {
    if (n.name === "LabelName") return this.text(n);
    if (n.name === "QuotedLabelName") {
      const s = n.firstChild;
      if (s?.name !== "StringLiteral") throw this.fail(n, "malformed quoted label name");
      return this.string(s);
    }
    throw this.fail(n, `unexpected ${n.name}, expected a label name`);
  }

  vectorSelector(n: SyntaxNode): VectorSelector {
    let name = "";
    const matchers: LabelMatcher[] = [];
    for (const k of kids(n)) {
      if (k.name === "Identifier") name = this.text(k);
      else if (k.name === "LabelMatchers") {
        for (const m of kids(k)) {
          if (m.name === "QuotedLabelName") {
            if (name !== "")
              throw this.fail(m, `metric name must not be set twice: "${name}" or "${this.labelName(m)}"`);
            name = this.labelName(m);
            continue;
          }
          if (m.name !== "UnquotedLabelMatcher" && m.name !== "QuotedLabelMatcher") {
            throw this.fail(m, `unexpected ${m.name} in label matchers`);
          }
          const [ln, op, val] = kids(m);
          const type = MATCH_OPS[op?.firstChild?.name ?? ""];
          if (!type || !val || val.name !== "StringLiteral") throw this.fail(m, "malformed label matcher");
          const value = this.string(val);
          if (type === "=~" || type === "!~") {
            const e = regexError(value);
            if (e !== null) throw this.fail(val, `invalid regular expression in label matcher: ${e}`);
          }
          matchers.push({ type, name: this.labelName(ln), value });
        }
      } else throw this.fail(k, `unexpected ${k.name} in vector selector`);
    }
    if (name !== "") {
      for (const m of matchers) {
        if (m.name === "__name__")
          throw this.fail(n, `metric name must not be set twice: "${name}" or "${m.value}"`);
      }
      matchers.unshift({ type: "=", name: "__name__", value: name });
    }
    const all = matchers.map((m) => Object.freeze(m));
    if (!all.some((m) => !matchesEmpty(m))) {
      throw this.fail(n, "vector selector must contain at least one non-empty matcher");
    }
    return VectorSelector.create({ name, matchers: Object.freeze(all), offsetMs: 0, at: null });
  }

  grouping(n: SyntaxNode): string[] {
    if (n.name !== "GroupingLabels") throw this.fail(n, `unexpected ${n.name}, expected grouping labels`);
    return kids(n).map((k) => this.labelName(k));
  }

  binary(n: SyntaxNode): Expr {
    const k = kids(n);
    if (k.length < 3) throw this.fail(n, "malformed binary expression");
    const opNode = k[1];
    const op = BINARY_OPS[opNode.name];
    if (!op) throw this.fail(opNode, `unsupported binary operator ${this.text(opNode)}`);
    let returnBool = false;
    let matching: { card: Cardinality; on: boolean; labels: string[]; include: string[] } | null = null;
    for (const mod of k.slice(2, -1)) {
      if (mod.name === "BoolModifier") returnBool = true;
      else if (mod.name === "MatchingModifierClause") {
        matching = { card: "one-to-one", on: false, labels: [], include: [] };
        const mk = kids(mod);
        for (let i = 0; i < mk.length; i++) {
          const c = mk[i];
          if (c.name === "On" || c.name === "Ignoring") {
            matching.on = c.name === "On";
            matching.labels = this.grouping(mk[++i]);
          } else if (c.name === "GroupLeft" || c.name === "GroupRight") {
            matching.card = c.name === "GroupLeft" ? "many-to-one" : "one-to-many";
            if (mk[i + 1]?.name === "GroupingLabels") matching.include = this.grouping(mk[++i]);
          } else throw this.fail(c, `unsupported vector matching modifier ${this.text(c)}`);
        }
      } else throw this.fail(mod, `unsupported binary modifier ${this.text(mod)}`);
    }
    let lhs = this.expr(k[0]);
    const rhs = this.expr(k[k.length - 1]);
    // lezer folds the sign into a number literal; Prometheus binds unary minus looser than ^.
    if (op === "^" && lhs.kind === "NumberLiteral" && /^\s*[-+]/.test(this.text(k[0]))) {
      const neg = /^\s*-/.test(this.text(k[0]));
      lhs = NumberLiteral.create({ value: neg ? -lhs.value : lhs.value });
      const inner = Binary.create({ op, lhs, rhs, returnBool, matching: null });
      return this.#at(n, neg ? Unary.create({ op: "-", expr: inner }) : inner);
    }
    const lt = typeOf(lhs);
    const rt = typeOf(rhs);
    let vm = null;
    if (lt === "vector" && rt === "vector") {
      const m = matching ?? { card: "one-to-one" as Cardinality, on: false, labels: [], include: [] };
      if (SET_OPS.has(op)) {
        if (m.card === "many-to-one" || m.card === "one-to-many") {
          throw this.fail(n, `no grouping allowed for "${op}" operation`);
        }
        m.card = "many-to-many";
      }
      vm = Object.freeze({ ...m, labels: Object.freeze(m.labels), include: Object.freeze(m.include) });
    } else if (matching && matching.labels.length > 0) {
      throw this.fail(n, "vector matching only allowed between instant vectors");
    }
    return this.#at(n, Binary.create({ op, lhs, rhs, returnBool, matching: vm }));
  }

  aggregate(n: SyntaxNode): Expr {
    let op: AggregateOp | undefined;
    let grouping: string[] = [];
    let without = false;
    let args: SyntaxNode[] = [];
    for (const k of kids(n)) {
      if (k.name === "AggregateOp") {
        op = AGG_OPS[k.firstChild?.name ?? ""];
        if (!op) throw this.fail(k, `unsupported aggregation operator ${this.text(k)}`);
      } else if (k.name === "AggregateModifier") {
        const [kw, labels] = kids(k);
        without = kw?.name === "Without";
        if (!labels) throw this.fail(k, "malformed grouping");
        grouping = this.grouping(labels);
      } else if (k.name === "FunctionCallBody") args = kids(k);
      else throw this.fail(k, `unexpected ${k.name} in aggregation`);
    }
    if (!op) throw this.fail(n, "missing aggregation operator");
    const hasParam = op === "topk" || op === "bottomk" || op === "quantile" || op === "count_values";
    const want = hasParam ? 2 : 1;
    if (args.length !== want) {
      throw this.fail(
        n,
        `wrong number of arguments for aggregate expression provided, expected ${want}, got ${args.length}`,
      );
    }
    const conv = args.map((a) => this.expr(a));
    return this.#at(
      n,
      Aggregate.create({
        op,
        expr: conv[conv.length - 1],
        param: hasParam ? conv[0] : null,
        grouping: Object.freeze(grouping),
        without,
      }),
    );
  }

  call(n: SyntaxNode): Expr {
    const [id, body] = kids(n);
    if (id?.name !== "FunctionIdentifier" || body?.name !== "FunctionCallBody")
      throw this.fail(n, "malformed call");
    const func = this.text(id);
    if (UNSUPPORTED_FUNCTIONS.has(func) || !functionSignature(func)) {
      throw this.fail(id, `unknown function with name "${func}"`);
    }
    const args = kids(body).map((a) => this.expr(a));
    return this.#at(n, Call.create({ func, args: Object.freeze(args) }));
  }

  /** Prometheus' checkAST: operand types, arities, modifiers. */
  check(e: Expr): void {
    switch (e.kind) {
      case "NumberLiteral":
      case "StringLiteral":
      case "VectorSelector":
        return;
      case "MatrixSelector":
        return;
      case "Paren":
        this.check(e.expr);
        return;
      case "Unary": {
        this.check(e.expr);
        const t = typeOf(e.expr);
        if (t !== "scalar" && t !== "vector") {
          throw this.err(e, "unary expression only allowed on expressions of type scalar or instant vector");
        }
        return;
      }
      case "Subquery": {
        this.check(e.expr);
        const t = typeOf(e.expr);
        if (t !== "scalar" && t !== "vector") {
          throw this.err(e, `subquery is only allowed on instant vector, got ${t} instead`);
        }
        return;
      }
      case "Aggregate": {
        this.check(e.expr);
        if (typeOf(e.expr) !== "vector") {
          throw this.err(
            e,
            `expected type instant vector in aggregation expression, got ${DOC_TYPE[typeOf(e.expr)]}`,
          );
        }
        if (e.param) {
          this.check(e.param);
          const want: ValueType = e.op === "count_values" ? "string" : "scalar";
          if (typeOf(e.param) !== want) {
            throw this.err(
              e,
              `expected type ${DOC_TYPE[want]} in aggregation parameter, got ${DOC_TYPE[typeOf(e.param)]}`,
            );
          }
        }
        return;
      }
      case "Binary": {
        this.check(e.lhs);
        this.check(e.rhs);
        const lt = typeOf(e.lhs);
        const rt = typeOf(e.rhs);
        if (e.returnBool && !COMPARISON_OPS.has(e.op)) {
          throw this.err(e, "bool modifier can only be used on comparison operators");
        }
        if (COMPARISON_OPS.has(e.op) && !e.returnBool && lt === "scalar" && rt === "scalar") {
          throw this.err(e, "comparisons between scalars must use BOOL modifier");
        }
        if ((lt !== "scalar" && lt !== "vector") || (rt !== "scalar" && rt !== "vector")) {
          throw this.err(e, "binary expression must contain only scalar and instant vector types");
        }
        if ((lt === "scalar" || rt === "scalar") && SET_OPS.has(e.op)) {
          throw this.err(e, `set operator "${e.op}" not allowed in binary scalar expression`);
        }
        if (e.matching?.on) {
          for (const l of e.matching.include) {
            if (e.matching.labels.includes(l)) {
              throw this.err(e, `label "${l}" must not occur in ON and GROUP clause at once`);
            }
          }
        }
        return;
      }
      case "Call": {
        const sig = functionSignature(e.func)!;
        const n = e.args.length;
        const want = sig.argTypes.length;
        if (sig.variadic === 0) {
          if (n !== want) {
            throw this.err(e, `expected ${want} argument(s) in call to "${e.func}", got ${n}`);
          }
        } else {
          const min = want - 1;
          if (n < min)
            throw this.err(e, `expected at least ${min} argument(s) in call to "${e.func}", got ${n}`);
          if (sig.variadic > 0 && n > min + sig.variadic) {
            throw this.err(
              e,
              `expected at most ${min + sig.variadic} argument(s) in call to "${e.func}", got ${n}`,
            );
          }
        }
        e.args.forEach((a, i) => {
          this.check(a);
          const t = sig.argTypes[Math.min(i, want - 1)];
          if (typeOf(a) !== t) {
            throw this.err(
              a,
              `expected type ${DOC_TYPE[t]} in call to function "${e.func}", got ${DOC_TYPE[typeOf(a)]}`,
            );
          }
        });
        return;
      }
      default: {
        const never: never = e;
        throw new PromQLParseError(`unsupported node ${(never as Expr).kind}`, { start: 0, end: 0 });
      }
    }
  }
}

/** True when a matcher accepts the empty string (so it cannot select by itself). */
export function matchesEmpty(m: LabelMatcher): boolean {
  switch (m.type) {
    case "=":
      return m.value === "";
    case "!=":
      return m.value !== "";
    case "=~":
      return emptyRegexMatch(m.value);
    case "!~":
      return !emptyRegexMatch(m.value);
  }
}

function emptyRegexMatch(pattern: string): boolean {
  return fullMatch(compileAnchored(pattern), "");
}
