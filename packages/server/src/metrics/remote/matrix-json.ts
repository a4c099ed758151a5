import type { Labels } from "../../storage/interface.ts";

/** One series of a `matrix` answer: labels sorted by name, times in ms. */
export interface ApiSeries {
  readonly metric: Labels;
  readonly timestamps: Float64Array;
  readonly values: Float64Array;
}

/**
 * A successful range-query answer as VictoriaMetrics and Prometheus write it,
 * `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{…},"values":[[t,"v"],…]},…]}}`,
 * read straight from the bytes into columns: JSON.parse made an array and a string per point, and
 * with the conversion after it was the largest share of svc's own CPU in a 7-day remote
 * QueryVMMonitoring (docs/performance.md). Undefined for anything else (an error, warnings, another
 * layout, a time with more than three decimals): the caller then parses it as JSON. Answers are
 * those of matrixSeries over JSON.parse, bit for bit (tested against it).
 */
export function parseMatrixAnswer(buf: Uint8Array): ApiSeries[] | undefined {
  if (!startsWith(buf, 0, PREFIX)) return undefined;
  const r = new Reader(buf, PREFIX.length);
  const out: ApiSeries[] = [];
  if (r.peek() === CLOSE_ARRAY) r.p++;
  else {
    for (;;) {
      const s = r.series();
      if (s === undefined) return undefined;
      out.push(s);
      const c = r.next();
      if (c === CLOSE_ARRAY) break;
      if (c !== COMMA) return undefined;
    }
  }
  // `]}}` and nothing but white space after it (warnings, stats: the JSON route).
  if (r.next() !== CLOSE_OBJECT || r.next() !== CLOSE_OBJECT) return undefined;
  for (; r.p < buf.length; r.p++) if (!isSpace(buf[r.p])) return undefined;
  return out;
}

/** `{"a":"b",…}` as sorted labels, empty values dropped. */
export function labelsOf(metric: Record<string, string>): Labels {
  const out: { name: string; value: string }[] = [];
  for (const name of Object.keys(metric).sort())
    if (metric[name] !== "") out.push({ name, value: metric[name] });
  return out;
}

/** A JSON sample value ("1.5", "NaN", "+Inf", "-Inf") as a number. */
export function sampleValue(s: string): number {
  switch (s) {
    case "+Inf":
    case "Inf":
      return Number.POSITIVE_INFINITY;
    case "-Inf":
      return Number.NEGATIVE_INFINITY;
    default:
      return Number(s);
  }
}

const bytesOf = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0));
const PREFIX = bytesOf('{"status":"success","data":{"resultType":"matrix","result":[');
const METRIC = bytesOf('{"metric":');
const VALUES = bytesOf(',"values":[');
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const DOT = 0x2e;
const MINUS = 0x2d;
const ZERO = 0x30;

/** Exact powers of ten (10^22 is the largest a double holds exactly). */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);

const decoder = new TextDecoder();

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function startsWith(buf: Uint8Array, p: number, want: Uint8Array): boolean {
  if (p + want.length > buf.length) return false;
  for (let i = 0; i < want.length; i++) if (buf[p + i] !== want[i]) return false;
  return true;
}

class Reader {
  /** Column scratch, grown as needed; each series gets copies of its length. */
  #t: Float64Array<ArrayBuffer> = new Float64Array(512);
  #v: Float64Array<ArrayBuffer> = new Float64Array(512);

  constructor(
    readonly buf: Uint8Array,
    public p: number,
  ) {}

  peek(): number {
    return this.buf[this.p];
  }

  next(): number {
    return this.buf[this.p++];
  }

