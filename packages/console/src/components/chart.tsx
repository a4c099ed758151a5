import { useEffect, useMemo, useRef, useState } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { Link, useLocation } from "wouter";
import { fmtTime, MISSING, timeZoneName } from "../format.ts";
import { axisTicks, formatTicks, roundUp } from "./chart-axis.ts";
import { stepName } from "./coverage.ts";

/**
 * A time-series chart on uPlot. Missing samples are `null` and drawn as gaps, never joined and never
 * as zero. Optional shaded intervals (e.g. when a rule would have fired) and a threshold line.
 */
export interface ChartSeries {
  label: string;
  /** One value per x; null where there is no sample. */
  values: (number | null)[];
  color?: string;
}

export interface ChartInterval {
  start: number;
  end: number;
  label?: string;
}

/** A threshold line drawn across the chart (e.g. an alert rule's), named in the text alternative. */
export interface ChartThreshold {
  value: number;
  label: string;
}

/** A moment marked by a dotted vertical line (e.g. "rule created"), named in the text alternative. */
export interface ChartMarker {
  time: number;
  label: string;
}

/** A band for an incident's firing interval (Unix seconds): drawn red, a click opens `href`. */
export interface ChartBand {
  start: number;
  end: number;
  label: string;
  href: string;
}

export interface ChartProps {
  /** What the chart shows (e.g. "CPU utilization"): names its summary and its table. */
  title: string;
  /** Unix seconds, ascending. */
  x: number[];
  series: ChartSeries[];
  /** Formats an axis tick or legend value. */
  format?: (v: number) => string;
  height?: number;
  /** Shaded spans, Unix seconds. */
  intervals?: ChartInterval[];
  /** Fill of the shaded spans (default: a light red, for "the rule would have fired"). */
  intervalFill?: string;
  threshold?: number;
  /** Fixed lower and upper bounds of the y axis (e.g. 0–100 for percentages). */
  yRange?: [number, number];
  /** Lower bound of an otherwise automatic y axis (e.g. 0 for rates and bytes). Ignored with yRange. */
  yMin?: number;
  /** Further threshold lines (alert rules watching this metric), dashed, each named. */
  thresholds?: ChartThreshold[];
  /** Incidents' firing intervals: shaded red; a click on one opens it. */
  bands?: ChartBand[];
  /** A drag across the chart selects [from, to] (Unix seconds) for the caller instead of zooming in place. */
  onZoom?: (from: number, to: number) => void;
  testId?: string;
  /**
   * The values' unit ("%", "bytes", "bytes/s", "ops/s", …): the y axis then ticks at 1, 2, 5 × 10^n in
   * the unit's scale (chart-axis.ts). Without it uPlot's own ticks, formatted by `format`.
   */
  unit?: string;
  /** Seconds per point: above the 30 s sampling interval a point is an average, and the summary says so. */
  stepSeconds?: number;
  /** The one coverage statement (coverage.ts): replaces the summary's own count of missing steps. */
  coverage?: string;
  /** Moments drawn as dotted vertical lines and listed under the chart (when a rule was created, changed). */
  markers?: ChartMarker[];
}

