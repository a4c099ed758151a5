import type { MessageInitShape } from "@bufbuild/protobuf";
import type {
  AlertRuleSpecSchema,
  PreviewAlertRuleResponse,
  PreviewInstance,
} from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useMutation, useQuery } from "@tanstack/react-query";
import { useMemo, useState } from "react";
import { api } from "../api.ts";
import { lastSegment } from "../format.ts";
import { conditionText, fmtMetricValue, fmtSeconds, InstanceStateBadge } from "./alert-catalog.tsx";
import { alignPoints, Chart, type ChartInterval, type ChartMarker } from "./chart.tsx";
import { metricInfo } from "./rule-metrics.ts";
import { Badge, Button, ErrorBanner, Loading } from "./ui.tsx";

export type SpecInit = MessageInitShape<typeof AlertRuleSpecSchema>;

const WINDOWS = [
  { seconds: 3600, label: "Last hour" },
  { seconds: 6 * 3600, label: "Last 6 hours" },
  { seconds: 24 * 3600, label: "Last 24 hours" },
];

const instanceKey = (i: Pick<PreviewInstance, "vmName" | "mountpoint">) => `${i.vmName}|${i.mountpoint}`;

/** Most firing intervals first, then most time firing; the server's order (by name) breaks ties. */
function byFiring(instances: PreviewInstance[]): PreviewInstance[] {
  const firingSeconds = (i: PreviewInstance) =>
    i.firingIntervals.reduce(
      (s, f) => s + (f.endTimeUnix === 0n ? 0 : Number(f.endTimeUnix - f.startTimeUnix)),
      0,
    );
  return instances
    .map((inst, index) => ({ inst, index }))
    .sort(
      (a, b) =>
        b.inst.firingIntervals.length - a.inst.firingIntervals.length ||
        firingSeconds(b.inst) - firingSeconds(a.inst) ||
        a.index - b.index,
    )
    .map((x) => x.inst);
}

/**
 * What the rule in the form would have done: PreviewAlertRule over the form's current spec, then for one
 * instance its metric's history from QueryVMMonitoring over the same window, with the threshold and the
 * would-be firing intervals shaded. Saves nothing, sends nothing.
 */
export function AlertPreview(props: {
  projectName: string;
  /** The form's spec, or undefined while the form cannot be previewed (invalidReason says why). */
  spec: SpecInit | undefined;
  invalidReason?: string;
  vmLabel: (name: string) => string;
  /** The saved rule, if any: its creation and last change are marked on the chart (issue 43, item 6). */
  rule?: { createTimeUnix: bigint; updateTimeUnix: bigint };
}) {
  const [windowS, setWindowS] = useState(6 * 3600);
  const [ranKey, setRanKey] = useState<string>();
  const [selected, setSelected] = useState<string>();
  const preview = useMutation({
    mutationFn: (v: { spec: SpecInit; windowS: number }) =>
      api.alerts.previewAlertRule({
        projectName: props.projectName,
        spec: v.spec,
        historySeconds: v.windowS,
      }),
    // Each run opens on the instance that fires most: the one the summary's count is about.
    onSuccess: (pv) => {
      const top = byFiring(pv.instances)[0];
      setSelected(top && instanceKey(top));
    },
  });
  const specKey = JSON.stringify({ spec: props.spec, windowS });
  const run = () => {
    if (!props.spec) return;
    setRanKey(specKey);
    preview.mutate({ spec: props.spec, windowS });
  };
  const pv = preview.data;
  const ranSpec = preview.variables?.spec;
  const outdated = pv && ranKey !== specKey;
  return (
    <section className="card alert-preview" data-testid="alert-preview">
      <header className="alert-section-header">
        <div>
          <h2>Preview</h2>
          <p className="muted small">
            Runs this spec over stored history with the evaluator's own condition and state machine. Saves
            nothing and notifies nobody.
          </p>
        </div>
        <div className="row">
          <select
            aria-label="Preview window"
            value={windowS}
            onChange={(e) => setWindowS(Number(e.target.value))}
          >
            {WINDOWS.map((w) => (
              <option key={w.seconds} value={w.seconds}>
                {w.label}
              </option>
            ))}
          </select>
          <Button kind="primary" onClick={run} busy={preview.isPending} disabled={!props.spec}>
            {pv ? "Preview again" : "Preview"}
          </Button>
        </div>
      </header>
      {!props.spec && props.invalidReason ? (
        <p className="muted small">Preview needs a complete spec: {props.invalidReason}</p>
      ) : null}
      <ErrorBanner error={preview.error} title="Preview failed" />
      {outdated ? (
        <div className="banner banner-info" data-testid="preview-outdated">
          The form changed since this preview ran. Press “Preview again” to see the current spec.
        </div>
      ) : null}
      {pv && ranSpec ? (
        <PreviewResult
          pv={pv}
          spec={ranSpec}
          selected={selected}
          onSelect={setSelected}
          vmLabel={props.vmLabel}
          rule={props.rule}
        />
      ) : !preview.isPending && !preview.error ? (
        <p className="empty small">Press Preview to see when this rule would have fired.</p>
      ) : null}
    </section>
  );
}

