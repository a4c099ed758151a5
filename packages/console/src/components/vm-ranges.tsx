/**
 * The VM page's time ranges and the step each is queried at.
 *
 * QueryVMMonitoring refuses more than 10,000 points per series (POINT_BUDGET_EXCEEDED) and a step under
 * 30 s (the sampling interval). A chart is at most ~1,000 px wide, so more than ~1,000 points per series
 * would only cost bandwidth: every step below keeps a series between ~120 and ~720 points, is a multiple
 * of the 30 s sampling interval (each step window holds whole samples) and averages gauges over the
 * window on the server, so no sample is dropped at coarser steps.
 *
 * | range | step   | points per series | why |
 * | 1 h   | 30 s   | 121               | every sample as sent: nothing averaged |
 * | 6 h   | 60 s   | 361               | one point per ~2.5 px of a full-width chart |
 * | 24 h  | 120 s  | 721               | still under ~1,000; an 8-minute spike spans 4 points |
 * | 7 d   | 1800 s | 337               | 30-minute steps are served from the store's rollups (docs/api.md); |
 * |       |        |                   | 7 d at 60 s would be 10,081 points and refused |
 *
 * Ranges up to 24 h refresh every 30 s (one sampling interval); 7 d does not (a new 30-minute point
 * appears only twice an hour) and has a Refresh button instead.
 */
export interface VmRange {
  key: "1h" | "6h" | "24h" | "7d";
  label: string;
  seconds: number;
  stepSeconds: number;
  /** Refetch interval in ms, or false. */
  refresh: number | false;
}

export const VM_RANGES: readonly VmRange[] = [
  { key: "1h", label: "1 h", seconds: 3600, stepSeconds: 30, refresh: 30_000 },
  { key: "6h", label: "6 h", seconds: 6 * 3600, stepSeconds: 60, refresh: 30_000 },
  { key: "24h", label: "24 h", seconds: 24 * 3600, stepSeconds: 120, refresh: 30_000 },
  { key: "7d", label: "7 d", seconds: 7 * 86400, stepSeconds: 1800, refresh: false },
];

/** The server's limit; checked here too so a future edit of the table cannot ship a refused step. */
export const MAX_POINTS_PER_SERIES = 10_000;
export const MIN_STEP_SECONDS = 30;

export function pointsPerSeries(r: VmRange): number {
  return Math.floor(r.seconds / r.stepSeconds) + 1;
}

export function rangeByKey(key: string | null | undefined): VmRange {
  return VM_RANGES.find((r) => r.key === key) ?? VM_RANGES[0];
}

export function RangePicker(props: { value: VmRange; onChange: (r: VmRange) => void }) {
  return (
    // biome-ignore lint/a11y/useSemanticElements: a segmented control, not a form fieldset
    <div className="vm-range" role="group" aria-label="Time range">
      {VM_RANGES.map((r) => (
        <button
          key={r.key}
          type="button"
          className={`btn ${r.key === props.value.key ? "selected" : ""}`}
          aria-pressed={r.key === props.value.key}
          title={`${r.label} at ${r.stepSeconds} s steps (${pointsPerSeries(r)} points per series)`}
          onClick={() => props.onChange(r)}
        >
          {r.label}
        </button>
      ))}
    </div>
  );
}