/** Where the pointer (or a finger) is: the time and every series' value there, beside the pointer. */
function tooltipPlugin(format: (v: number) => string): uPlot.Plugin {
  let tip: HTMLDivElement | null = null;
  const show = (u: uPlot) => {
    if (!tip) return;
    const i = u.cursor.idx;
    const left = u.cursor.left ?? -1;
    if (i === null || i === undefined || left < 0) {
      tip.hidden = true;
      return;
    }
    // Built node by node: the CSP refuses inline style attributes, not styles set through the DOM.
    const time = document.createElement("div");
    time.className = "chart-tip-time";
    time.textContent = `${fmtTime(u.data[0][i])} ${timeZoneName()}`;
    const rows = u.series.slice(1).map((s, k) => {
      const v = u.data[k + 1][i];
      const row = document.createElement("div");
      const key = document.createElement("span");
      key.className = "chart-tip-key";
      key.style.background = String(s.stroke);
      const value = document.createElement("strong");
      value.textContent = v === null || v === undefined ? MISSING : format(v);
      row.append(key, `${String(s.label ?? "")}: `, value);
      return row;
    });
    tip.replaceChildren(time, ...rows);
    tip.hidden = false;
    const w = tip.offsetWidth;
    const overW = u.over.clientWidth;
    // Right of the pointer, or left of it near the right edge: never past the chart.
    const x = left + 12 + w > overW ? Math.max(0, left - 12 - w) : left + 12;
    tip.style.transform = `translate(${Math.round(x)}px, 4px)`;
  };
  return {
    hooks: {
      init: (u) => {
        tip = document.createElement("div");
        tip.className = "chart-tip";
        tip.hidden = true;
        tip.setAttribute("data-testid", "chart-tooltip");
        u.over.appendChild(tip);
        // A tap (or a drag of a finger) on a phone moves the cursor there, as the pointer does.
        const touch = (e: TouchEvent) => {
          const t = e.touches[0];
          if (!t) return;
          const r = u.over.getBoundingClientRect();
          u.setCursor({ left: t.clientX - r.left, top: t.clientY - r.top });
        };
        u.over.addEventListener("touchstart", touch, { passive: true });
        u.over.addEventListener("touchmove", touch, { passive: true });
      },
      setCursor: (u) => show(u),
    },
  };
}

const PALETTE = ["#2f6fed", "#e8590c", "#2b8a3e", "#ae3ec9", "#0c8599", "#c92a2a", "#5f3dc4", "#d9480f"];

/** Aligns points to the step grid of [start, end]: one x per step, null where no point exists. */
export function alignPoints(
  startUnix: number,
  endUnix: number,
  stepSeconds: number,
  series: { points: { timeUnix: bigint; value: number }[] }[],
): { x: number[]; values: (number | null)[][] } {
  const x: number[] = [];
  for (let t = startUnix; t <= endUnix; t += stepSeconds) x.push(t);
  const index = new Map(x.map((t, i) => [t, i]));
  const values = series.map((s) => {
    const v: (number | null)[] = new Array(x.length).fill(null);
    for (const p of s.points) {
      const i = index.get(Number(p.timeUnix));
      if (i !== undefined) v[i] = p.value;
    }
    return v;
  });
  return { x, values };
}

/** Indices of values whose neighbours are both missing: drawn as dots, since no line segment shows them. */
function isolated(u: uPlot, seriesIdx: number): number[] {
  const d = u.data[seriesIdx];
  const out: number[] = [];
  for (let i = 0; i < d.length; i++) {
    if (d[i] === null || d[i] === undefined) continue;
    const before = i === 0 ? null : d[i - 1];
    const after = i === d.length - 1 ? null : d[i + 1];
    if ((before === null || before === undefined) && (after === null || after === undefined)) out.push(i);
  }
  return out;
}

