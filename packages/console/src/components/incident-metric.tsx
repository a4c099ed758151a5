import type { Incident } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useQuery } from "@tanstack/react-query";
import { useMemo } from "react";
import { api } from "../api.ts";
import { alignPoints, Chart, type ChartSeries } from "./chart.tsx";
import { metricLabel } from "./incident-format.tsx";
import { ErrorBanner, Loading } from "./ui.tsx";

const STEPS = [30, 60, 120, 300, 600, 1800, 3600];

/**
 * The incident's metric on its VM around the incident (issue 27, item 7): from 30 minutes before it
 * opened to 10 minutes after it closed (or now), with the rule's threshold and the firing interval shaded.
 */
export function IncidentMetric(props: { incident: Incident }) {
  const i = props.incident;
  const open = Number(i.openTimeUnix);
  const close = Number(i.closeTimeUnix);
  const q = useQuery({
    queryKey: ["incident-metric", i.name, close],
    queryFn: async () => {
      const now = Math.floor(Date.now() / 1000);
      const end = Math.min(now, (close || now) + 600);
      const start = open - 1800;
      const step = STEPS.find((s) => (end - start) / s <= 1000) ?? STEPS[STEPS.length - 1];
      return api.monitoring.queryVMMonitoring({
        name: i.vmName,
        metricIds: [i.metricId],
        startTimeUnix: BigInt(start),
        endTimeUnix: BigInt(end),
        stepSeconds: step,
      });
    },
    refetchInterval: close ? false : 30_000,
  });
  const chart = useMemo(() => {
    const r = q.data;
    if (!r) return undefined;
    const chosen = r.series.filter(
      (s) => s.metricId === i.metricId && (!i.mountpoint || s.labels.mountpoint === i.mountpoint),
    );
    const aligned = alignPoints(Number(r.startTimeUnix), Number(r.endTimeUnix), r.stepSeconds, chosen);
    const series: ChartSeries[] = chosen.map((s, k) => ({
      label: `${metricLabel(i.metricId)}${s.labels.mountpoint ? ` ${s.labels.mountpoint}` : ""}`,
      values: aligned.values[k],
    }));
    return { x: aligned.x, series, end: Number(r.endTimeUnix) };
  }, [q.data, i.metricId, i.mountpoint]);
  const unit = q.data?.series[0]?.unit ?? "";
  return (
    <div className="card" data-testid="incident-metric">
      <header className="card-header">
        <h2>The metric around the incident</h2>
        <span className="muted small">
          {metricLabel(i.metricId)} on {i.vmName.split("/").pop()}, from 30 minutes before it opened
        </span>
      </header>
      <ErrorBanner error={q.error} title="Could not read the metric" />
      {q.isPending ? <Loading what="the metric" /> : null}
      {chart ? (
        chart.series.length === 0 ? (
          <p className="muted">No samples of {metricLabel(i.metricId)} around the incident.</p>
        ) : (
          <Chart
            title={`${metricLabel(i.metricId)} around the incident`}
            x={chart.x}
            series={chart.series}
            format={(v) => `${v.toFixed(1)}${unit === "%" ? " %" : ""}`}
            thresholds={[{ value: i.threshold, label: `${i.ruleDisplayName}: threshold ${i.threshold}` }]}
            bands={[
              {
                start: open,
                end: close || chart.end,
                label: `firing from ${new Date(open * 1000).toLocaleString()}${close ? ` to ${new Date(close * 1000).toLocaleString()}` : ", still open"}`,
                href: `/incidents/${i.name.split("/").pop()}`,
              },
            ]}
            yMin={0}
            unit={unit}
            height={200}
            testId="incident-chart"
          />
        )
      ) : null}
    </div>
  );
}