function PreviewResult(props: {
  pv: PreviewAlertRuleResponse;
  spec: SpecInit;
  selected?: string;
  onSelect: (k: string) => void;
  vmLabel: (name: string) => string;
  rule?: { createTimeUnix: bigint; updateTimeUnix: bigint };
}) {
  const { pv, spec } = props;
  const coverage =
    pv.expectedSamples > 0n ? Number(pv.evaluatedSamples) / Number(pv.expectedSamples) : undefined;
  const inst = pv.instances.find((i) => instanceKey(i) === props.selected);
  const label = (i: PreviewInstance) => `${props.vmLabel(i.vmName)}${i.mountpoint ? ` ${i.mountpoint}` : ""}`;
  return (
    <div data-testid="preview-result">
      <div className="alert-preview-summary">
        <div>
          <span className="muted small">Condition</span>
          <strong>
            {conditionText({
              metricId: spec.metricId ?? "",
              operator: spec.operator ?? "",
              threshold: spec.threshold ?? 0,
              sustainedSeconds: spec.sustainedSeconds ?? 0,
            })}
          </strong>
        </div>
        <div>
          <span className="muted small">Window</span>
          <strong>
            {fmtWhen(pv.startTimeUnix)} → {fmtWhen(pv.endTimeUnix, pv.startTimeUnix)}
          </strong>
          <span className="muted small">every {pv.evaluationIntervalSeconds} s</span>
        </div>
        <div>
          <span className="muted small">Would have fired</span>
          <strong data-testid="preview-firing-instances">
            {pv.firingInstances} of {pv.instances.length} instance{pv.instances.length === 1 ? "" : "s"}
          </strong>
        </div>
        <div>
          <span className="muted small">History</span>
          <strong>
            <Badge tone={pv.historyStatus === "COMPLETE" ? "ok" : "warn"}>
              {pv.historyStatus.toLowerCase()}
            </Badge>{" "}
            {coverage === undefined
              ? ""
              : `${(coverage * 100).toFixed(coverage < 0.995 ? 1 : 0)} % of samples`}
          </strong>
          <span className="muted small">
            {pv.evaluatedSamples.toString()} of {pv.expectedSamples.toString()} expected
          </span>
        </div>
      </div>
      <PreviewStatus pv={pv} />
      {pv.instances.length === 0 ? (
        <p className="empty small">
          This spec selects no instance: no VM (or no supported filesystem) to evaluate.
        </p>
      ) : (
        <>
          <div className="row alert-preview-pick">
            <label className="row">
              <span className="field-label">Instance</span>
              <select
                aria-label="Preview instance"
                value={props.selected}
                onChange={(e) => props.onSelect(e.target.value)}
              >
                {byFiring(pv.instances).map((i) => (
                  <option key={instanceKey(i)} value={instanceKey(i)}>
                    {label(i)} —{" "}
                    {i.firingIntervals.length ? `fires ${i.firingIntervals.length}×` : "never fires"}
                  </option>
                ))}
              </select>
            </label>
          </div>
          {inst ? (
            <PreviewChart pv={pv} inst={inst} spec={spec} title={label(inst)} rule={props.rule} />
          ) : null}
          <PreviewInstances pv={pv} label={label} selected={props.selected} onSelect={props.onSelect} />
        </>
      )}
    </div>
  );
}

