/**
 * Parser for Prometheus' promqltest script language (`load`, `clear`, `eval ...`), v3.5 flavour
 * with the legacy `eval_fail` / `eval_warn` / `eval_info` / `eval_ordered` forms and `expect` lines.
 */

import { parseDurationMs, parseNumber, unquoteString } from "../../src/promql/lex.ts";
import type { Labels } from "../../src/storage/interface.ts";
import { labelsFromRecord } from "../../src/storage/interface.ts";

/** A sample value in a series description; `null` = omitted (`_`), "stale" = staleness marker. */
export type SeqValue = number | "stale" | null;

export interface SeriesDesc {
  readonly labels: Labels;
  readonly values: SeqValue[];
  /** True when the line holds native histogram samples (`{{...}}`), which are out of scope. */
  readonly histogram: boolean;
}

export interface LoadCmd {
  readonly kind: "load";
  readonly line: number;
  readonly intervalMs: number;
  readonly series: SeriesDesc[];
  readonly nhcb: boolean;
}

export interface Expectation {
  readonly kind: "fail" | "warn" | "info" | "no_warn" | "no_info" | "ordered";
  readonly msg?: string;
  readonly regex?: string;
}

export interface EvalCmd {
  readonly kind: "eval";
  readonly line: number;
  readonly expr: string;
  readonly instant: boolean;
  readonly startMs: number;
  readonly endMs: number;
  readonly stepMs: number;
  readonly expects: Expectation[];
  /** Expected series (labels null = a bare scalar line); values per step for range evals. */
  readonly results: { labels: Labels | null; values: SeqValue[]; histogram: boolean }[];
}

export type Command = LoadCmd | EvalCmd | { readonly kind: "clear"; readonly line: number };

export class ScriptError extends Error {}

const isIndented = (l: string) => /^\s/.test(l);

export function parseScript(text: string): Command[] {
  const lines = text.split("\n");
  const cmds: Command[] = [];
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const body: { text: string; line: number }[] = [];
    while (
      i + 1 < lines.length &&
      lines[i + 1].trim() !== "" &&
      (isIndented(lines[i + 1]) || lines[i + 1].trim().startsWith("#"))
    ) {
      i++;
      if (!lines[i].trim().startsWith("#")) body.push({ text: lines[i].trim(), line: i + 1 });
    }
    const lineNo = i + 1 - body.length;
    const lm = /^(load|load_with_nhcb)\s+(\S+)$/.exec(line);
    const em = /^(eval|eval_fail|eval_warn|eval_info|eval_ordered)\s+(.*)$/.exec(line);
    if (line === "clear") cmds.push({ kind: "clear", line: lineNo });
    else if (lm) {
      const m = lm;
      const intervalMs = parseDurationMs(m[2]);
      if (intervalMs === null) throw new ScriptError(`line ${lineNo}: bad interval ${m[2]}`);
      cmds.push({
        kind: "load",
        line: lineNo,
        intervalMs,
        nhcb: m[1] === "load_with_nhcb",
        series: body.map((b) => parseSeriesLine(b.text, b.line)),
      });
    } else if (em) {
      cmds.push(parseEval(em[1], em[2], body, lineNo));
    } else throw new ScriptError(`line ${lineNo}: unknown command: ${line}`);
  }
  return cmds;
}

function parseEval(kw: string, rest: string, body: { text: string; line: number }[], line: number): EvalCmd {
  const expects: Expectation[] = [];
  if (kw === "eval_fail") expects.push({ kind: "fail" });
  if (kw === "eval_warn") expects.push({ kind: "warn" });
  if (kw === "eval_info") expects.push({ kind: "info" });
  if (kw === "eval_ordered") expects.push({ kind: "ordered" });
  const im = /^instant\s+at\s+(\S+)\s+(.*)$/.exec(rest);
  const rm = /^range\s+from\s+(\S+)\s+to\s+(\S+)\s+step\s+(\S+)\s+(.*)$/.exec(rest);
  let instant: boolean;
  let startMs: number;
  let endMs: number;
  let stepMs = 0;
  let expr: string;
  if (im) {
    const m = im;
    instant = true;
    startMs = endMs = dur(m[1], line);
    expr = m[2];
  } else if (rm) {
    const m = rm;
    instant = false;
    startMs = dur(m[1], line);
    endMs = dur(m[2], line);
    stepMs = dur(m[3], line);
    expr = m[4];
  } else throw new ScriptError(`line ${line}: bad eval: ${rest}`);
  const results: EvalCmd["results"] = [];
  for (const b of body) {
    const e = /^expect\s+(fail|warn|info|no_warn|no_info|ordered)(?:\s+(msg|regex):\s*(.*))?$/.exec(b.text);
    const fm = /^expected_fail_message\s+(.*)$/.exec(b.text);
    const fr = /^expected_fail_regexp\s+(.*)$/.exec(b.text);
    if (e) {
      const x: { kind: Expectation["kind"]; msg?: string; regex?: string } = {
        kind: e[1] as Expectation["kind"],
      };
      if (e[2] === "msg") x.msg = e[3].trim();
      if (e[2] === "regex") x.regex = e[3].trim();
      expects.push(x);
    } else if (fm) {
      expects.push({ kind: "fail", msg: fm[1].trim() });
    } else if (fr) {
      expects.push({ kind: "fail", regex: fr[1].trim() });
    } else if (/^expect\b/.test(b.text)) {
      throw new ScriptError(`line ${b.line}: unsupported expectation ${b.text}`);
    } else if (/^[-+]?(\d|\.\d|Inf|NaN|inf|nan)/.test(b.text) && !/\s/.test(b.text.trim())) {
      results.push({ labels: null, values: parseValues(b.text, b.line), histogram: false });
    } else {
      const s = parseSeriesLine(b.text, b.line);
      results.push({ labels: s.labels, values: s.values, histogram: s.histogram });
    }
  }
  return { kind: "eval", line, expr, instant, startMs, endMs, stepMs, expects, results };
}

