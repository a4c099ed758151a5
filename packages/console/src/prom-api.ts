import { csrfToken, sessionEnded } from "./session-api.ts";

/**
 * The project's Prometheus-compatible query API (docs/api.md#prometheus-compatible-query-api), read with the console's session: the
 * browser attaches the HttpOnly cookie, the call carries the CSRF token as every Connect call does.
 * Used where one PromQL expression reads what would otherwise be one RPC per VM.
 */
export interface RangeSeries {
  metric: Record<string, string>;
  /** [Unix seconds, value as Prometheus writes it ("NaN", "+Inf" included)]; a missing step is absent. */
  values: [number, string][];
}

export async function queryRange(
  projectName: string,
  query: string,
  range: { startS: number; endS: number; stepS: number },
): Promise<RangeSeries[]> {
  const projectId = projectName.split("/")[1] ?? "";
  // A GET: a read, as Prometheus' own UI asks it. A page of 50 VM names stays far below URL limits.
  const params = new URLSearchParams({
    query,
    start: String(range.startS),
    end: String(range.endS),
    step: String(range.stepS),
  });
  const r = await fetch(
    `/v1/monitoring/projects/${encodeURIComponent(projectId)}/prometheus/api/v1/query_range?${params}`,
    { credentials: "same-origin", headers: { "x-svc-csrf": csrfToken() } },
  );
  const body = (await r.json().catch(() => undefined)) as
    | { status: "success"; data: { resultType: string; result: RangeSeries[] } }
    | { status: "error"; error: string }
    | undefined;
  if (r.status === 401) sessionEnded();
  if (!r.ok || body?.status !== "success") {
    throw new Error(body && body.status === "error" ? body.error : `query_range failed: HTTP ${r.status}`);
  }
  return body.data.result;
}

/** A PromQL string literal matching exactly `s` as a regular expression (`vm=~"a|b"`). */
export function exactRegex(values: readonly string[]): string {
  const re = values.map((v) => v.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&")).join("|");
  return JSON.stringify(re);
}