function PreviewStatus(props: { pv: PreviewAlertRuleResponse }) {
  const { pv } = props;
  const notes: { tone: "error" | "warn"; text: string }[] = [];
  if (pv.queryStatus === "ERROR")
    notes.push({
      tone: "error",
      text: `The history could not be read: ${pv.queryMessage || "query error"}.`,
    });
  else if (pv.queryStatus === "TIMEOUT")
    notes.push({
      tone: "error",
      text: `Reading the history timed out${pv.queryMessage ? `: ${pv.queryMessage}` : ""}. The result is incomplete.`,
    });
  else if (pv.queryMessage) notes.push({ tone: "warn", text: pv.queryMessage });
  if (pv.historyStatus === "CUT_BY_RETENTION")
    notes.push({
      tone: "warn",
      text: "The window reaches past the metrics retention: older history is gone, so the preview starts later.",
    });
  if (pv.historyStatus === "PARTIAL")
    notes.push({
      tone: "warn",
      text: "Partial history: some instances had evaluations without data. No data never counts as a recovery or a breach.",
    });
  if (notes.length === 0) return null;
  return (
    <div data-testid="preview-status">
      {notes.map((n) => (
        <div key={n.text} className={`banner banner-${n.tone}`}>
          {n.text}
        </div>
      ))}
    </div>
  );
}

