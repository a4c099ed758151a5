/** Literal helpers shared by the parser and printer: numbers, durations, Go-style strings. */

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
  y: 31_536_000_000,
};
const DURATION_RE = /^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$/;
const DURATION_UNITS = ["y", "w", "d", "h", "m", "s", "ms"];

/** Parses a Prometheus duration ("1h5m", "90s") or a plain number of seconds; ms, or null. */
export function parseDurationMs(text: string): number | null {
  const t = text.trim();
  if (t === "") return null;
  const m = DURATION_RE.exec(t);
  if (m && m[0] !== "") {
    let ms = 0;
    for (let i = 0; i < DURATION_UNITS.length; i++) {
      if (m[i + 1] !== undefined) ms += Number(m[i + 1]) * UNIT_MS[DURATION_UNITS[i]];
    }
    return ms;
  }
  const n = parseNumber(t);
  if (n === null || !Number.isFinite(n)) return null;
  return Math.round(n * 1000);
}

/** Formats ms as Prometheus does (model.Duration.String): "1h5m", "0s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  let neg = "";
  if (ms < 0) {
    neg = "-";
    ms = -ms;
  }
  let out = "";
  for (const u of DURATION_UNITS) {
    const size = UNIT_MS[u];
    if (ms >= size) {
      const n = Math.floor(ms / size);
      out += `${n}${u}`;
      ms -= n * size;
    }
  }
  return neg + out;
}

/** Parses a PromQL number literal (decimal, hex, Inf, NaN, or a duration meaning seconds); null when invalid. */
export function parseNumber(text: string): number | null {
  let t = text.replace(/\s+/g, "");
  let sign = 1;
  if (t.startsWith("+")) t = t.slice(1);
  else if (t.startsWith("-")) {
    sign = -1;
    t = t.slice(1);
  }
  const lower = t.toLowerCase();
  if (lower === "inf" || lower === "infinity") return sign * Number.POSITIVE_INFINITY;
  if (lower === "nan") return Number.NaN;
  if (/^0x[0-9a-f]+$/i.test(t)) return sign * Number.parseInt(t.slice(2), 16);
  if (/^(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(t)) return sign * Number(t);
  const m = DURATION_RE.exec(t);
  if (m && m[0] !== "") {
    const ms = parseDurationMs(t);
    return ms === null ? null : (sign * ms) / 1000;
  }
  return null;
}

/**
 * Unquotes a PromQL string literal ("…", '…' with Go escapes, or `…` raw). Bytes that do not form
 * valid UTF-8 (from \x or octal escapes) become lone surrogates U+DC80..U+DCFF so they survive
 * and can be detected (`String.prototype.isWellFormed`) and printed back.
 */
export function unquoteString(lit: string): string | null {
  const q = lit[0];
  if (lit.length < 2 || lit[lit.length - 1] !== q) return null;
  const body = lit.slice(1, -1);
  if (q === "`") return body;
  if (q !== '"' && q !== "'") return null;
  const bytes: number[] = [];
  const enc = new TextEncoder();
  const pushStr = (s: string) => {
    for (const b of enc.encode(s)) bytes.push(b);
  };
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c !== "\\") {
      const cp = body.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      pushStr(ch);
      i += ch.length - 1;
      continue;
    }
    const e = body[++i];
    switch (e) {
      case "a":
        bytes.push(7);
        break;
      case "b":
        bytes.push(8);
        break;
      case "f":
        bytes.push(12);
        break;
      case "n":
        bytes.push(10);
        break;
      case "r":
        bytes.push(13);
        break;
      case "t":
        bytes.push(9);
        break;
      case "v":
        bytes.push(11);
        break;
      case "\\":
      case '"':
      case "'":
        bytes.push(e.charCodeAt(0));
        break;
      case "x": {
        const h = body.slice(i + 1, i + 3);
        if (!/^[0-9a-fA-F]{2}$/.test(h)) return null;
        bytes.push(Number.parseInt(h, 16));
        i += 2;
        break;
      }
      case "u":
      case "U": {
        const n = e === "u" ? 4 : 8;
        const h = body.slice(i + 1, i + 1 + n);
        if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(h)) return null;
        const cp = Number.parseInt(h, 16);
        if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return null;
        pushStr(String.fromCodePoint(cp));
        i += n;
        break;
      }
      default: {
        const o = body.slice(i, i + 3);
        if (!/^[0-7]{3}$/.test(o)) return null;
        const v = Number.parseInt(o, 8);
        if (v > 255) return null;
        bytes.push(v);
        i += 2;
      }
    }
  }
  return decodeBytes(Uint8Array.from(bytes));
}

function decodeBytes(b: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    // Decode valid runs, map stray bytes to lone surrogates (surrogate-escape).
    let out = "";
    let i = 0;
    while (i < b.length) {
      const len = utf8SeqLen(b, i);
      if (len === 0) {
        out += String.fromCharCode(0xdc00 + b[i]);
        i++;
      } else {
        out += new TextDecoder().decode(b.subarray(i, i + len));
        i += len;
      }
    }
    return out;
  }
}

function utf8SeqLen(b: Uint8Array, i: number): number {
  const c = b[i];
  const n =
    c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
  if (n === 0 || i + n > b.length) return 0;
  for (let k = 1; k < n; k++) if ((b[i + k] & 0xc0) !== 0x80) return 0;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b.subarray(i, i + n));
  } catch {
    return 0;
  }
  return n;
}

/** Quotes a string as a PromQL double-quoted literal (Go strconv.Quote style). */
export function quoteString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc80 && c <= 0xdcff && !isPairedLow(s, i)) {
      out += `\\x${(c - 0xdc00).toString(16).padStart(2, "0")}`;
    } else if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c === 10) out += "\\n";
    else if (c === 13) out += "\\r";
    else if (c === 9) out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, "0")}`;
    else out += s[i];
  }
  return `${out}"`;
}

function isPairedLow(s: string, i: number): boolean {
  const p = i > 0 ? s.charCodeAt(i - 1) : 0;
  return p >= 0xd800 && p < 0xdc00;
}

/** Go's strconv.FormatFloat(f, 'f', -1, 64): shortest round-trip digits, never an exponent. */
export function formatFloatF(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  const s = String(v);
  if (!/e/i.test(s)) return s;
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(s)!;
  const digits = m[2] + (m[3] ?? "");
  const exp = Number(m[4]);
  if (exp >= 0) {
    return m[1] + (digits.length - 1 <= exp ? digits + "0".repeat(exp - digits.length + 1) : digits);
  }
  return `${m[1]}0.${"0".repeat(-exp - 1)}${digits}`;
}

/** Go's fmt %v for a float64 (strconv 'g', shortest): "1e+06", "0.0001", "1.5e-05". */
export function formatFloatG(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const e = v.toExponential();
  const m = /^(-?[\d.]+)e([+-])(\d+)$/.exec(e)!;
  const exp = Number(m[2] + m[3]);
  if (exp < -4 || exp >= 6) {
    return `${m[1]}e${m[2]}${m[3].padStart(2, "0")}`;
  }
  return formatFloatF(v);
}

/** True when a string has no lone surrogates (i.e. it encodes to valid UTF-8). */
export function isWellFormed(s: string): boolean {
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}
