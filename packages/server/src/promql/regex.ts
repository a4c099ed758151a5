/** RE2-semantics regexes (re2js) with a small compile cache; every user-supplied regex goes through here. */
import { RE2JS } from "re2js";

export type Regex = RE2JS;

const cache = new Map<string, RE2JS>();
const CACHE_MAX = 1000;

/**
 * Compiles `pattern` fully anchored with `.` matching newlines, as Prometheus does
 * (`^(?s:pattern)$`). Throws the re2js syntax error for an invalid pattern.
 */
export function compileAnchored(pattern: string): RE2JS {
  let re = cache.get(pattern);
  if (re === undefined) {
    re = RE2JS.compile(`^(?s:${pattern})$`);
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string);
    cache.set(pattern, re);
  }
  return re;
}

/** True when the anchored regex matches all of `s`. */
export function fullMatch(re: RE2JS, s: string): boolean {
  return re.matcher(s).matches();
}

/** Error text of a failed compile, or null when the pattern is valid. */
export function regexError(pattern: string): string | null {
  try {
    compileAnchored(pattern);
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}
