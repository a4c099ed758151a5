/**
 * Request parameters as Prometheus reads them (web/api/v1/api.go): URL query and form body merged
 * (form first, as Go's Request.FormValue), times as float seconds or RFC 3339, durations as float
 * seconds or Prometheus durations (`1h30m`), `match[]` repeated.
 */
import { parse, type VectorSelector } from "../promql/index.ts";
import type { LabelMatcher } from "../storage/interface.ts";
import { badParam } from "./errors.ts";

type Raw = Record<string, string | string[] | undefined> | undefined | null;

/** Values of one request: body (form) first, then the URL query. */
export class Params {
  readonly #values = new Map<string, string[]>();
  constructor(...sources: unknown[]) {
    for (const src of sources as Raw[]) {
      if (!src || typeof src !== "object") continue;
      for (const [k, v] of Object.entries(src)) {
        if (v === undefined) continue;
        const list = this.#values.get(k) ?? [];
        for (const x of Array.isArray(v) ? v : [v]) if (typeof x === "string") list.push(x);
        this.#values.set(k, list);
      }
    }
  }
  /** The first value, or undefined when absent. An empty value counts as absent, as in Prometheus. */
  get(name: string): string | undefined {
    const v = this.#values.get(name)?.[0];
    return v === undefined || v === "" ? undefined : v;
  }
  all(name: string): string[] {
    return this.#values.get(name) ?? [];
  }
}

const FLOAT = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** A timestamp parameter in ms (float seconds rounded to the ms, or RFC 3339); `fallback` when absent. */
export function parseTime(p: Params, name: string, fallback: number): number {
  const s = p.get(name);
  if (s === undefined) return fallback;
  if (FLOAT.test(s)) {
    const ms = Math.round(Number(s) * 1000);
    if (Number.isSafeInteger(ms)) return ms;
  } else if (RFC3339.test(s)) {
    const ms = Date.parse(s);
    if (Number.isFinite(ms)) return ms;
  }
  throw badParam(name, `cannot parse "${s.slice(0, 64)}" to a valid timestamp`);
}

const UNITS: readonly [string, number][] = [
  ["y", 365 * 86_400_000],
  ["w", 7 * 86_400_000],
  ["d", 86_400_000],
  ["h", 3_600_000],
  ["m", 60_000],
  ["s", 1_000],
  ["ms", 1],
];
const DURATION = /^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$/;

/** A duration in ms: float seconds, or `1h30m`-style with units y w d h m s ms in that order. */
export function parseDurationMs(s: string): number | undefined {
  if (FLOAT.test(s)) {
    const ms = Number(s) * 1000;
    return Number.isFinite(ms) && Math.abs(ms) <= 9.2e15 ? Math.round(ms) : undefined;
  }
  const m = DURATION.exec(s);
  if (!m || s === "") return undefined;
  let ms = 0;
  UNITS.forEach(([, unit], i) => {
    const v = m[2 + 2 * i];
    if (v !== undefined) ms += Number(v) * unit;
  });
  return Number.isSafeInteger(ms) ? ms : undefined;
}

export function parseDurationParam(p: Params, name: string): number | undefined {
  const s = p.get(name);
  if (s === undefined) return undefined;
  const ms = parseDurationMs(s);
  if (ms === undefined) throw badParam(name, `cannot parse "${s.slice(0, 64)}" to a valid duration`);
  return ms;
}

/** `limit` as Prometheus 3 reads it: absent or 0 = no limit; negative or not a number = 400. */
export function parseLimit(p: Params, name = "limit"): number {
  const s = p.get(name);
  if (s === undefined) return 0;
  if (!/^[+-]?\d+$/.test(s)) throw badParam(name, `cannot parse "${s.slice(0, 64)}" to a valid limit`);
  const n = Number(s);
  if (n < 0) throw badParam(name, "limit must be non-negative");
  return n;
}

/**
 * The `match[]` values as matcher sets. Each must be a plain series selector (`up{job="x"}`), as
 * Prometheus' ParseMetricSelector requires; `maxBytes` bounds each one.
 */
export function parseMatchers(p: Params, maxBytes: number): LabelMatcher[][] {
  return p.all("match[]").map((s) => {
    if (Buffer.byteLength(s) > maxBytes)
      throw badParam("match[]", `selector longer than ${maxBytes} bytes [EXPRESSION_TOO_LONG]`);
    let e: ReturnType<typeof parse>;
    try {
      e = parse(s);
    } catch (err) {
      throw badParam("match[]", err instanceof Error ? err.message : "does not parse");
    }
    if (e.kind !== "VectorSelector" || (e as VectorSelector).offsetMs !== 0 || e.at !== null)
      throw badParam("match[]", `"${s.slice(0, 64)}" is not a series selector`);
    return [...e.matchers];
  });
}
