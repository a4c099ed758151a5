/**
 * A small in-memory Queryable for tests and the corpus runner: series are appended whole (or
 * sample by sample) and selected with the same matcher semantics as the real store.
 */

import { labelsKey } from "../src/promql/engine/labels.ts";
import { compileAnchored, fullMatch } from "../src/promql/regex.ts";
import {
  isStaleNaNValue,
  type LabelMatcher,
  type Labels,
  type Querier,
  type Queryable,
  type SeriesData,
  writeStaleMarker,
} from "../src/storage/interface.ts";

interface MemSeries {
  labels: Labels;
  ts: number[];
  vs: number[];
  // Plain JS arrays may canonicalise NaN payloads, so staleness markers are kept as a flag.
  stale: boolean[];
}

/** Matcher semantics shared with the TSDB: absent labels read as "". */
export function matches(m: LabelMatcher, value: string): boolean {
  switch (m.type) {
    case "=":
      return value === m.value;
    case "!=":
      return value !== m.value;
    case "=~":
      return fullMatch(compileAnchored(m.value), value);
    case "!~":
      return !fullMatch(compileAnchored(m.value), value);
  }
}

export class MemStorage implements Queryable {
  readonly #series = new Map<string, MemSeries>();
  #sorted: MemSeries[] | null = null;

  /** Appends a staleness marker. */
  appendStale(labels: Labels, tMs: number): void {
    this.#put(labels, tMs, Number.NaN, true);
  }

  /** Appends one sample (a value carrying the staleness-marker bits counts as a marker). */
  append(labels: Labels, tMs: number, value: number): void {
    this.#put(labels, tMs, value, isStaleNaNValue(value));
  }

  #put(labels: Labels, tMs: number, value: number, stale: boolean): void {
    const k = labelsKey(labels);
    let s = this.#series.get(k);
    if (!s) {
      s = { labels, ts: [], vs: [], stale: [] };
      this.#series.set(k, s);
      this.#sorted = null;
    }
    const last = s.ts.length - 1;
    if (last >= 0 && s.ts[last] >= tMs) {
      // Keep ascending order; a same-timestamp write replaces the value.
      let i = s.ts.length;
      while (i > 0 && s.ts[i - 1] > tMs) i--;
      if (i > 0 && s.ts[i - 1] === tMs) {
        s.vs[i - 1] = value;
        s.stale[i - 1] = stale;
        return;
      }
      s.ts.splice(i, 0, tMs);
      s.vs.splice(i, 0, value);
      s.stale.splice(i, 0, stale);
      return;
    }
    s.ts.push(tMs);
    s.vs.push(value);
    s.stale.push(stale);
  }

  clear(): void {
    this.#series.clear();
    this.#sorted = null;
  }

  querier(): Querier {
    if (this.#sorted === null) {
      this.#sorted = [...this.#series.values()].sort((a, b) =>
        labelsKey(a.labels) < labelsKey(b.labels) ? -1 : 1,
      );
    }
    const all = this.#sorted;
    const selectSeries = (matchers: readonly LabelMatcher[]) =>
      all.filter((s) =>
        matchers.every((m) => matches(m, s.labels.find((l) => l.name === m.name)?.value ?? "")),
      );
    return {
      select(matchers, mint, maxt): SeriesData[] {
        const out: SeriesData[] = [];
        for (const s of selectSeries(matchers)) {
          let a = 0;
          while (a < s.ts.length && s.ts[a] < mint) a++;
          let b = a;
          while (b < s.ts.length && s.ts[b] <= maxt) b++;
          if (b === a) continue;
          // Copy through Float64Array so staleness-marker NaN bits survive.
          const values = new Float64Array(b - a);
          for (let i = a; i < b; i++) {
            if (s.stale[i]) writeStaleMarker(values, i - a);
            else values[i - a] = s.vs[i];
          }
          out.push({ labels: s.labels, timestamps: Float64Array.from(s.ts.slice(a, b)), values });
        }
        return out;
      },
      labelNames(matchers) {
        const names = new Set<string>();
        for (const s of matchers.length ? selectSeries(matchers) : all)
          for (const l of s.labels) names.add(l.name);
        return [...names].sort();
      },
      labelValues(name, matchers) {
        const vals = new Set<string>();
        for (const s of matchers.length ? selectSeries(matchers) : all) {
          const v = s.labels.find((l) => l.name === name)?.value;
          if (v) vals.add(v);
        }
        return [...vals].sort();
      },
    };
  }
}
