/** Value-by-value comparison of two Prometheus matrix answers. */

export interface MatrixSeries {
  metric: Record<string, string>;
  values: [number, string][];
}

export interface Agreement {
  /** Points equal in both (same series key, timestamp and value within 1e-9 relative). */
  equal: number;
  /** Points in both whose values differ. */
  differ: number;
  /** Points only one side has (series or timestamps missing on the other). */
  onlyOne: number;
  /** A few examples of disagreements, for the report. */
  examples: string[];
}

function key(metric: Record<string, string>, drop: ReadonlySet<string>): string {
  return JSON.stringify(
    Object.entries(metric)
      .filter(([k]) => !drop.has(k))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
}

function close(a: string, b: string): boolean {
  if (a === b) return true;
  const x = Number(a);
  const y = Number(b);
  if (Number.isNaN(x) && Number.isNaN(y)) return true;
  return Math.abs(x - y) <= 1e-9 * Math.max(Math.abs(x), Math.abs(y));
}

/**
 * Compares `svc` against `prom` (a peer, named `peer` in the examples); labels in `drop` are ignored
 * on the svc side. topk's selection may differ on exact ties, which would show as `onlyOne` points.
 */
export function compareMatrices(
  svc: MatrixSeries[],
  prom: MatrixSeries[],
  drop: ReadonlySet<string>,
  peer = "prometheus",
): Agreement {
  const a: Agreement = { equal: 0, differ: 0, onlyOne: 0, examples: [] };
  const p = new Map(prom.map((s) => [key(s.metric, new Set()), new Map(s.values.map(([t, v]) => [t, v]))]));
  const seen = new Set<string>();
  for (const s of svc) {
    const k = key(s.metric, drop);
    seen.add(k);
    const other = p.get(k);
    if (!other) {
      a.onlyOne += s.values.length;
      if (a.examples.length < 3) a.examples.push(`svc only: ${k}`);
      continue;
    }
    for (const [t, v] of s.values) {
      const w = other.get(t);
      if (w === undefined) a.onlyOne++;
      else if (close(v, w)) a.equal++;
      else {
        a.differ++;
        if (a.examples.length < 3) a.examples.push(`${k} @${t}: svc ${v} vs ${peer} ${w}`);
      }
      other.delete(t);
    }
    a.onlyOne += other.size;
  }
  for (const [k, m] of p) {
    if (seen.has(k)) continue;
    a.onlyOne += m.size;
    if (a.examples.length < 3) a.examples.push(`${peer} only: ${k}`);
  }
  return a;
}
