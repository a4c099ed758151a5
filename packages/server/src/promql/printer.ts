/** AST -> PromQL text. `parse(print(e))` yields a tree equal to `e`. */
import type { AtModifier, Expr, VectorSelector } from "./ast.ts";
import { formatDuration, formatFloatG, quoteString } from "./lex.ts";

const IDENT_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// Words the grammar reserves; a label or metric named like one must be quoted to re-parse.
const KEYWORDS = new Set([
  "and",
  "or",
  "unless",
  "atan2",
  "bool",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "offset",
  "by",
  "without",
  "inf",
  "nan",
  "start",
  "end",
]);

/** Prints an expression as PromQL (parenthesised as written: Paren nodes are kept). */
export function print(e: Expr): string {
  switch (e.kind) {
    case "NumberLiteral":
      return formatFloatG(e.value);
    case "StringLiteral":
      return quoteString(e.value);
    case "Paren":
      return `(${print(e.expr)})`;
    case "Unary":
      return `${e.op}${print(e.expr)}`;
    case "VectorSelector":
      return vectorSelector(e) + modifiers(e.offsetMs, e.at);
    case "MatrixSelector":
      return `${vectorSelector(e.vector)}[${formatDuration(e.rangeMs)}]${modifiers(e.vector.offsetMs, e.vector.at)}`;
    case "Subquery":
      return `${print(e.expr)}[${formatDuration(e.rangeMs)}:${e.stepMs ? formatDuration(e.stepMs) : ""}]${modifiers(e.offsetMs, e.at)}`;
    case "Call":
      return `${e.func}(${e.args.map(print).join(", ")})`;
    case "Aggregate": {
      const g =
        e.grouping.length > 0 || e.without
          ? ` ${e.without ? "without" : "by"} (${e.grouping.map(labelName).join(", ")})`
          : "";
      const args = e.param ? `${print(e.param)}, ${print(e.expr)}` : print(e.expr);
      return `${e.op}${g} (${args})`;
    }
    case "Binary": {
      let mod = e.returnBool ? " bool" : "";
      const m = e.matching;
      if (m) {
        if (m.on || m.labels.length > 0)
          mod += ` ${m.on ? "on" : "ignoring"} (${m.labels.map(labelName).join(", ")})`;
        if (m.card === "many-to-one" || m.card === "one-to-many") {
          mod += ` ${m.card === "many-to-one" ? "group_left" : "group_right"} (${m.include.map(labelName).join(", ")})`;
        }
      }
      return `${operand(e.lhs, e.op === "^")} ${e.op}${mod} ${print(e.rhs)}`;
    }
  }
}

// The AST keeps the user's parentheses, so operands print as they came; only a signed literal
// on the left of ^ would re-associate, so it gets explicit parentheses.
function operand(e: Expr, pow: boolean): string {
  const s = print(e);
  return pow && e.kind === "NumberLiteral" && /^-/.test(s) ? `(${s})` : s;
}

function labelName(n: string): string {
  return LABEL_RE.test(n) && !KEYWORDS.has(n.toLowerCase()) ? n : quoteString(n);
}

function vectorSelector(vs: VectorSelector): string {
  const ms = vs.matchers.filter(
    (m) => !(vs.name !== "" && m.name === "__name__" && m.type === "=" && m.value === vs.name),
  );
  const nameOk = vs.name !== "" && IDENT_RE.test(vs.name) && !KEYWORDS.has(vs.name.toLowerCase());
  const parts = ms.map((m) => `${labelName(m.name)}${m.type}${quoteString(m.value)}`);
  if (vs.name !== "" && !nameOk) parts.unshift(quoteString(vs.name));
  const head = nameOk ? vs.name : "";
  return parts.length > 0 || head === "" ? `${head}{${parts.join(", ")}}` : head;
}

function modifiers(offsetMs: number, at: AtModifier | null): string {
  let s = "";
  if (at !== null)
    s += at === "start" ? " @ start()" : at === "end" ? " @ end()" : ` @ ${formatFloatG(at.time / 1000)}`;
  if (offsetMs !== 0) s += ` offset ${offsetMs < 0 ? "-" : ""}${formatDuration(Math.abs(offsetMs))}`;
  return s;
}
