import { useState } from "react";

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
  key: "1h" | "6h" | "24h" | "7d" | "custom";
  label: string;
  seconds: number;
  stepSeconds: number;
  /** Refetch interval in ms, or false. */
  refresh: number | false;
  /** A custom range's end (Unix seconds); presets end now. */
  endUnix?: number;
}

/** Steps a custom range may use: the smallest keeping a series at most ~1,000 points. */
const CUSTOM_STEPS = [30, 60, 120, 300, 600, 1800, 3600, 7200, 21600];
/** The longest custom range: the store's retention is the real bound; the server clamps to it. */
const MAX_CUSTOM_SECONDS = 90 * 86400;

/**
 * A custom range from the URL (`from` and `to`, Unix seconds; issue 27, item 9): a typed range or a
 * drag-zoom, so a link shows what its sender saw. Undefined when absent or not a range (to ≤ from, under
 * 2 minutes, over 90 days); the page then falls back to the preset.
 */
export function customRange(from: string | null, to: string | null): VmRange | undefined {
  if (!from || !to || !/^\d{9,11}$/.test(from) || !/^\d{9,11}$/.test(to)) return undefined;
  const start = Number(from);
  const end = Number(to);
  const seconds = end - start;
  if (seconds < 120 || seconds > MAX_CUSTOM_SECONDS) return undefined;
  const stepSeconds = CUSTOM_STEPS.find((s) => seconds / s <= 1000) ?? CUSTOM_STEPS[CUSTOM_STEPS.length - 1];
  return { key: "custom", label: "selected range", seconds, stepSeconds, refresh: false, endUnix: end };
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

/** "2026-11-27T05:10" in the browser's zone, for a datetime-local input. */
function localInput(unix: number): string {
  const d = new Date(unix * 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A custom range typed as two local times; Apply puts it in the URL. */
function CustomRangeForm(props: { value: VmRange; onApply: (from: number, to: number) => void }) {
  const end = props.value.endUnix ?? Math.floor(Date.now() / 1000);
  const [from, setFrom] = useState(localInput(end - props.value.seconds));
  const [to, setTo] = useState(localInput(end));
  const [error, setError] = useState<string>();
  return (
    <form
      className="vm-custom-range"
      onSubmit={(e) => {
        e.preventDefault();
        const f = Math.floor(new Date(from).getTime() / 1000);
        const t = Math.floor(new Date(to).getTime() / 1000);
        if (!Number.isFinite(f) || !Number.isFinite(t)) return setError("Enter both times.");
        if (!customRange(String(f), String(t)))
          return setError(
            "The end must be at least 2 minutes after the start, and the range at most 90 days.",
          );
        setError(undefined);
        props.onApply(f, t);
      }}
    >
      <label>
        From <input type="datetime-local" value={from} onChange={(e) => setFrom(e.target.value)} />
      </label>
      <label>
        To <input type="datetime-local" value={to} onChange={(e) => setTo(e.target.value)} />
      </label>
      <button type="submit" className="btn btn-small">
        Apply
      </button>
      {error ? (
        <span className="field-error" role="alert">
          {error}
        </span>
      ) : null}
    </form>
  );
}

export function RangePicker(props: {
  value: VmRange;
  onChange: (r: VmRange) => void;
  onCustom?: (from: number, to: number) => void;
}) {
  const [custom, setCustom] = useState(props.value.key === "custom");
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
          onClick={() => {
            setCustom(false);
            props.onChange(r);
          }}
        >
          {r.label}
        </button>
      ))}
      {props.onCustom ? (
        <>
          <button
            type="button"
            className={`btn ${props.value.key === "custom" ? "selected" : ""}`}
            aria-pressed={props.value.key === "custom"}
            aria-expanded={custom}
            onClick={() => setCustom(!custom)}
          >
            Custom
          </button>
          {custom ? <CustomRangeForm value={props.value} onApply={props.onCustom} /> : null}
        </>
      ) : null}
    </div>
  );
}