  /** `{"metric":{…},"values":[…]}`, or undefined. */
  series(): ApiSeries | undefined {
    const buf = this.buf;
    if (!startsWith(buf, this.p, METRIC)) return undefined;
    this.p += METRIC.length;
    const start = this.p;
    if (!this.skipObject()) return undefined;
    let metric: Labels;
    try {
      metric = labelsOf(JSON.parse(decoder.decode(buf.subarray(start, this.p))));
    } catch {
      return undefined;
    }
    if (!startsWith(buf, this.p, VALUES)) return undefined;
    this.p += VALUES.length;
    let n = 0;
    if (this.peek() === CLOSE_ARRAY) this.p++;
    else {
      for (;;) {
        if (this.next() !== OPEN_ARRAY) return undefined;
        const t = this.timestampMs();
        if (t === undefined || this.next() !== COMMA || this.next() !== QUOTE) return undefined;
        const v = this.value();
        if (v === undefined || this.next() !== CLOSE_ARRAY) return undefined;
        if (n === this.#t.length) {
          this.#t = grown(this.#t);
          this.#v = grown(this.#v);
        }
        this.#t[n] = t;
        this.#v[n++] = v;
        const c = this.next();
        if (c === CLOSE_ARRAY) break;
        if (c !== COMMA) return undefined;
      }
    }
    if (this.next() !== CLOSE_OBJECT) return undefined;
    return { metric, timestamps: this.#t.slice(0, n), values: this.#v.slice(0, n) };
  }

  /** Moves past a JSON object of strings (the labels); false if it is not one. */
  skipObject(): boolean {
    const buf = this.buf;
    if (buf[this.p++] !== OPEN_OBJECT) return false;
    while (this.p < buf.length) {
      const c = buf[this.p++];
      if (c === CLOSE_OBJECT) return true;
      if (c === QUOTE) {
        while (this.p < buf.length && buf[this.p] !== QUOTE) this.p += buf[this.p] === BACKSLASH ? 2 : 1;
        this.p++;
      } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) return false;
    }
    return false;
  }

  /** Seconds with at most three decimals, as whole milliseconds; undefined otherwise. */
  timestampMs(): number | undefined {
    const buf = this.buf;
    let ms = 0;
    let digits = 0;
    for (let c = buf[this.p]; c >= ZERO && c <= ZERO + 9; c = buf[++this.p]) {
      ms = ms * 10 + (c - ZERO);
      digits++;
    }
    if (digits === 0 || digits > 12) return undefined;
    ms *= 1000;
    if (buf[this.p] === DOT) {
      this.p++;
      let scale = 100;
      let frac = 0;
      for (let c = buf[this.p]; c >= ZERO && c <= ZERO + 9; c = buf[++this.p]) {
        if (scale < 1) return undefined; // finer than a millisecond: JSON.parse and round
        frac += (c - ZERO) * scale;
        scale /= 10;
      }
      if (scale === 100) return undefined;
      ms += frac;
    }
    return ms;
  }

  /**
   * A quoted sample value (the opening quote read): a plain decimal of at most 15 significant digits
   * and 22 decimals is digits ÷ 10^decimals, one correctly rounded division of two exact doubles, so
   * the same double as Number(); anything else (exponents, NaN, ±Inf, more digits) goes through
   * sampleValue.
   */
  value(): number | undefined {
    const buf = this.buf;
    const start = this.p;
    const negative = buf[this.p] === MINUS;
    if (negative) this.p++;
    let m = 0;
    let significant = 0;
    let decimals = 0;
    let seenDot = false;
    let digits = 0;
    for (;;) {
      const c = buf[this.p];
      if (c >= ZERO && c <= ZERO + 9) {
        if (m !== 0 || c !== ZERO) significant++;
        m = m * 10 + (c - ZERO);
        digits++;
        if (seenDot) decimals++;
      } else if (c === DOT && !seenDot) seenDot = true;
      else break;
      this.p++;
    }
    if (buf[this.p] === QUOTE && digits > 0 && significant <= 15 && decimals <= 22) {
      this.p++;
      const x = decimals === 0 ? m : m / POW10[decimals];
      return negative ? -x : x;
    }
    // The slow way: up to the closing quote (values hold no escapes).
    let end = start;
    while (end < buf.length && buf[end] !== QUOTE) {
      if (buf[end] === BACKSLASH) return undefined;
      end++;
    }
    if (end >= buf.length) return undefined;
    this.p = end + 1;
    return sampleValue(decoder.decode(buf.subarray(start, end)));
  }
}

function grown(a: Float64Array): Float64Array<ArrayBuffer> {
  const g = new Float64Array(a.length * 2);
  g.set(a);
  return g;
}
