/**
 * PromQL values as the Prometheus HTTP API's JSON, exactly as Prometheus writes it (util/jsonutil,
 * web/api/v1 jsoniter encoders): timestamps as seconds with the milliseconds written out, sample
 * values as strings formatted like Go's strconv.FormatFloat ('f' between 1e-6 and 1e21, 'e' outside,
 * "NaN", "+Inf", "-Inf"), and strings with the standard library's HTML escaping. The writer counts
 * bytes as it goes so an oversized answer is refused before it is fully built. Here, not in promapi/,
 * because a query worker builds the answer of a Prometheus-API query itself (promql/pool).
 */

import type { Labels } from "../storage/interface.ts";
import type { QueryResult, QueryValue } from "./engine/engine.ts";
import { ResponseTooLargeError } from "./errors.ts";

const HTML_UNSAFE = /[<>&\u2028\u2029]/;
const HTML_UNSAFE_ALL = /[<>&\u2028\u2029]/g;
const HTML_ESCAPE: Record<string, string> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};

/** A JSON string literal as Go's encoding/json writes it (HTML-safe). */
export function jsonString(s: string): string {
  const j = JSON.stringify(s);
  return HTML_UNSAFE.test(j) ? j.replace(HTML_UNSAFE_ALL, (c) => HTML_ESCAPE[c]) : j;
}

/** A sample value as Prometheus prints it (without the quotes). */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  if (v === 0) return Object.is(v, -0) ? "-0" : "0";
  const abs = Math.abs(v);
  // JS switches to exponent form at exactly Go's cut-offs; only the exponent's width differs (e-07).
  const s = String(v);
  if (abs >= 1e-6 && abs < 1e21) return s;
  return s.replace(/e([+-])(\d)$/, "e$10$2");
}

/** A millisecond timestamp as Prometheus writes it: seconds, then `.mmm` when not whole. */
export function formatTimestamp(ms: number): string {
  let t = Math.round(ms);
  let sign = "";
  if (t < 0) {
    sign = "-";
    t = -t;
  }
  const frac = t % 1000;
  const secs = (t - frac) / 1000;
  return frac === 0 ? `${sign}${secs}` : `${sign}${secs}.${String(frac).padStart(3, "0")}`;
}

/** Appends chunks and refuses (ResponseTooLargeError) once the body passes `limit` bytes. */
export class BoundedWriter {
  readonly #parts: string[] = [];
  #length = 0;
  constructor(readonly limit: number) {}
  write(s: string): void {
    // Characters outside ASCII take more bytes; they are rare here (label values), so the exact
    // byte length is checked once at the end and the running count is a cheap lower bound.
    this.#length += s.length;
    if (this.#length > this.limit) throw tooLarge(this.#length, this.limit);
    this.#parts.push(s);
  }
  finish(): string {
    const body = this.#parts.join("");
    const bytes = Buffer.byteLength(body);
    if (bytes > this.limit) throw tooLarge(bytes, this.limit);
    return body;
  }
}

function tooLarge(bytes: number, limit: number): ResponseTooLargeError {
  return new ResponseTooLargeError(bytes, limit);
}

/** `{"name":"value",…}` in label order; never called with the tenant label (the backend strips it). */
export function labelsJson(labels: Labels): string {
  let s = "{";
  for (let i = 0; i < labels.length; i++) {
    if (i > 0) s += ",";
    s += `${jsonString(labels[i].name)}:${jsonString(labels[i].value)}`;
  }
  return `${s}}`;
}

function point(t: number, v: number): string {
  return `[${formatTimestamp(t)},"${formatValue(v)}"]`;
}

/** Writes `{"resultType":…,"result":…}`. */
export function writeQueryData(w: BoundedWriter, value: QueryValue): void {
  w.write(`{"resultType":"${value.resultType}","result":`);
  switch (value.resultType) {
    case "scalar":
      w.write(point(value.result.t, value.result.v));
      break;
    case "string":
      w.write(`[${formatTimestamp(value.result.t)},${jsonString(value.result.v)}]`);
      break;
    case "vector":
      w.write("[");
      value.result.forEach((s, i) => {
        w.write(`${i > 0 ? "," : ""}{"metric":${labelsJson(s.metric)},"value":${point(s.t, s.v)}}`);
      });
      w.write("]");
      break;
    case "matrix": {
      w.write("[");
      // Series of a range query share the step grid: each timestamp is formatted once.
      const stamps = new Map<number, string>();
      value.result.forEach((s, i) => {
        w.write(`${i > 0 ? "," : ""}{"metric":${labelsJson(s.metric)},"values":[`);
        const n = s.timestamps.length;
        // Points are batched so one huge series is still checked against the limit as it grows.
        let chunk = "";
        for (let k = 0; k < n; k++) {
          const t = s.timestamps[k];
          let ts = stamps.get(t);
          if (ts === undefined) {
            ts = formatTimestamp(t);
            stamps.set(t, ts);
          }
          chunk += `${k > 0 ? ",[" : "["}${ts},"${formatValue(s.values[k])}"]`;
          if (chunk.length > 65_536) {
            w.write(chunk);
            chunk = "";
          }
        }
        w.write(`${chunk}]}`);
      });
      w.write("]");
      break;
    }
  }
  w.write("}");
}

/** Warnings and infos as Prometheus 3 adds them (only when non-empty). */
export function annotationsJson(a: {
  readonly warnings: readonly string[];
  readonly infos: readonly string[];
}): string {
  let s = "";
  if (a.warnings.length > 0) s += `,"warnings":[${a.warnings.map(jsonString).join(",")}]`;
  if (a.infos.length > 0) s += `,"infos":[${a.infos.map(jsonString).join(",")}]`;
  return s;
}

/** The whole success body of a query: `{"status":"success","data":…}` with its annotations. */
export function queryAnswerJson(r: QueryResult, maxBytes: number): string {
  const w = new BoundedWriter(maxBytes);
  w.write('{"status":"success","data":');
  writeQueryData(w, r.value);
  w.write(annotationsJson(r.annotations));
  w.write("}");
  return w.finish();
}