export function Chart(props: ChartProps) {
  const ref = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const [, navigate] = useLocation();
  // The latest callback, without rebuilding the plot when the caller passes a new function.
  const zoomRef = useRef(props.onZoom);
  zoomRef.current = props.onZoom;
  const zoomable = !!props.onZoom;

  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const format = props.format ?? ((v: number) => v.toFixed(1));
    const intervals = props.intervals ?? [];
    const intervalFill = props.intervalFill ?? "rgba(229, 72, 77, 0.14)";
    const lines = [
      ...(props.threshold !== undefined ? [props.threshold] : []),
      ...(props.thresholds ?? []).map((t) => t.value),
    ];
    const bands = props.bands ?? [];
    const onZoom = zoomable ? (from: number, to: number) => zoomRef.current?.(from, to) : undefined;
    const yMin = props.yMin;
    const unit = props.unit;
    const markers = props.markers ?? [];
    // With a unit, the axis ends on a round tick (the next one up), as Grafana's does.
    const top = (lo: number, hi: number) => (unit ? roundUp(unit, lo, hi, target) : hi);
    // About one tick per 45 px of height: 4 or 5 on a 200 px chart.
    const target = Math.max(2, Math.floor((props.height ?? 220) / 45));
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 300),
      height: props.height ?? 220,
      legend: { show: true, live: true },
      plugins: [tooltipPlugin(format)],
      cursor: { drag: { x: true, y: false, setScale: !onZoom } },
      scales: {
        x: { time: true },
        y: props.yRange
          ? { range: props.yRange }
          : yMin !== undefined
            ? {
                range: (_u, _min, max) => [
                  yMin,
                  top(yMin, max > yMin ? yMin + (max - yMin) * 1.08 : yMin + 1),
                ],
              }
            : { auto: true },
      },
      axes: [
        // At least 80 px between time ticks: labels like "11:30pm" do not run into each other.
        { stroke: "#5b6474", grid: { stroke: "#eef0f3" }, space: 80 },
        {
          stroke: "#5b6474",
          grid: { stroke: "#eef0f3" },
          // Wide enough for the longest tick label ("953.7 MiB/s"), at least 70 px.
          size: (_u, values) =>
            Math.max(70, Math.ceil(Math.max(0, ...(values ?? []).map((v) => String(v).length)) * 7.2) + 18),
          ...(unit
            ? {
                splits: (_u: uPlot, _i: number, min: number, max: number) =>
                  axisTicks(unit, min, max, target),
                values: (_u: uPlot, ticks: number[]) => {
                  // Kept on the element too: the canvas draws them, a test reads them (data-y-ticks).
                  const labels = formatTicks(unit, ticks);
                  el.dataset.yTicks = JSON.stringify(labels);
                  return labels;
                },
              }
            : { values: (_u: uPlot, ticks: number[]) => ticks.map((t) => format(t)) }),
        },
      ],
      series: [
        {},
        ...props.series.map((s, i) => ({
          label: s.label,
          stroke: s.color ?? PALETTE[i % PALETTE.length],
          width: 1.5,
          // A gap stays a gap: uPlot draws null as a break unless spanGaps is set.
          spanGaps: false,
          // Lines only; but a sample with no neighbour draws no line, so it gets a dot (still no join).
          points: { show: true, size: 5, filter: isolated },
          value: (_u: uPlot, v: number | null) => (v === null || v === undefined ? "—" : format(v)),
        })),
      ],
      hooks: {
        setSelect: [
          (u) => {
            if (!onZoom || u.select.width < 3) return;
            const from = u.posToVal(u.select.left, "x");
            const to = u.posToVal(u.select.left + u.select.width, "x");
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            onZoom(from, to);
          },
        ],
        drawClear: [
          (u) => {
            if (intervals.length === 0 && bands.length === 0) return;
            const ctx = u.ctx;
            ctx.save();
            for (const iv of [...intervals, ...bands]) {
              ctx.fillStyle = "href" in iv ? "rgba(201, 42, 42, 0.18)" : intervalFill;
              const x0 = u.valToPos(iv.start, "x", true);
              const x1 = u.valToPos(iv.end, "x", true);
              const left = Math.max(x0, u.bbox.left);
              const right = Math.min(x1, u.bbox.left + u.bbox.width);
              if (right > left) ctx.fillRect(left, u.bbox.top, Math.max(right - left, 2), u.bbox.height);
            }
            ctx.restore();
          },
        ],
        draw: [
          (u) => {
            for (const m of markers) {
              const x = u.valToPos(m.time, "x", true);
              if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
              const ctx = u.ctx;
              ctx.save();
              ctx.strokeStyle = "#5f3dc4";
              ctx.setLineDash([2, 3]);
              ctx.lineWidth = 1.5;
              ctx.beginPath();
              ctx.moveTo(x, u.bbox.top);
              ctx.lineTo(x, u.bbox.top + u.bbox.height);
              ctx.stroke();
              ctx.restore();
            }
            for (const threshold of lines) {
              const y = u.valToPos(threshold, "y", true);
              if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) continue;
              const ctx = u.ctx;
              ctx.save();
              ctx.strokeStyle = "#c92a2a";
              ctx.setLineDash([6, 4]);
              ctx.lineWidth = 1.5;
              ctx.beginPath();
              ctx.moveTo(u.bbox.left, y);
              ctx.lineTo(u.bbox.left + u.bbox.width, y);
              ctx.stroke();
              ctx.restore();
            }
          },
        ],
      },
    };
    const data: uPlot.AlignedData = [props.x, ...props.series.map((s) => s.values)];
    // The threshold lines stay in view: the y axis reaches them.
    if (lines.length > 0 && !props.yRange) {
      const highest = Math.max(...lines);
      opts.scales = {
        ...opts.scales,
        y: {
          range: (_u, min, max) => {
            const lo = yMin ?? Math.min(min, highest);
            const hi = Math.max(max, highest);
            return [lo, top(lo, hi > lo ? lo + (hi - lo) * 1.08 : lo + 1)];
          },
        },
      };
    }
    plot.current = new uPlot(opts, data, el);
    // A click (not a drag) on an incident's band opens the incident.
    const over = plot.current.over;
    const onClick = (e: MouseEvent) => {
      const u = plot.current;
      if (!u || bands.length === 0) return;
      const t = u.posToVal(e.offsetX, "x");
      const hit = bands.find((b) => t >= b.start && t <= b.end);
      if (hit) navigate(hit.href);
    };
    over.addEventListener("click", onClick);
    const observer = new ResizeObserver(() => {
      plot.current?.setSize({ width: Math.max(el.clientWidth, 300), height: props.height ?? 220 });
    });
    observer.observe(el);
    return () => {
      observer.disconnect();
      over.removeEventListener("click", onClick);
      plot.current?.destroy();
      plot.current = null;
    };
  }, [
    props.x,
    props.series,
    props.format,
    props.height,
    props.intervals,
    props.intervalFill,
    props.threshold,
    props.yRange,
    props.yMin,
    props.thresholds,
    props.bands,
    props.unit,
    props.markers,
    zoomable,
    navigate,
  ]);

  // The canvas is for the eye; its text alternative (WCAG 1.1.1) is the summary under it and the table
  // of the plotted points behind a keyboard-reachable "View as table".
  return (
    <figure className="chart-figure">
      <div ref={ref} className="chart" data-testid={props.testId} aria-hidden="true" />
      <ChartText
        title={props.title}
        x={props.x}
        series={props.series}
        format={props.format}
        stepSeconds={props.stepSeconds}
        coverage={props.coverage}
      />
      {(props.thresholds?.length ?? 0) > 0 ||
      (props.bands?.length ?? 0) > 0 ||
      (props.markers?.length ?? 0) > 0 ? (
        <ul className="chart-alerts small" data-testid="chart-alerts">
          {(props.thresholds ?? []).map((t) => (
            <li key={`t-${t.label}-${t.value}`} data-testid="chart-threshold">
              <span className="chart-threshold-key" aria-hidden="true" /> {t.label}
            </li>
          ))}
          {(props.markers ?? []).map((m) => (
            <li key={`m-${m.time}-${m.label}`} data-testid="chart-marker">
              <span className="chart-marker-key" aria-hidden="true" /> {m.label}
            </li>
          ))}
          {(props.bands ?? []).map((b) => (
            <li key={b.href} data-testid="chart-band">
              <span className="chart-band-key" aria-hidden="true" /> <Link href={b.href}>{b.label}</Link>
            </li>
          ))}
        </ul>
      ) : null}
    </figure>
  );
}

