import type { AlertRule, Incident } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import type { QueryError, QueryVMMonitoringResponse, Series } from "@gen/svc/monitoring/v1/monitoring_pb.ts";
import { type ReactNode, useMemo, useState } from "react";
import { fmtBytes, fmtTime, MISSING } from "../format.ts";
import {
  alignPoints,
  Chart,
  type ChartBand,
  type ChartInterval,
  type ChartMarker,
  type ChartSeries,
  type ChartThreshold,
} from "./chart.tsx";
import { coverageOf, coverageText } from "./coverage.ts";
import { Badge } from "./ui.tsx";

/**
 * One chart card of the VM page: a metric group (CPU, memory, disk, network, filesystem) with one or
 * more views (e.g. bytes or %), drawn from the page's single QueryVMMonitoring answer. A missing point
 * stays null (a gap, shaded grey); the card names each series' source and shows its metrics' errors.
 */

export type Unit = "%" | "bytes" | "bytes/s" | "ops/s" | "packets/s";

export interface CardView {
  key: string;
  label: string;
  unit: Unit;
  /** metricId → how its series are named in the legend (per device the label value comes first). */
  metrics: { id: string; label: string }[];
  yRange?: [number, number];
}

export interface CardDef {
  key: string;
  title: string;
  /** One line under the title: what the numbers mean (docs/api.md#queryvmmonitoring). */
  about: string;
  views: CardView[];
  /** Extra metricIds read for the header only (e.g. vcpus). */
  extra?: string[];
  /** Served only with expanded monitoring (the guest agent). */
  expanded?: boolean;
  /**
   * A short "now" line, e.g. "3.1 GiB of 4.0 GiB", from the latest 30 s samples (the page's last-hour
   * read), whatever the chart's range: the headline does not change with the range (issue 43, item 1).
   */
  summary?: (r: QueryVMMonitoringResponse) => string | undefined;
}

// A filesystem series carries device too; its mountpoint names it.
export const PER_DEVICE_LABELS = ["mountpoint", "interface", "device"] as const;

export function formatter(unit: Unit): (v: number) => string {
  switch (unit) {
    case "%":
      return (v) => `${v.toFixed(v !== 0 && Math.abs(v) < 10 ? 1 : 0)} %`;
    case "bytes":
      return (v) => fmtBytes(v);
    case "bytes/s":
      return (v) => `${fmtBytes(v)}/s`;
    case "ops/s":
    case "packets/s":
      return (v) => `${compact(v)} ${unit}`;
  }
}

function compact(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  return v.toFixed(a >= 10 || v === 0 ? 0 : 1);
}

/** The latest point of the first series with this metricId, or undefined (never 0 for missing). */
export function latest(r: QueryVMMonitoringResponse, metricId: string): number | undefined {
  const s = r.series.find((x) => x.metricId === metricId);
  const p = s?.points[s.points.length - 1];
  return p?.value;
}

function deviceOf(s: Series): string | undefined {
  for (const l of PER_DEVICE_LABELS) if (s.labels[l]) return s.labels[l];
  return undefined;
}

export function sourceName(source: string): string {
  return source === "GUEST_AGENT" ? "Guest agent" : source === "HYPERVISOR" ? "Hypervisor" : source;
}

/** Each metric's ids of every view, for the page's one query. */
export function cardMetricIds(def: CardDef): string[] {
  return [...new Set([...def.views.flatMap((v) => v.metrics.map((m) => m.id)), ...(def.extra ?? [])])];
}

const OPERATOR_SIGN: Record<string, string> = {
  GREATER_THAN: ">",
  GREATER_THAN_OR_EQUAL: "≥",
  LESS_THAN: "<",
  LESS_THAN_OR_EQUAL: "≤",
};