function PreviewInstances(props: {
  pv: PreviewAlertRuleResponse;
  label: (i: PreviewInstance) => string;
  selected?: string;
  onSelect: (k: string) => void;
}) {
  return (
    <table className="table alert-preview-table" data-testid="preview-instances">
      <thead>
        <tr>
          <th>Instance</th>
          <th className="num">Would have fired</th>
          <th>State at the end</th>
          <th className="num">No-data evaluations</th>
          <th className="num">Error evaluations</th>
          <th className="num">Samples</th>
        </tr>
      </thead>
      <tbody>
        {byFiring(props.pv.instances).map((i) => {
          const k = instanceKey(i);
          return (
            <tr
              key={k}
              className={k === props.selected ? "alert-row-selected" : "alert-row-pick"}
              onClick={() => props.onSelect(k)}
              data-vm={i.vmName}
            >
              <td>{props.label(i)}</td>
              <td className="num" data-testid="preview-instance-fires">
                {i.firingIntervals.length === 0 ? (
                  <span className="muted">never</span>
                ) : (
                  `${i.firingIntervals.length} time${i.firingIntervals.length === 1 ? "" : "s"}`
                )}
              </td>
              <td>
                <InstanceStateBadge state={i.finalState} />
              </td>
              <td className="num">{i.noDataEvaluations || <span className="muted">0</span>}</td>
              <td className="num">{i.errorEvaluations || <span className="muted">0</span>}</td>
              <td className="num muted">
                {i.evaluatedSamples.toString()} / {i.expectedSamples.toString()}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** "Nov 24, 21:56:30"; only the time when `sameDayAs` falls on the same day. */
function fmtWhen(unix: bigint, sameDayAs?: bigint): string {
  const d = new Date(Number(unix) * 1000);
  const time = d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  if (sameDayAs !== undefined && new Date(Number(sameDayAs) * 1000).toDateString() === d.toDateString())
    return time;
  return `${d.toLocaleDateString(undefined, { month: "short", day: "numeric" })}, ${time}`;
}

function stepFor(windowSeconds: number): number {
  // About 720–1440 points: every sample at 30 s up to 6 hours.
  return windowSeconds <= 6 * 3600 ? 30 : 60;
}

function PreviewChart(props: {
  pv: PreviewAlertRuleResponse;
  inst: PreviewInstance;
  spec: SpecInit;
  title: string;
  rule?: { createTimeUnix: bigint; updateTimeUnix: bigint };
}) {
  const { pv, inst, spec } = props;
  const metricId = spec.metricId ?? "";
  const m = metricInfo(metricId);
  const start = Number(pv.startTimeUnix);
  const end = Number(pv.endTimeUnix);
  const step = stepFor(end - start);
  const history = useQuery({
    queryKey: ["alert-preview-history", inst.vmName, metricId, start, end, step],
    enabled: !!m?.charted,
    staleTime: 60_000,
    queryFn: () =>
      api.monitoring.queryVMMonitoring({
        name: inst.vmName,
        metricIds: [metricId],
        startTimeUnix: pv.startTimeUnix,
        endTimeUnix: pv.endTimeUnix,
        stepSeconds: step,
      }),
  });
  const intervals: ChartInterval[] = useMemo(
    () =>
      inst.firingIntervals.map((f) => ({
        start: Number(f.startTimeUnix),
        end: f.endTimeUnix === 0n ? end : Number(f.endTimeUnix),
        label: "would have fired",
      })),
    [inst, end],
  );
  const unit = m?.unit ?? "";
  const threshold = spec.threshold ?? 0;
  // The saved rule's creation and last change inside the window: what fired before them never paged.
  const created = props.rule ? Number(props.rule.createTimeUnix) : 0;
  const changed = props.rule ? Number(props.rule.updateTimeUnix) : 0;
  const before = created ? inst.firingIntervals.filter((f) => Number(f.startTimeUnix) < created).length : 0;
  const markers: ChartMarker[] = useMemo(() => {
    const out: ChartMarker[] = [];
    // The window ends on its last whole step: a rule saved since is drawn at the right edge.
    const within = (t: number) => t >= start && t < end + step;
    if (within(created))
      out.push({ time: Math.min(created, end), label: `This rule was created ${fmtWhen(BigInt(created))}` });
    if (changed > created + 60 && within(changed))
      out.push({
        time: Math.min(changed, end),
        label: `This rule was last changed ${fmtWhen(BigInt(changed))}`,
      });
    return out;
  }, [created, changed, start, end, step]);
  const chart = useMemo(() => {
    const r = history.data;
    // The response's own bounds and step, which are aligned and clamped to retention.
    const s = r ? Number(r.startTimeUnix) : start;
    const e = r ? Number(r.endTimeUnix) : end;
    const st = r?.stepSeconds || step;
    const series = (r?.series ?? []).filter(
      (x) => !m?.perMountpoint || x.labels.mountpoint === inst.mountpoint,
    );
    const aligned = alignPoints(s, e, st, series);
    // Rate metrics come per device; the rule sums them, and so does the chart.
    const values = aligned.x.map((_, i) => {
      let sum: number | null = null;
      for (const v of aligned.values) if (v[i] !== null) sum = (sum ?? 0) + (v[i] as number);
      return sum;
    });
    // A forecast rule: the value predicted `horizon` ahead, drawn at the evaluation time that made it.
    const predicted: (number | null)[] = aligned.x.map(() => null);
    for (const f of inst.forecast) {
      const i = Math.round((Number(f.timeUnix) - s) / st);
      if (i >= 0 && i < predicted.length) predicted[i] = f.value;
    }
    for (let i = 1; i < predicted.length; i++)
      if (predicted[i] === null && values[i] !== null) predicted[i] = predicted[i - 1];
    let lo = 0;
    let hi = threshold;
    for (const v of [...values, ...predicted])
      if (v !== null) {
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      }
    if (unit === "%") hi = Math.max(hi, 100);
    const yRange: [number, number] = [lo, hi === lo ? lo + 1 : hi * 1.08];
    return {
      x: aligned.x,
      series: [
        { label: m?.short ?? metricId, values },
        ...(inst.forecast.length > 0
          ? [{ label: `predicted ${fmtSeconds(spec.forecastHorizonSeconds ?? 0)} ahead`, values: predicted }]
          : []),
      ],
      yRange,
      points: values.filter((v) => v !== null).length,
    };
  }, [history.data, start, end, step, m, inst, metricId, threshold, unit, spec.forecastHorizonSeconds]);
  const format = useMemo(() => (v: number) => fmtMetricValue(unit, v), [unit]);
  const quality = history.data?.quality;
  return (
    <div className="chart-card alert-preview-chart">
      <header>
        <div>
          <h3>
            {props.title}: {m?.label ?? metricId}
            {m ? <span className="muted small"> ({unit})</span> : null}
          </h3>
          <span className="chart-legend">
            <span className="alert-swatch alert-swatch-fire" /> would have fired{" "}
            <span className="alert-swatch alert-swatch-threshold" /> threshold{" "}
            {fmtMetricValue(unit, threshold)}
          </span>
        </div>
        <strong data-testid="preview-firing-count" data-count={inst.firingIntervals.length}>
          Would have fired {inst.firingIntervals.length} time{inst.firingIntervals.length === 1 ? "" : "s"}
          {before > 0 ? (
            <span className="muted small" data-testid="preview-before-rule">
              {" "}
              ({before} before this rule existed)
            </span>
          ) : null}
        </strong>
      </header>
      <ErrorBanner error={history.error} title="Could not read the metric's history" />
      {m && !m.charted ? (
        <p className="muted small">
          {m.label} comes from the inventory, not from stored samples: there is no history to draw, only the
          would-be firing intervals.
        </p>
      ) : null}
      {history.isPending && m?.charted ? <Loading what="history" /> : null}
      {quality?.partial ? (
        <div className="banner banner-warn small">
          The history read was partial
          {quality.errors.length ? `: ${quality.errors.map((e) => e.message).join("; ")}` : ""}.
        </div>
      ) : null}
      {history.data || !m?.charted ? (
        <div data-testid="preview-chart" data-intervals={intervals.length} data-points={chart.points}>
          <Chart
            title={`${props.title}: ${m?.label ?? metricId}`}
            x={chart.x}
            series={chart.series}
            format={format}
            unit={unit}
            markers={markers}
            intervals={intervals}
            threshold={threshold}
            yRange={chart.yRange}
            height={240}
          />
        </div>
      ) : null}
      {inst.forecastLine.length === 2 ? (
        <p className="small" data-testid="preview-forecast">
          Forecast: the line fitted at the end of the window goes from{" "}
          {fmtMetricValue(unit, inst.forecastLine[0].value)} to{" "}
          {fmtMetricValue(unit, inst.forecastLine[1].value)} at {fmtWhen(inst.forecastLine[1].timeUnix)}
          {inst.predictedCrossingTimeUnix !== undefined ? (
            <>
              , reaching the threshold at <strong>{fmtWhen(inst.predictedCrossingTimeUnix)}</strong>
            </>
          ) : null}
          .
        </p>
      ) : null}
      {intervals.length > 0 ? (
        <ul className="alert-intervals" data-testid="preview-intervals">
          {inst.firingIntervals.map((f) => (
            <li key={f.startTimeUnix.toString()}>
              <Badge tone="bad">firing</Badge> {fmtWhen(f.startTimeUnix)} →{" "}
              {f.endTimeUnix === 0n ? (
                <span>still firing at the end of the window</span>
              ) : (
                <>
                  {fmtWhen(f.endTimeUnix, f.startTimeUnix)}{" "}
                  <span className="muted">({fmtSeconds(Number(f.endTimeUnix - f.startTimeUnix))})</span>
                </>
              )}
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted small">This instance would not have fired in this window.</p>
      )}
      {inst.noDataEvaluations || inst.errorEvaluations ? (
        <p className="muted small">
          {inst.noDataEvaluations} evaluation{inst.noDataEvaluations === 1 ? "" : "s"} without data,{" "}
          {inst.errorEvaluations} with an error; neither changes the state. {lastSegment(inst.vmName)} ended{" "}
          {inst.finalState.toLowerCase()}.
        </p>
      ) : null}
    </div>
  );
}
