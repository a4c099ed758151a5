/**
 * Label matchers compiled for index lookups, with Prometheus' semantics (model/labels/matcher.go and
 * tsdb/querier.go PostingsForMatchers): regexes are fully anchored, `.` matches newlines, an absent
 * label has the value "", and a matcher that matches "" also selects series without the label.
 * Regexes run on re2js (RE2 semantics: linear time, no backtracking), so a hostile user pattern such
 * as `(a+)+$` cannot stall the process.
 */
import { RE2JS } from "re2js";
import type { LabelMatcher } from "../storage/interface.ts";
import { InvalidMatcherError } from "./errors.ts";
import { intersect, merge, type PostingsList, subtract } from "./postings.ts";

/** What matcher evaluation needs from an index (head or block). */
export interface PostingsIndex {
  /** Distinct values of a label name (any order). */
  labelValues(name: string): Iterable<string>;
  /** Sorted ids of series with name=value; empty when none. */
  postings(name: string, value: string): PostingsList;
  /** Sorted ids of every series. */
  allPostings(): PostingsList;
}

export interface CompiledMatcher {
  readonly name: string;
  readonly type: LabelMatcher["type"];
  readonly value: string;
  /** Whether the (possibly absent = "") label value satisfies the matcher. */
  matches(v: string): boolean;
  /** Literal values that are the only ones a positive matcher can match, when known (fast path). */
  readonly literals: readonly string[] | undefined;
}

const META = /[\\.+*?()|[\]{}^$]/;
const regexCache = new Map<string, RE2JS>();
const REGEX_CACHE_MAX = 512;

function compileRegex(src: string): RE2JS {
  let re = regexCache.get(src);
  if (re) return re;
  try {
    re = RE2JS.compile(`^(?:${src})$`, RE2JS.DOTALL);
  } catch (e) {
    throw new InvalidMatcherError(`regex ${JSON.stringify(src)}: ${(e as Error).message}`);
  }
  if (regexCache.size >= REGEX_CACHE_MAX) regexCache.delete(regexCache.keys().next().value as string);
  regexCache.set(src, re);
  return re;
}

/**
 * Prometheus' setOptimized fast paths: a regex that is a literal or an alternation of literals
 * becomes a set lookup; `.*` and `.+` need no regex at all.
 */
function regexPredicate(src: string): { test: (v: string) => boolean; literals?: string[] } {
  if (src === ".*") return { test: () => true };
  if (src === ".+") return { test: (v) => v.length > 0 };
  const parts = src.split("|");
  if (parts.every((p) => !META.test(p))) {
    const set = new Set(parts);
    return { test: (v) => set.has(v), literals: [...set] };
  }
  const re = compileRegex(src);
  // Each distinct label value is tested once per query: values repeat across head and blocks.
  const memo = new Map<string, boolean>();
  return {
    test: (v) => {
      let m = memo.get(v);
      if (m === undefined) {
        m = re.matches(v);
        memo.set(v, m);
      }
      return m;
    },
  };
}

/** Compiles matchers once per query; throws InvalidMatcherError for a bad regex. */
export function compileMatchers(ms: readonly LabelMatcher[]): CompiledMatcher[] {
  return ms.map((m) => {
    switch (m.type) {
      case "=":
        return { ...base(m), matches: (v: string) => v === m.value, literals: [m.value] };
      case "!=":
        return { ...base(m), matches: (v: string) => v !== m.value, literals: undefined };
      case "=~": {
        const p = regexPredicate(m.value);
        return { ...base(m), matches: p.test, literals: p.literals };
      }
      case "!~": {
        const p = regexPredicate(m.value);
        return { ...base(m), matches: (v: string) => !p.test(v), literals: undefined };
      }
      default:
        throw new InvalidMatcherError(`unknown match type ${String((m as LabelMatcher).type)}`);
    }
  });
}

function base(m: LabelMatcher): { name: string; type: LabelMatcher["type"]; value: string } {
  return { name: m.name, type: m.type, value: m.value };
}

function inverse(m: CompiledMatcher): CompiledMatcher {
  const type = ({ "=": "!=", "!=": "=", "=~": "!~", "!~": "=~" } as const)[m.type];
  const lit = m.type === "!=" ? [m.value] : undefined;
  return { name: m.name, type, value: m.value, matches: (v) => !m.matches(v), literals: lit };
}

/** Postings of series whose label `m.name` is present with a value m matches. */
function postingsFor(ix: PostingsIndex, m: CompiledMatcher): PostingsList {
  if (m.literals) {
    const lists = m.literals.filter((v) => v !== "").map((v) => ix.postings(m.name, v));
    return lists.length === 1 ? lists[0] : merge(lists);
  }
  const lists: PostingsList[] = [];
  for (const v of ix.labelValues(m.name)) if (m.matches(v)) lists.push(ix.postings(m.name, v));
  return merge(lists);
}

/** Postings of series whose label `m.name` is present with a value m does NOT match. */
function inversePostingsFor(ix: PostingsIndex, m: CompiledMatcher): PostingsList {
  const lists: PostingsList[] = [];
  for (const v of ix.labelValues(m.name)) if (!m.matches(v)) lists.push(ix.postings(m.name, v));
  return merge(lists);
}

/** Sorted ids of the series in `ix` matching all matchers (an empty list selects every series). */
export function postingsForMatchers(ix: PostingsIndex, ms: readonly CompiledMatcher[]): PostingsList {
  const its: PostingsList[] = [];
  const notIts: PostingsList[] = [];
  // Positive matchers with several literal values (`__name__=~"a|b|c"`): their lists are only
  // merged when nothing narrower exists; otherwise the narrow candidates are tested against them.
  const anyOf: PostingsList[][] = [];
  for (const m of ms) {
    const matchesEmpty = m.matches("");
    const isNot = m.type === "!=" || m.type === "!~";
    if (isNot && matchesEmpty) {
      // l!="foo", l!~"bar": drop the series whose value the positive form matches.
      notIts.push(postingsFor(ix, inverse(m)));
    } else if (isNot) {
      // l!="", l!~"": the label must be present with a value the positive form rejects.
      its.push(inversePostingsFor(ix, inverse(m)));
    } else if (matchesEmpty) {
      // l="", l=~"|foo": series without l are in; drop those whose value m rejects.
      notIts.push(inversePostingsFor(ix, m));
    } else if (m.literals && m.literals.length > 1) {
      anyOf.push(m.literals.filter((v) => v !== "").map((v) => ix.postings(m.name, v)));
    } else {
      its.push(postingsFor(ix, m));
    }
  }
  let pos: PostingsList;
  if (its.length === 0 && anyOf.length === 0) pos = ix.allPostings();
  else if (its.length === 0) pos = intersect(anyOf.map(merge));
  else {
    pos = its.length === 1 ? its[0] : intersect(its);
    for (const lists of anyOf) {
      let total = 0;
      for (const l of lists) total += l.length;
      pos = total > pos.length * 8 ? keepIfInAny(pos, lists) : intersect([pos, merge(lists)]);
    }
  }
  return notIts.length === 0 ? pos : subtract(pos, merge(notIts));
}

/** The ids of `ids` (sorted) present in at least one of `lists` (each sorted); binary searches. */
function keepIfInAny(ids: PostingsList, lists: readonly PostingsList[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    const x = ids[i];
    for (const l of lists) {
      if (contains(l, x)) {
        out.push(x);
        break;
      }
    }
  }
  return out;
}

function contains(a: PostingsList, x: number): boolean {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo < a.length && a[lo] === x;
}