export function MetricCard(props: {
  def: CardDef;
  data: QueryVMMonitoringResponse;
  /** Shown instead of the chart when every metric of the card is EXPANDED_MONITORING_REQUIRED. */
  expandedExplanation?: ReactNode;
  /**
   * Also show expandedExplanation when the card has no points and no failure: its metrics are served at
   * every level, but on this VM only expanded monitoring (or a collector that reads the QEMU guest agent)
   * would give them, and neither did.
   */
  explainWhenEmpty?: boolean;
  /** Shown instead of an empty chart (e.g. "no readings from the guest agent yet"). */
  emptyExplanation?: ReactNode;
  /** This VM's full name, and the project's rules and this VM's incidents drawn on the chart. */
  vmName?: string;
  /** A drag across the chart selects a new window (Unix seconds). */
  onZoom?: (from: number, to: number) => void;
  rules?: AlertRule[];
  incidents?: Incident[];
  /** The last hour at 30 s (the page's freshness read): the header's latest samples come from it. */
  now?: QueryVMMonitoringResponse;
}) {
  const { def, data } = props;
  const [viewKey, setViewKey] = useState(def.views[0].key);
  const view = def.views.find((v) => v.key === viewKey) ?? def.views[0];
  const ids = useMemo(() => new Set(cardMetricIds(def)), [def]);
  const viewIds = useMemo(() => new Set(view.metrics.map((m) => m.id)), [view]);
  const errors = (data.quality?.errors ?? []).filter((e) => ids.has(e.metricId));
  const needsExpanded = errors.filter((e) => e.reason === "EXPANDED_MONITORING_REQUIRED");
  const failures = errors.filter((e) => e.reason !== "EXPANDED_MONITORING_REQUIRED");
  const allNeedExpanded = needsExpanded.length > 0 && failures.length === 0;

  const start = Number(data.startTimeUnix);
  const end = Number(data.endTimeUnix);
  const step = data.stepSeconds;
  const format = useMemo(() => formatter(view.unit), [view.unit]);

  const chart = useMemo(() => {
    const chosen = data.series
      .filter((s) => viewIds.has(s.metricId))
      .sort((a, b) => {
        const da = deviceOf(a) ?? "";
        const db = deviceOf(b) ?? "";
        if (da !== db) return da < db ? -1 : 1;
        const ia = view.metrics.findIndex((m) => m.id === a.metricId);
        const ib = view.metrics.findIndex((m) => m.id === b.metricId);
        return ia - ib;
      });
    const aligned = alignPoints(start, end, step, chosen);
    const series: ChartSeries[] = chosen.map((s, i) => {
      const name = view.metrics.find((m) => m.id === s.metricId)?.label ?? s.metricId;
      const dev = deviceOf(s);
      return { label: dev ? `${dev} ${name}` : name, values: aligned.values[i] };
    });
    const sources = [...new Set(chosen.map((s) => s.source))];
    return { x: aligned.x, series, sources };
  }, [data.series, viewIds, view, start, end, step]);

  // Missing steps of the view's series (quality.gaps), shaded grey, and the one coverage statement.
  const gapInfo = useMemo(() => {
    const qs = (data.quality?.series ?? []).filter((s) => viewIds.has(s.metricId));
    const coverage = coverageOf(qs, start, end, step);
    const intervals: ChartInterval[] = (coverage?.gaps ?? []).map((g) => ({
      start: g.start - step / 2,
      end: g.end + step / 2,
    }));
    return { intervals, coverage, sources: [...new Set(qs.map((s) => s.source))] };
  }, [data.quality, viewIds, start, end, step]);

  const sources = chart.sources.length > 0 ? chart.sources : gapInfo.sources;
  // Issue 27, item 7: the enabled rules watching this view's metrics and this VM draw their thresholds;
  // this VM's incidents of those metrics shade their firing interval (open ones up to the range's end).
  const thresholds = useMemo((): ChartThreshold[] => {
    const out: ChartThreshold[] = [];
    for (const r of props.rules ?? []) {
      const sp = r.spec;
      if (!sp || !viewIds.has(sp.metricId) || sp.enabled === false) continue;
      if (!sp.allVms && !sp.vmNames.includes(props.vmName ?? "")) continue;
      const op = OPERATOR_SIGN[sp.operator] ?? sp.operator;
      out.push({ value: sp.threshold, label: `${sp.displayName}: ${op} ${format(sp.threshold)}` });
    }
    return out;
  }, [props.rules, props.vmName, viewIds, format]);
  // Issue 43, item 6: when each of those rules was created or last changed, marked on the chart, so a
  // crossing before it explains itself (no incident: the rule did not exist, or watched otherwise).
  const markers = useMemo((): ChartMarker[] => {
    const out: ChartMarker[] = [];
    for (const r of props.rules ?? []) {
      const sp = r.spec;
      if (!sp || !viewIds.has(sp.metricId) || sp.enabled === false) continue;
      if (!sp.allVms && !sp.vmNames.includes(props.vmName ?? "")) continue;
      const created = Number(r.createTimeUnix);
      const changed = Number(r.updateTimeUnix);
      // The answer ends on its last whole step: a rule made since is drawn at the right edge.
      const within = (t: number) => t >= start && t < end + step;
      if (within(created))
        out.push({
          time: Math.min(created, end),
          label: `${sp.displayName} created ${fmtTime(created)}: no incident before it`,
        });
      // A change within a minute of the creation (a set-up's second write) is not marked twice.
      if (changed > created + 60 && within(changed))
        out.push({
          time: Math.min(changed, end),
          label: `${sp.displayName} last changed ${fmtTime(changed)}`,
        });
    }
    return out;
  }, [props.rules, props.vmName, viewIds, start, end, step]);
  const bands = useMemo((): ChartBand[] => {
    const out: ChartBand[] = [];
    for (const i of props.incidents ?? []) {
      if (!viewIds.has(i.metricId) || (props.vmName && i.vmName !== props.vmName)) continue;
      const from = Number(i.openTimeUnix);
      const to = Number(i.closeTimeUnix) || end;
      if (to < start || from > end) continue;
      out.push({
        start: from,
        end: to,
        label: `${i.ruleDisplayName}${i.mountpoint ? ` (${i.mountpoint})` : ""}: incident ${i.state === "OPEN" ? "firing" : i.state.toLowerCase()} since ${new Date(from * 1000).toLocaleString()}`,
        href: `/incidents/${i.name.split("/").pop()}`,
      });
    }
    return out;
  }, [props.incidents, props.vmName, viewIds, start, end]);
  const summary = props.now ? def.summary?.(props.now) : undefined;
  const latestAt = props.now ? latestTime(props.now, def) : undefined;
  const hasPoints = chart.series.some((s) => s.values.some((v) => v !== null));

  return (
    <section className="chart-card vm-card" data-testid={`card-${def.key}`} aria-label={def.title}>
      <header>
        <div>
          <h2>{def.title}</h2>
          <div className="muted small">{def.about}</div>
        </div>
        <div className="vm-card-side">
          {summary ? (
            <span
              className="vm-card-headline"
              data-testid={`headline-${def.key}`}
              title={`The latest 30 s sample${latestAt ? ` (${fmtTime(latestAt)})` : ""}, whatever the chart's range`}
            >
              <span className="vm-card-summary">{summary}</span>{" "}
              <span className="muted small">
                latest sample
                {latestAt ? `, ${new Date(latestAt * 1000).toLocaleTimeString()}` : ""}
              </span>
            </span>
          ) : null}
          {def.views.length > 1 && !allNeedExpanded ? (
            // biome-ignore lint/a11y/useSemanticElements: a segmented control, not a form fieldset
            <div className="vm-views" role="group" aria-label={`${def.title} view`}>
              {def.views.map((v) => (
                <button
                  key={v.key}
                  type="button"
                  className={`btn btn-small ${v.key === view.key ? "selected" : ""}`}
                  aria-pressed={v.key === view.key}
                  onClick={() => setViewKey(v.key)}
                >
                  {v.label}
                </button>
              ))}
            </div>
          ) : null}
        </div>
      </header>

      {failures.map((e) => (
        <CardError key={`${e.metricId}-${e.reason}`} error={e} />
      ))}

      {allNeedExpanded || (props.explainWhenEmpty && !hasPoints && failures.length === 0) ? (
        <div className="vm-explain" data-testid={`explain-${def.key}`}>
          {props.expandedExplanation}
        </div>
      ) : !hasPoints ? (
        failures.length > 0 && failures.length >= ids.size ? null : (
          <div className="vm-explain vm-nodata" data-testid={`nodata-${def.key}`}>
            {props.emptyExplanation ?? "No samples in this range."}
          </div>
        )
      ) : (
        <div
          className="vm-chart"
          data-start={start}
          data-end={end}
          data-step={step}
          data-series={JSON.stringify(chart.series.map((s) => ({ label: s.label, values: s.values })))}
        >
          <Chart
            title={
              view.label === def.title || def.views.length === 1 ? def.title : `${def.title} (${view.label})`
            }
            x={chart.x}
            series={chart.series}
            format={format}
            unit={view.unit}
            stepSeconds={step}
            coverage={
              gapInfo.coverage && gapInfo.coverage.expected > 0 ? coverageText(gapInfo.coverage) : undefined
            }
            markers={markers}
            yRange={view.yRange}
            yMin={0}
            intervals={gapInfo.intervals}
            intervalFill="rgba(102, 112, 133, 0.13)"
            thresholds={thresholds}
            bands={bands}
            onZoom={props.onZoom}
            height={200}
            testId={`chart-${def.key}`}
          />
        </div>
      )}

      {!allNeedExpanded ? (
        <footer className="vm-card-footer small muted">
          <span>
            Source:{" "}
            {sources.length === 0
              ? MISSING
              : sources.map((s) => (
                  <Badge key={s} tone={s === "GUEST_AGENT" ? "info" : "muted"}>
                    {sourceName(s)}
                  </Badge>
                ))}
          </span>
        </footer>
      ) : null}
    </section>
  );
}

/** When the header's latest sample was taken: the newest point of the card's header metrics. */
function latestTime(r: QueryVMMonitoringResponse, def: CardDef): number | undefined {
  const ids = new Set(cardMetricIds(def));
  let t = 0;
  for (const s of r.series) {
    if (!ids.has(s.metricId)) continue;
    const p = s.points[s.points.length - 1];
    if (p) t = Math.max(t, Number(p.timeUnix));
  }
  return t || undefined;
}

function CardError(props: { error: QueryError }) {
  const e = props.error;
  const what =
    e.reason === "QUERY_TIMEOUT"
      ? `${e.metricId} was not read within the query's 10 s deadline; the other metrics are shown.`
      : `${e.metricId} could not be read: ${e.message}`;
  return (
    <div className="banner banner-error vm-card-error" role="alert" data-testid="card-error">
      {what}
      <span className="reason">{e.reason || e.code}</span>
    </div>
  );
}
