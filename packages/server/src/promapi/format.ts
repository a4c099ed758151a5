/**
 * The Prometheus API's JSON envelopes; PromQL values themselves are written by promql/json.ts (shared
 * with the query workers, which build a query's answer themselves).
 */
import { annotationsJson, jsonString } from "../promql/json.ts";

export {
  annotationsJson,
  BoundedWriter,
  formatTimestamp,
  formatValue,
  jsonString,
  labelsJson,
  queryAnswerJson,
  writeQueryData,
} from "../promql/json.ts";

/** A whole success body around data already in JSON. */
export function successBody(
  dataJson: string,
  ann?: { warnings: readonly string[]; infos: readonly string[] },
): string {
  return `{"status":"success","data":${dataJson}${ann ? annotationsJson(ann) : ""}}`;
}

/** The error envelope. */
export function errorBody(errorType: string, message: string): string {
  return `{"status":"error","errorType":${jsonString(errorType)},"error":${jsonString(message)}}`;
}

/** JSON as Go's encoding/json writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped. */
export function goJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => jsonString(c).slice(1, -1));
}
