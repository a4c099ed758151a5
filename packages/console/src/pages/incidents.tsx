import type { Incident, IncidentEvent } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import type { Delivery } from "@gen/svc/monitoring/v1/destinations_pb.ts";
import type { Silence } from "@gen/svc/monitoring/v1/silences_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "wouter";
import { api } from "../api.ts";
import { RecentActivity } from "../components/audit-events.tsx";
import {
  AttemptsTable,
  DeliveryDialog,
  DeliveryStateBadge,
  EVENT_TYPES,
  SkipReason,
} from "../components/destination-deliveries.tsx";
import {
  conditionText,
  fmtValue,
  incidentDuration,
  incidentStateTone,
  metricUnit,
  operatorSymbol,
  ruleHref,
  severityTone,
  Time,
  vmLink,
} from "../components/incident-format.tsx";
import { IncidentMetric } from "../components/incident-metric.tsx";
import { IncidentSnoozeDialog } from "../components/incident-snooze.tsx";
import { ClearFilters, FilterSelect, PagedTable, RuleOptions, VmOptions } from "../components/paged-list.tsx";
import { Person } from "../components/people.tsx";
import { SilenceDialog, silenceLabel, useActiveSilences } from "../components/silence-form.tsx";
import { Badge, Button, ErrorBanner, Loading, Page, usePager } from "../components/ui.tsx";
import { fmtAgo, lastSegment, MISSING } from "../format.ts";
import { useProject } from "../session.tsx";

const STATES = [
  { value: "", label: "All states" },
  { value: "OPEN", label: "Open" },
  { value: "RESOLVED", label: "Resolved" },
  { value: "RETIRED", label: "Retired" },
];

