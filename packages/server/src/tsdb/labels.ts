/** Label-set validation, ordering and interning helpers. */
import type { Label, Labels } from "../storage/interface.ts";
import { InvalidLabelsError } from "./errors.ts";

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

/**
 * Returns the label set sorted by name with empty values dropped (Prometheus treats an empty value as
 * an absent label); throws InvalidLabelsError for a bad name, duplicate names or a missing/invalid
 * `__name__`. Returns the input itself when it is already canonical.
 */
export function canonicalLabels(labels: Labels): Labels {
  let canonical = true;
  for (let i = 0; i < labels.length; i++) {
    const l = labels[i];
    if (l.value === "" || (i > 0 && labels[i - 1].name >= l.name)) canonical = false;
  }
  const out = canonical ? labels : labels.filter((l) => l.value !== "").sort((a, b) => cmp(a.name, b.name));
  let hasName = false;
  for (let i = 0; i < out.length; i++) {
    const { name, value } = out[i];
    if (typeof name !== "string" || !LABEL_NAME.test(name))
      throw new InvalidLabelsError(`bad label name "${name}"`);
    if (typeof value !== "string") throw new InvalidLabelsError(`label ${name} has a non-string value`);
    if (i > 0 && out[i - 1].name === name) throw new InvalidLabelsError(`duplicate label name "${name}"`);
    if (name === "__name__") {
      if (!METRIC_NAME.test(value)) throw new InvalidLabelsError(`bad metric name "${value}"`);
      hasName = true;
    }
  }
  if (!hasName) throw new InvalidLabelsError("__name__ is required");
  return out;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Prometheus' labels.Compare: pairwise by name then value, then shorter first. */
export function compareLabels(a: Labels, b: Labels): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = cmp(a[i].name, b[i].name) || cmp(a[i].value, b[i].value);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

/** A string key identifying a canonical label set (query-time only; the head never stores it). */
export function labelsKey(labels: Labels): string {
  let s = "";
  for (const l of labels) s += `${l.name}\xff${l.value}\xfe`;
  return s;
}

/** Interned strings: each distinct label name or value is stored once and referred to by number. */
export class SymbolTable {
  readonly #ids = new Map<string, number>();
  readonly #strings: string[] = [];

  /** Id of s, or -1 when not interned. */
  get(s: string): number {
    return this.#ids.get(s) ?? -1;
  }

  intern(s: string): number {
    let id = this.#ids.get(s);
    if (id === undefined) {
      id = this.#strings.length;
      this.#strings.push(s);
      this.#ids.set(s, id);
    }
    return id;
  }

  str(id: number): string {
    return this.#strings[id];
  }

  get size(): number {
    return this.#strings.length;
  }
}

/**
 * A 53-bit hash of the label set stored as interned (name, value) symbol pairs, over the strings
 * themselves: equal label sets hash equal whichever symbol table (block or head) holds them, so the
 * querier joins a series across sources without building a string key per source and read. Two
 * FNV-1a-style lanes (FNV's prime and MurmurHash2's multiplier), 32 + 21 bits of them kept; a name
 * ends with 0xff and a value with 0xfe. Callers still compare labels: the hash only narrows.
 */
export function symsHash(syms: SymbolTable, arr: Uint32Array, off: number, count: number): number {
  return hashLabelStrings(2 * count, (i) => syms.str(arr[off + i]));
}

/** symsHash of a label set held as strings (a series that came from another thread). */
export function labelsHash(labels: Labels): number {
  return hashLabelStrings(2 * labels.length, (i) =>
    i % 2 === 0 ? labels[i >> 1].name : labels[i >> 1].value,
  );
}

/** The two lanes over names (even i) and values (odd i), as symsHash describes. */
function hashLabelStrings(n: number, str: (i: number) => string): number {
  let a = 0x811c9dc5;
  let b = 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    const s = str(i);
    for (let k = 0; k < s.length; k++) {
      const c = s.charCodeAt(k);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
    }
    const end = i % 2 === 0 ? 0xff : 0xfe;
    a = Math.imul(a ^ end, 0x01000193);
    b = Math.imul(b ^ end, 0x5bd1e995);
  }
  return (a >>> 0) * 2 ** 21 + (b >>> 11);
}

/** Whether the interned (name, value) pairs are exactly `labels`. */
export function symsEqual(
  syms: SymbolTable,
  arr: Uint32Array,
  off: number,
  count: number,
  labels: Labels,
): boolean {
  if (labels.length !== count) return false;
  for (let i = 0; i < count; i++) {
    const l = labels[i];
    if (syms.str(arr[off + 2 * i]) !== l.name || syms.str(arr[off + 2 * i + 1]) !== l.value) return false;
  }
  return true;
}

/**
 * Builds Labels from interned (name, value) symbol pairs, only the pairs whose name symbol is one of
 * `names` (symbol ids of the same table; a handful, so a linear scan).
 */
export function labelsFromSymsPicked(
  syms: SymbolTable,
  arr: Uint32Array,
  off: number,
  count: number,
  names: readonly number[],
): Labels {
  const out: Label[] = [];
  for (let i = 0; i < count; i++) {
    const n = arr[off + 2 * i];
    if (names.includes(n)) out.push({ name: syms.str(n), value: syms.str(arr[off + 2 * i + 1]) });
  }
  return out;
}

/** Builds Labels from interned (name, value) symbol pairs. */
export function labelsFromSyms(syms: SymbolTable, arr: Uint32Array, off: number, count: number): Labels {
  const out: Label[] = new Array(count);
  for (let i = 0; i < count; i++) {
    out[i] = { name: syms.str(arr[off + 2 * i]), value: syms.str(arr[off + 2 * i + 1]) };
  }
  return out;
}