function dur(s: string, line: number): number {
  const v = parseDurationMs(s);
  if (v === null) throw new ScriptError(`line ${line}: bad duration ${s}`);
  return v;
}

/** `name{a="b"} 1+2x3 _ stale` -> labels and expanded values. */
export function parseSeriesLine(text: string, line: number): SeriesDesc {
  let i = 0;
  const rec: Record<string, string> = {};
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(text);
  if (name) {
    rec.__name__ = name[0];
    i = name[0].length;
  }
  if (text[i] === "{") {
    i++;
    for (;;) {
      while (/[\s,]/.test(text[i] ?? "")) i++;
      if (text[i] === "}") {
        i++;
        break;
      }
      let key: string;
      if (text[i] === '"') {
        const end = stringEnd(text, i);
        key = unquoteString(text.slice(i, end)) ?? "";
        i = end;
      } else {
        const k = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
        if (!k) throw new ScriptError(`line ${line}: bad label in ${text}`);
        key = k[0];
        i += key.length;
      }
      while (text[i] === " ") i++;
      if (text[i] !== "=") {
        // A bare quoted name is the metric name.
        rec.__name__ = key;
        continue;
      }
      i++;
      while (text[i] === " ") i++;
      const end = stringEnd(text, i);
      const v = unquoteString(text.slice(i, end));
      if (v === null) throw new ScriptError(`line ${line}: bad label value in ${text}`);
      rec[key] = v;
      i = end;
    }
  }
  const rest = text.slice(i).trim();
  const histogram = rest.includes("{{");
  return { labels: labelsFromRecord(rec), values: histogram ? [] : parseValues(rest, line), histogram };
}

function stringEnd(text: string, i: number): number {
  const q = text[i];
  if (q !== '"' && q !== "'" && q !== "`")
    throw new ScriptError(`expected a quoted string at ${i} in ${text}`);
  let j = i + 1;
  while (j < text.length && text[j] !== q) j += text[j] === "\\" && q !== "`" ? 2 : 1;
  return j + 1;
}

const NUM = "(?:[+-]?(?:Inf|inf|NaN|nan|0x[0-9a-fA-F]+|(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?))";
const EXPAND_RE = new RegExp(`^(${NUM})(?:([+-])(${NUM}))?x(\\d+)$`);

export function parseValues(text: string, line: number): SeqValue[] {
  const out: SeqValue[] = [];
  for (const tok of text.split(/\s+/).filter((t) => t !== "")) {
    if (tok === "_") out.push(null);
    else if (tok === "stale") out.push("stale");
    else if (/^_x\d+$/.test(tok)) for (let k = 0; k < Number(tok.slice(2)); k++) out.push(null);
    else {
      const m = EXPAND_RE.exec(tok);
      if (m) {
        const start = parseNumber(m[1])!;
        let inc = m[2] ? parseNumber(m[3])! : 0;
        if (m[2] === "-") inc = -inc;
        const times = Number(m[4]);
        let cur = start;
        for (let k = 0; k <= times; k++) {
          out.push(cur);
          cur += inc;
        }
        continue;
      }
      const v = parseNumber(tok);
      if (v === null || /[smhdwy]$/.test(tok)) throw new ScriptError(`line ${line}: bad value ${tok}`);
      out.push(v);
    }
  }
  return out;
}
