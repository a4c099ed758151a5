/** Label-set helpers for the engine: stable string keys (hash once), signatures, edits. */
import type { Label, Labels } from "../../storage/interface.ts";

const SEP = "\xff";

/** A stable key for a whole label set (labels are sorted, so equal sets give equal keys). */
export function labelsKey(ls: Labels): string {
  let s = "";
  for (const l of ls) s += l.name + SEP + l.value + SEP;
  return s;
}

/** Key over only the named labels (`on(...)`, `by(...)`); `names` must be sorted. */
export function keyOn(ls: Labels, names: readonly string[]): string {
  let s = "";
  for (const n of names) {
    let v = "";
    for (const l of ls) {
      if (l.name === n) {
        v = l.value;
        break;
      }
    }
    s += v + SEP;
  }
  return s;
}

/** Key over all labels except the named ones (`ignoring(...)`, `without(...)`). */
export function keyWithout(ls: Labels, names: ReadonlySet<string>): string {
  let s = "";
  for (const l of ls) if (!names.has(l.name)) s += l.name + SEP + l.value + SEP;
  return s;
}

export function getLabel(ls: Labels, name: string): string {
  for (const l of ls) if (l.name === name) return l.value;
  return "";
}

export function dropMetricName(ls: Labels): Labels {
  return ls.some((l) => l.name === "__name__") ? ls.filter((l) => l.name !== "__name__") : ls;
}

export function keepOnly(ls: Labels, names: ReadonlySet<string>): Labels {
  return ls.filter((l) => names.has(l.name));
}

export function without(ls: Labels, names: ReadonlySet<string>): Labels {
  return ls.filter((l) => !names.has(l.name));
}

/** Sets (or with "" deletes) one label, keeping the set sorted. Returns a new array. */
export function setLabel(ls: Labels, name: string, value: string): Labels {
  const out: Label[] = [];
  let done = false;
  for (const l of ls) {
    if (!done && l.name >= name) {
      if (value !== "") out.push({ name, value });
      done = true;
      if (l.name === name) continue;
    }
    out.push(l);
  }
  if (!done && value !== "") out.push({ name, value });
  return out;
}

/** Prometheus-style text of a label set: `{a="1", b="2"}` (for error messages). */
export function labelsString(ls: Labels): string {
  return `{${ls.map((l) => `${l.name}=${JSON.stringify(l.value)}`).join(", ")}}`;
}

export function compareLabels(a: Labels, b: Labels): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i].name !== b[i].name) return a[i].name < b[i].name ? -1 : 1;
    if (a[i].value !== b[i].value) return a[i].value < b[i].value ? -1 : 1;
  }
  return a.length - b.length;
}