/** The project's incidents, newest first, filtered by state, rule and VM as ListIncidents filters. */
export function IncidentsPage() {
  const project = useProject();
  const pager = usePager();
  const [state, setState] = useState("");
  const [rule, setRule] = useState("");
  const [vm, setVm] = useState("");
  const q = useQuery({
    queryKey: ["incidents", project.name, state, rule, vm, pager.token],
    queryFn: () =>
      api.incidents.listIncidents({
        projectName: project.name,
        state,
        rule,
        vmName: vm,
        pageSize: 25,
        pageToken: pager.token,
      }),
    refetchInterval: 30_000,
  });
  const silences = useActiveSilences(project.name);
  const filtered = !!(state || rule || vm);
  const incidents = q.data?.incidents ?? [];
  return (
    <Page
      title="Incidents"
      subtitle="One per firing episode of a rule on a VM. This list is the in-app notification: it needs no destination."
    >
      <div className="filters filter-bar">
        <FilterSelect label="State" value={state} onChange={setState} pager={pager}>
          {STATES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
        </FilterSelect>
        <FilterSelect label="Rule" value={rule} onChange={setRule} pager={pager}>
          <RuleOptions projectName={project.name} any="All rules" />
        </FilterSelect>
        <FilterSelect label="VM" value={vm} onChange={setVm} pager={pager}>
          <VmOptions projectName={project.name} any="All VMs" />
        </FilterSelect>
        <ClearFilters
          filtered={filtered}
          onClear={() => {
            setState("");
            setRule("");
            setVm("");
          }}
          pager={pager}
        />
      </div>
      <PagedTable
        what="incidents"
        query={q}
        items={incidents}
        pager={pager}
        empty={
          filtered
            ? "No incident matches these filters."
            : "No incidents yet. When an alert rule fires on a VM, its incident appears here."
        }
        testId="incident-table"
        className="incidents table-cards table-cards-stacked"
        columns={["Incident", "State", "VM", "Opened", "Duration", "Handling"]}
        row={(i) => <IncidentRow key={i.name} incident={i} silences={silences} />}
      />
    </Page>
  );
}

function IncidentRow(props: { incident: Incident; silences: Map<string, Silence> }) {
  const i = props.incident;
  const vm = vmLink(i.vmName);
  const id = lastSegment(i.name);
  const snoozed = Number(i.snoozeUntilUnix) * 1000 > Date.now();
  return (
    <tr data-incident={id}>
      <td>
        <div className="row">
          <Badge tone={severityTone[i.severity] ?? "muted"}>{i.severity || MISSING}</Badge>
          <Link href={`/incidents/${id}`} className="strong">
            {i.ruleDisplayName || "Incident"}
          </Link>
        </div>
        <div className="muted small">
          {conditionText(i)} · fired at {fmtValue(i.firingValue)}
          {metricUnit(i.metricId)}
        </div>
      </td>
      <td data-label="State">
        <Badge tone={incidentStateTone[i.state] ?? "muted"}>{i.state}</Badge>
        {i.retireReason ? <div className="muted small">{i.retireReason}</div> : null}
        {i.noData ? (
          <div>
            <Badge tone="warn" title="the last evaluation had no data">
              no data
            </Badge>
          </div>
        ) : null}
        {i.evaluationError ? (
          <div>
            <Badge tone="bad" title="the last evaluation failed">
              eval error
            </Badge>
          </div>
        ) : null}
      </td>
      <td data-label="VM">
        {vm ? <Link href={vm.href}>{vm.label}</Link> : i.vmName || MISSING}
        {i.mountpoint ? <div className="muted small mono">{i.mountpoint}</div> : null}
      </td>
      <td data-label="Opened">
        <Time unix={i.openTimeUnix} />
        {Number(i.closeTimeUnix) ? (
          <div className="muted small">
            closed <Time unix={i.closeTimeUnix} />
          </div>
        ) : null}
      </td>
      <td className="nowrap" data-label="Duration">
        {incidentDuration(i)}
        {i.state === "OPEN" ? <span className="muted small"> so far</span> : null}
      </td>
      <td className="small" data-label="Handling">
        {i.acknowledgedBy ? (
          <div>
            Acknowledged by <Person user={i.acknowledgedBy} />{" "}
            <span className="muted">{fmtAgo(i.acknowledgeTimeUnix)}</span>
          </div>
        ) : i.state === "OPEN" ? (
          <div className="muted">Not acknowledged</div>
        ) : null}
        {snoozed ? (
          <div>
            Snoozed until <Time unix={i.snoozeUntilUnix} />
          </div>
        ) : null}
        <SilencedMarker incident={i} silences={props.silences} />
      </td>
    </tr>
  );
}

/** The incidents list's marker: a silence mutes this incident's notifications now (API `silencedBy`). */
function SilencedMarker(props: { incident: Incident; silences: Map<string, Silence> }) {
  const by = props.incident.silencedBy;
  if (by.length === 0) return null;
  // The latest end of the silences muting it: when its notifications are sent again.
  const ends = by.map((n) => Number(props.silences.get(n)?.endTimeUnix ?? 0)).filter((e) => e > 0);
  const until = ends.length === by.length ? Math.max(...ends) : 0;
  return (
    <div data-testid="incident-silenced">
      <Badge
        tone="warn"
        title={`notifications are skipped as SILENCED: ${by.map((n) => silenceLabel(props.silences.get(n))).join("; ")}`}
      >
        silenced
      </Badge>
      {until ? (
        <span className="muted">
          {" "}
          until <Time unix={until} />
        </span>
      ) : null}
    </div>
  );
}

type TimelineItem =
  | { at: number; order: number; kind: "event"; event: IncidentEvent }
  | { at: number; order: number; kind: "delivery"; delivery: Delivery };

const eventTone: Record<string, "ok" | "warn" | "bad" | "info" | "muted"> = {
  OPENED: "bad",
  RESOLVED: "ok",
  RETIRED: "muted",
  ACKNOWLEDGED: "info",
  SNOOZED: "warn",
  UNSNOOZED: "info",
  REPEAT_DUE: "bad",
};

/** One incident: its facts, the human operations, and a timeline of its events and deliveries. */
export function IncidentPage(props: { incidentId: string }) {
  const project = useProject();
  const name = `${project.name}/incidents/${props.incidentId}`;
  const queries = useQueryClient();
  const [snoozeOpen, setSnoozeOpen] = useState(false);
  const [silenceOpen, setSilenceOpen] = useState(false);
  const silences = useActiveSilences(project.name);
  const q = useQuery({
    queryKey: ["incident", name],
    queryFn: () => api.incidents.getIncident({ name }),
    refetchInterval: 15_000,
  });
  const deliveries = useQuery({
    queryKey: ["deliveries", project.name, "incident", name],
    queryFn: () =>
      api.destinations.listDeliveries({ projectName: project.name, incident: name, pageSize: 100 }),
    refetchInterval: (query) =>
      query.state.data?.deliveries.some((d) => d.state === "PENDING") ? 3000 : 15_000,
  });
  const destinations = useQuery({
    queryKey: ["destinations", project.name],
    queryFn: () => api.destinations.listDestinations({ projectName: project.name }),
  });
  const destLabels = new Map((destinations.data?.destinations ?? []).map((d) => [d.name, d.displayName]));

  const onChanged = (i: Incident) => {
    queries.setQueryData(["incident", name], i);
    void queries.invalidateQueries({ queryKey: ["incidents", project.name] });
    // The navigation's count and the VM list's (open-incidents.ts) move with it, not 30 s later.
    void queries.invalidateQueries({ queryKey: ["open-incidents", project.name] });
  };
  const ack = useMutation({
    mutationFn: () => api.incidents.acknowledgeIncident({ name }),
    onSuccess: onChanged,
  });
  const unsnooze = useMutation({
    mutationFn: () => api.incidents.unsnoozeIncident({ name }),
    onSuccess: onChanged,
  });

  const i = q.data;
  const title = i
    ? `${i.ruleDisplayName || "Incident"}${vmLink(i.vmName) ? ` on ${vmLink(i.vmName)?.label}` : ""}`
    : "Incident";
  if (q.isPending) return <Loading what="the incident" />;
  if (!i)
    return (
      <Page title="Incident" subtitle={<code>{name}</code>}>
        <ErrorBanner error={q.error} title="Could not read the incident" />
        <Link href="/incidents">← All incidents</Link>
      </Page>
    );

  const open = i.state === "OPEN";
  const snoozed = Number(i.snoozeUntilUnix) * 1000 > Date.now();
  const vm = vmLink(i.vmName);
  const items: TimelineItem[] = [
    ...i.events.map((e, n) => ({ at: Number(e.timeUnix), order: n, kind: "event" as const, event: e })),
    ...(deliveries.data?.deliveries ?? []).map((d, n) => ({
      at: Number(d.createTimeUnix),
      order: 10_000 + n,
      kind: "delivery" as const,
      delivery: d,
    })),
  ].sort((a, b) => a.at - b.at || a.order - b.order);

  return (
    <Page
      title={title}
      subtitle={
        <>
          <Link href="/incidents">Incidents</Link> / <code>{props.incidentId}</code>
        </>
      }
      actions={
        open && project.canWrite ? (
          <>
            <Button
              kind={i.acknowledgedBy ? "plain" : "primary"}
              onClick={() => ack.mutate()}
              busy={ack.isPending}
              disabled={!!i.acknowledgedBy}
              title={i.acknowledgedBy ? "Already acknowledged" : "Record that you are looking at it"}
            >
              {i.acknowledgedBy ? "Acknowledged" : "Acknowledge"}
            </Button>
            <Button onClick={() => setSnoozeOpen(true)}>{snoozed ? "Change snooze" : "Snooze…"}</Button>
            <Button
              onClick={() => setSilenceOpen(true)}
              title="Mute this rule's notifications on this VM for a window (a silence)"
            >
              Silence…
            </Button>
            {snoozed ? (
              <Button onClick={() => unsnooze.mutate()} busy={unsnooze.isPending}>
                Unsnooze
              </Button>
            ) : null}
          </>
        ) : null
      }
    >
      <ErrorBanner error={ack.error} title="Could not acknowledge" />
      <ErrorBanner error={unsnooze.error} title="Could not unsnooze" />
      <ErrorBanner error={q.error} title="Could not refresh the incident" />
      {!project.canWrite && open ? (
        <p className="banner banner-info">
          Your role <strong>{project.role}</strong> can read incidents; acknowledging and snoozing need the
          owner or editor role.
        </p>
      ) : null}
      {!open ? (
        <p className="banner banner-info">
          This incident is {i.state.toLowerCase()}: only an open incident can be acknowledged or snoozed.
        </p>
      ) : null}

      <div className="incident-summary" data-testid="incident-summary">
        <div className="card">
          <h2>Status</h2>
          <dl className="kv">
            <dt>State</dt>
            <dd>
              <Badge tone={incidentStateTone[i.state] ?? "muted"}>{i.state}</Badge>{" "}
              {i.retireReason ? <span className="muted">{i.retireReason}</span> : null}
            </dd>
            <dt>Severity</dt>
            <dd>
              <Badge tone={severityTone[i.severity] ?? "muted"}>{i.severity || MISSING}</Badge>
            </dd>
            <dt>Opened</dt>
            <dd>
              <Time unix={i.openTimeUnix} />
            </dd>
            <dt>{open ? "Open for" : "Closed"}</dt>
            <dd>
              {open ? (
                incidentDuration(i)
              ) : (
                <>
                  <Time unix={i.closeTimeUnix} /> <span className="muted">after {incidentDuration(i)}</span>
                </>
              )}
            </dd>
            <dt>Acknowledged</dt>
            <dd data-testid="acknowledged">
              {i.acknowledgedBy ? (
                <>
                  by <Person user={i.acknowledgedBy} />, <Time unix={i.acknowledgeTimeUnix} />
                </>
              ) : (
                <span className="muted">no</span>
              )}
            </dd>
            <dt>Snoozed</dt>
            <dd data-testid="snoozed">
              {snoozed ? (
                <>
                  until <Time unix={i.snoozeUntilUnix} />{" "}
                  <span className="muted">
                    ({fmtAgo(i.snoozeUntilUnix)}, by <Person user={i.snoozedBy} />)
                  </span>
                </>
              ) : (
                <span className="muted">no</span>
              )}
            </dd>
            <dt>Silenced</dt>
            <dd data-testid="silenced">
              {i.silencedBy.length > 0 ? (
                <>
                  {i.silencedBy.map((n, k) => (
                    <span key={n} data-silence={n}>
                      {k > 0 ? ", " : null}
                      <Link href="/silences" title={n}>
                        {silenceLabel(silences.get(n))}
                      </Link>
                      {silences.get(n)?.creator ? (
                        <>
                          {" "}
                          by <Person user={silences.get(n)?.creator ?? ""} />
                        </>
                      ) : null}
                    </span>
                  ))}{" "}
                  <span className="muted">
                    ({open ? "its notifications" : "a message of it still to send"} are skipped as SILENCED
                    while it lasts)
                  </span>
                </>
              ) : (
                <span className="muted">no</span>
              )}
            </dd>
            {open && Number(i.nextNotifyTimeUnix) ? (
              <>
                <dt>Repeats</dt>
                <dd>
                  next notification due <Time unix={i.nextNotifyTimeUnix} />
                  {snoozed ? <span className="muted"> (skipped while snoozed)</span> : null}
                </dd>
              </>
            ) : null}
          </dl>
        </div>
        <div className="card">
          <h2>What fired</h2>
          <dl className="kv">
            <dt>Rule</dt>
            <dd>
              <Link href={ruleHref(i.rule)}>{i.ruleDisplayName || lastSegment(i.rule)}</Link>{" "}
              <span className="muted small">version {i.ruleVersion}</span>
            </dd>
            <dt>VM</dt>
            <dd>
              {vm ? <Link href={vm.href}>{vm.label}</Link> : i.vmName}
              {i.mountpoint ? (
                <span className="muted">
                  {" "}
                  · <code>{i.mountpoint}</code>
                </span>
              ) : null}
            </dd>
            <dt>Condition</dt>
            <dd>
              <code>{conditionText(i)}</code>
            </dd>
            <dt>Fired at</dt>
            <dd className="value-vs">
              <strong>
                {fmtValue(i.firingValue)}
                {metricUnit(i.metricId)}
              </strong>{" "}
              <span className="muted">
                {operatorSymbol(i.operator)} threshold {fmtValue(i.threshold)}
                {metricUnit(i.metricId)}
              </span>
            </dd>
            <dt>Latest value</dt>
            <dd>
              {fmtValue(i.lastValue)}
              {i.lastValue !== undefined ? metricUnit(i.metricId) : ""}
            </dd>
            <dt>Evaluation</dt>
            <dd>
              {i.noData || i.evaluationError ? (
                <>
                  {i.noData ? (
                    <Badge
                      tone="warn"
                      title="the incident stays open: missing data never counts as a recovery"
                    >
                      no data
                    </Badge>
                  ) : null}{" "}
                  {i.evaluationError ? <Badge tone="bad">evaluation error</Badge> : null}
                  <div className="muted small">Missing data or errors never resolve an incident.</div>
                </>
              ) : (
                <Badge tone="ok">data ok</Badge>
              )}
            </dd>
          </dl>
        </div>
      </div>

      <IncidentMetric incident={i} />

      <div className="card">
        <header className="card-header">
          <h2>Timeline</h2>
          <span className="muted small">
            {i.events.length} event{i.events.length === 1 ? "" : "s"},{" "}
            {deliveries.data ? deliveries.data.deliveries.length : "…"} deliver
            {deliveries.data?.deliveries.length === 1 ? "y" : "ies"}
            {deliveries.data?.nextPageToken ? " (newest 100)" : ""}
          </span>
        </header>
        <ErrorBanner error={deliveries.error} title="Could not list the deliveries" />
        <ol className="timeline incident-timeline" data-testid="timeline">
          {items.map((it) =>
            it.kind === "event" ? (
              <EventItem key={`e-${it.event.id}`} event={it.event} incident={i} />
            ) : (
              <DeliveryItem
                key={`d-${it.delivery.name}`}
                delivery={it.delivery}
                label={destLabels.get(it.delivery.destination)}
              />
            ),
          )}
        </ol>
        {i.events.length > 0 && deliveries.data?.deliveries.length === 0 ? (
          <p className="muted small timeline-note">
            No deliveries: the rule names no destination, or its events notify nobody (acknowledge and snooze
            are recorded here only).
          </p>
        ) : null}
      </div>

      <RecentActivity
        resource={name}
        changed={[i.state, i.acknowledgeTimeUnix, i.snoozeUntilUnix, i.events.length]}
      />

      <SilenceDialog
        open={silenceOpen}
        onClose={() => setSilenceOpen(false)}
        projectName={project.name}
        rule={i.rule}
        vm={i.vmName}
        what={title}
      />
      <IncidentSnoozeDialog
        open={snoozeOpen}
        incident={i}
        onClose={() => setSnoozeOpen(false)}
        onSnoozed={(n) => {
          onChanged(n);
          setSnoozeOpen(false);
        }}
      />
    </Page>
  );
}

function parseDetail(detail: string): Record<string, unknown> {
  try {
    const v = JSON.parse(detail || "{}") as unknown;
    return v && typeof v === "object" ? (v as Record<string, unknown>) : {};
  } catch {
    return { detail };
  }
}

function EventItem(props: { event: IncidentEvent; incident: Incident }) {
  const e = props.event;
  const i = props.incident;
  const d = parseDetail(e.detail);
  const unit = metricUnit(i.metricId);
  const parts: string[] = [];
  if (typeof d.value === "number") {
    parts.push(
      typeof d.threshold === "number"
        ? `value ${fmtValue(d.value)}${unit} ${operatorSymbol(String(d.operator ?? i.operator))} ${fmtValue(d.threshold)}${unit}`
        : `value ${fmtValue(d.value)}${unit}`,
    );
  }
  if (typeof d.reason === "string") parts.push(d.reason);
  const until = typeof d.snoozeUntilUnix === "number" ? d.snoozeUntilUnix : undefined;
  const known = new Set(["value", "threshold", "operator", "reason", "snoozeUntilUnix"]);
  for (const [k, v] of Object.entries(d)) if (!known.has(k)) parts.push(`${k}: ${String(v)}`);
  return (
    <li className={`tl-event tl-${eventTone[e.kind] ?? "muted"}`} data-event={e.kind}>
      <div className="tl-head">
        <Badge tone={eventTone[e.kind] ?? "muted"}>{e.kind}</Badge>
        <Time unix={e.timeUnix} className="muted small" />
        <span className="muted small">
          by <Person user={e.actor} />
        </span>
      </div>
      {parts.length > 0 || until ? (
        <div className="tl-body small">
          {parts.join(" · ")}
          {until ? (
            <>
              {parts.length ? " · " : ""}
              {e.kind === "UNSNOOZED" ? "was snoozed until " : "until "}
              <Time unix={until} />
            </>
          ) : null}
        </div>
      ) : null}
    </li>
  );
}

function DeliveryItem(props: { delivery: Delivery; label?: string }) {
  const d = props.delivery;
  // Open by default only when it failed: a skipped delivery has no attempt to show, and an empty box per
  // delivery and repeat is what made one incident page 3,599 px tall on a phone (issue 43, item 5).
  const [expanded, setExpanded] = useState(d.state === "FAILED" && d.attempts.length > 0);
  const [detail, setDetail] = useState(false);
  const dest = lastSegment(d.destination);
  return (
    <li className="tl-delivery" data-delivery={d.deliveryId} data-state={d.state}>
      <div className="tl-head">
        <span className="tl-kind">Delivery</span>
        <Time unix={d.createTimeUnix} className="muted small" />
        <span>
          {EVENT_TYPES[d.eventType] ?? d.eventType} →{" "}
          <Link href={`/destinations/${dest}`}>{props.label ?? dest}</Link>
        </span>
        <DeliveryStateBadge delivery={d} />
        {d.attempts.length > 0 ? (
          <button
            type="button"
            className="linklike small"
            aria-expanded={expanded}
            onClick={() => setExpanded(!expanded)}
          >
            {d.attempts.length} attempt{d.attempts.length === 1 ? "" : "s"} {expanded ? "▾" : "▸"}
          </button>
        ) : (
          <span className="muted small">no attempt</span>
        )}
        <button type="button" className="linklike small" onClick={() => setDetail(true)}>
          Details
        </button>
      </div>
      {d.skipReason ? (
        <div className="tl-body small">
          Skipped: <SkipReason reason={d.skipReason} />
        </div>
      ) : null}
      {d.state === "PENDING" && Number(d.nextAttemptTimeUnix) ? (
        <div className="tl-body small muted">
          Next attempt <Time unix={d.nextAttemptTimeUnix} />
        </div>
      ) : null}
      {expanded && d.attempts.length > 0 ? (
        <div className="tl-body">
          <AttemptsTable attempts={d.attempts} />
        </div>
      ) : null}
      <DeliveryDialog
        name={detail ? d.name : undefined}
        onClose={() => setDetail(false)}
        destinationLabel={props.label}
      />
    </li>
  );
}