export interface SeriesSummary {
  label: string;
  latest?: number;
  min?: number;
  max?: number;
  average?: number;
  /** Runs of missing steps, and the steps in them. */
  gaps: number;
  missing: number;
}

/** Latest, min, max and average of the present values; missing steps are counted, never averaged as 0. */
export function summarize(series: ChartSeries): SeriesSummary {
  let min: number | undefined;
  let max: number | undefined;
  let latest: number | undefined;
  let sum = 0;
  let n = 0;
  let gaps = 0;
  let missing = 0;
  series.values.forEach((v, i) => {
    if (v === null) {
      missing++;
      if (i === 0 || series.values[i - 1] !== null) gaps++;
      return;
    }
    min = min === undefined ? v : Math.min(min, v);
    max = max === undefined ? v : Math.max(max, v);
    latest = v;
    sum += v;
    n++;
  });
  return { label: series.label, latest, min, max, average: n ? sum / n : undefined, gaps, missing };
}

function ChartText(props: {
  title: string;
  x: number[];
  series: ChartSeries[];
  format?: (v: number) => string;
  stepSeconds?: number;
  coverage?: string;
}) {
  // Above the 30 s sampling interval each point is the step's average: every figure says so.
  const avg = props.stepSeconds && props.stepSeconds > 30 ? `${stepName(props.stepSeconds)} averages` : "";
  const format = props.format ?? ((v: number) => v.toFixed(1));
  const show = (v: number | undefined) => (v === undefined ? MISSING : format(v));
  const summaries = useMemo(() => props.series.map(summarize), [props.series]);
  // The table can hold a thousand rows: it is built only when asked for.
  const [open, setOpen] = useState(false);
  const first = props.x[0];
  const last = props.x[props.x.length - 1];
  return (
    <figcaption className="chart-text">
      <ul className="chart-summary" data-testid="chart-summary">
        {summaries.map((s) => (
          <li key={s.label}>
            <strong>{s.label}</strong>
            {s.latest === undefined ? (
              <> no samples in this range</>
            ) : (
              <>
                :{" "}
                {avg
                  ? `latest ${stepName(props.stepSeconds ?? 0)} average ${show(s.latest)}, min ${show(s.min)} and max ${show(s.max)} of ${avg}, average over the range ${show(s.average)}`
                  : props.stepSeconds
                    ? `latest sample ${show(s.latest)}, min ${show(s.min)}, max ${show(s.max)}, average over the range ${show(s.average)}`
                    : `latest ${show(s.latest)}, min ${show(s.min)}, max ${show(s.max)}, average ${show(s.average)}`}
              </>
            )}
            {s.gaps > 0 && props.coverage === undefined ? (
              <>
                {" "}
                · {s.gaps} gap{s.gaps === 1 ? "" : "s"} ({s.missing} of {props.x.length} steps without a
                sample)
              </>
            ) : null}
          </li>
        ))}
        {props.coverage !== undefined ? (
          <li data-testid="chart-coverage">Coverage: {props.coverage}</li>
        ) : null}
      </ul>
      <details className="chart-table" onToggle={(e) => setOpen(e.currentTarget.open)}>
        <summary>View {props.title} as a table</summary>
        {open ? (
          <section
            className="chart-table-wrap"
            // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
            tabIndex={0}
            aria-label={`${props.title}, plotted points`}
          >
            <table className="table">
              <caption>
                {props.title} from {fmtTime(first)} to {fmtTime(last)} ({timeZoneName()}); a dash is a step
                without a sample
              </caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  {props.series.map((s) => (
                    <th scope="col" key={s.label}>
                      {s.label}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {props.x.map((t, i) => (
                  <tr key={t}>
                    <th scope="row">{fmtTime(t)}</th>
                    {props.series.map((s) => (
                      <td key={s.label}>{show(s.values[i] ?? undefined)}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        ) : null}
      </details>
    </figcaption>
  );
}
