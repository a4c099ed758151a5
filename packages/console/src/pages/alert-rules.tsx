import type { AlertRule, AlertRuleTemplate } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Link, useLocation, useSearch } from "wouter";
import { api, describeError, type ErrorView } from "../api.ts";
import { conditionText, fmtSeconds, SeverityBadge, SyncBadge } from "../components/alert-catalog.tsx";
import {
  BLANK_FORM,
  type FieldErrors,
  formFieldOf,
  formFromSpec,
  type RuleForm,
  RuleFormFields,
  specDiff,
  specFromForm,
  useDestinations,
} from "../components/alert-form.tsx";
import { AlertInstances } from "../components/alert-instances.tsx";
import { AlertPreview } from "../components/alert-preview.tsx";
import { RecentActivity } from "../components/audit-events.tsx";
import { useProjectVms } from "../components/paged-list.tsx";
import { metricInfo } from "../components/rule-metrics.ts";
import {
  Badge,
  Button,
  Dialog,
  Empty,
  ErrorBanner,
  Loading,
  Page,
  Pager,
  usePager,
} from "../components/ui.tsx";
import { fmtAgo, fmtTime, lastSegment, newRequestId } from "../format.ts";
import { useProject } from "../session.tsx";

const ruleKey = (project: string) => ["alert-rules", project];
const oneRuleKey = (name: string) => ["alert-rule", name];

function useTemplates() {
  return useQuery({
    queryKey: ["alert-templates"],
    staleTime: Number.POSITIVE_INFINITY,
    queryFn: async () => (await api.alerts.listAlertRuleTemplates({})).templates,
  });
}

/** The project's rules: condition in words, severity, state, instance counts, sync status, version. */
export function AlertRulesPage() {
  const project = useProject();
  const pager = usePager();
  const [choosing, setChoosing] = useState(false);
  const q = useQuery({
    queryKey: [...ruleKey(project.name), pager.token],
    queryFn: () =>
      api.alerts.listAlertRules({ projectName: project.name, pageSize: 50, pageToken: pager.token }),
    refetchInterval: (query) =>
      query.state.data?.rules.some((r) => r.syncStatus === "PENDING") ? 2_000 : 30_000,
  });
  const rules = q.data?.rules ?? [];
  return (
    <Page
      title="Alert rules"
      subtitle="Each rule watches one metric of the project's VMs every 30 seconds; an instance that fires opens an incident."
      actions={
        project.canWrite ? (
          <Button kind="primary" onClick={() => setChoosing(true)}>
            New rule
          </Button>
        ) : (
          <Badge tone="muted" title="Your role can read rules but not change them">
            read-only ({project.role})
          </Badge>
        )
      }
    >
      <ErrorBanner error={q.error} title="Could not list alert rules" />
      {q.isPending ? (
        <Loading what="alert rules" />
      ) : rules.length === 0 && !q.error ? (
        <Empty>
          No alert rules yet.
          {project.canWrite
            ? " Start from a template: CPU, memory, filesystem, unexpected stop or telemetry."
            : ""}
        </Empty>
      ) : (
        <table className="table alert-rules-table table-cards" data-testid="alert-rules">
          <thead>
            <tr>
              <th>Rule</th>
              <th>Severity</th>
              <th>State</th>
              <th>Instances</th>
              <th>Sync</th>
              <th className="num">Version</th>
            </tr>
          </thead>
          <tbody>
            {rules.map((r) => (
              <RuleRow key={r.name} rule={r} />
            ))}
          </tbody>
        </table>
      )}
      <Pager pager={pager} nextToken={q.data?.nextPageToken} />
      <TemplateChooser open={choosing} onClose={() => setChoosing(false)} />
    </Page>
  );
}

function RuleRow(props: { rule: AlertRule }) {
  const r = props.rule;
  const spec = r.spec;
  const c = r.instanceCounts;
  return (
    <tr data-rule={r.id} data-testid="alert-rule-row">
      <td>
        <Link href={`/alerts/${r.id}`} className="alert-rule-name">
          {spec?.displayName || r.id}
        </Link>
        <div className="alert-condition" data-testid="alert-rule-condition">
          {spec ? conditionText(spec) : "—"}
        </div>
        <div className="muted small">
          {spec?.allVms
            ? "All VMs"
            : `${spec?.vmNames.length ?? 0} selected VM${spec?.vmNames.length === 1 ? "" : "s"}`}
          {" · "}
          {spec?.destinationNames.length
            ? `${spec.destinationNames.length} destination${spec.destinationNames.length === 1 ? "" : "s"}`
            : "console only"}
        </div>
      </td>
      <td data-label="Severity">{spec ? <SeverityBadge severity={spec.severity} /> : null}</td>
      <td data-label="State">
        {spec?.enabled === false ? <Badge tone="muted">paused</Badge> : <Badge tone="ok">enabled</Badge>}
      </td>
      <td data-label="Instances">
        <div className="alert-counts" data-testid="alert-rule-counts">
          <Badge tone={c?.firing ? "bad" : "muted"}>{c?.firing ?? 0} firing</Badge>
          <Badge tone={c?.pending ? "warn" : "muted"}>{c?.pending ?? 0} pending</Badge>
          <Badge
            tone={c?.noData ? "warn" : "muted"}
            title="instances whose last evaluation had no data (a stopped VM's are not counted: it sends nothing)"
          >
            {c?.noData ?? 0} no data
          </Badge>
          {c?.error ? (
            <Badge tone="bad" title="instances whose last evaluation failed">
              {c.error} error
            </Badge>
          ) : null}
        </div>
        <div className="muted small">of {r.expectedInstances} watched</div>
      </td>
      <td data-label="Sync">
        <SyncBadge status={r.syncStatus} reason={r.syncReason} testId="alert-rule-sync" />
      </td>
      <td className="num" data-label="Version">
        <span data-testid="alert-rule-version">v{r.version}</span>
        {r.appliedVersion !== r.version && r.appliedVersion !== "0" ? (
          <div className="muted small">applied v{r.appliedVersion}</div>
        ) : null}
        <div className="muted small" title={fmtTime(r.updateTimeUnix)}>
          {fmtAgo(r.updateTimeUnix)}
        </div>
      </td>
    </tr>
  );
}

function TemplateChooser(props: { open: boolean; onClose: () => void }) {
  const templates = useTemplates();
  const [, navigate] = useLocation();
  return (
    <Dialog title="New alert rule" open={props.open} onClose={props.onClose}>
      <div className="alert-templates" data-testid="alert-templates">
        <p className="muted">
          Start from a template (every VM, hourly repeat, no destinations) or from a blank rule.
        </p>
        <ErrorBanner error={templates.error} title="Could not list templates" />
        {templates.isPending ? <Loading what="templates" /> : null}
        {(templates.data ?? []).map((t: AlertRuleTemplate) => (
          <button
            key={t.id}
            type="button"
            className="alert-template"
            data-template={t.id}
            onClick={() => navigate(`/alerts/new?template=${encodeURIComponent(t.id)}`)}
          >
            <span className="alert-template-head">
              <strong>{t.displayName}</strong>
              {t.spec ? <SeverityBadge severity={t.spec.severity} /> : null}
            </span>
            {t.spec ? <span className="alert-condition">{conditionText(t.spec)}</span> : null}
            <span className="muted small">{t.description}</span>
          </button>
        ))}
        <button
          type="button"
          className="alert-template alert-template-blank"
          data-template="blank"
          onClick={() => navigate("/alerts/new")}
        >
          <strong>Blank rule</strong>
          <span className="muted small">Choose the metric, condition and VMs yourself.</span>
        </button>
      </div>
    </Dialog>
  );
}

/** Messages that survive the remount from /alerts/new to /alerts/<id> after the first save. */
const flash = new Map<string, string>();

const AMBIGUOUS = new Set(["Unknown", "Unavailable", "DeadlineExceeded", "Canceled", "Internal"]);
/** The call may or may not have reached the server: retrying it must reuse its request id. */
const ambiguous = (e: ErrorView) => !e.reason && AMBIGUOUS.has(e.code);

export function AlertRulePage(props: { ruleId: string }) {
  // A new rule keeps its own editor; saving it moves to the rule's address, which loads it afresh.
  return <RuleEditor key={props.ruleId} ruleId={props.ruleId} />;
}

interface Loaded {
  version: string;
  form: RuleForm;
}

function RuleEditor(props: { ruleId: string }) {
  const project = useProject();
  const queries = useQueryClient();
  const [, navigate] = useLocation();
  const search = useSearch();
  const isNew = props.ruleId === "new";
  const templateId = isNew ? new URLSearchParams(search).get("template") : null;
  const [id] = useState(() => (isNew ? crypto.randomUUID() : props.ruleId));
  const name = `${project.name}/alertRules/${id}`;

  const rule = useQuery({
    queryKey: oneRuleKey(name),
    enabled: !isNew,
    queryFn: () => api.alerts.getAlertRule({ name, includeInstances: true }),
    // A save nudges the evaluator, so PENDING usually lasts well under a second: ask every second for a
    // little while, then at the evaluator's own pace (it applies revisions at each 30 s cycle).
    refetchInterval: (q) => {
      const d = q.state.data;
      if (d?.syncStatus !== "PENDING") return 15_000;
      const pendingFor = Date.now() / 1000 - Number(d.updateTimeUnix);
      return pendingFor < 15 ? 1_000 : 10_000;
    },
  });
  const templates = useTemplates();
  const vms = useProjectVms(project.name);
  const destinations = useDestinations(project.name);

  const [form, setForm] = useState<RuleForm>();
  const [loaded, setLoaded] = useState<Loaded>();
  const [notice, setNotice] = useState<string | undefined>(() => flash.get(id));
  useEffect(() => {
    flash.delete(id);
  }, [id]);

  // The form starts from the stored rule (its version is what a save expects), a template, or blank.
  useEffect(() => {
    if (form) return;
    if (!isNew) {
      if (rule.data?.spec) {
        const f = formFromSpec(rule.data.spec);
        setForm(f);
        setLoaded({ version: rule.data.version, form: f });
      }
      return;
    }
    if (templateId) {
      const t = templates.data?.find((x) => x.id === templateId);
      if (t) setForm(formFromSpec(t.spec));
      else if (templates.data || templates.error) setForm(BLANK_FORM);
      return;
    }
    setForm(BLANK_FORM);
  }, [form, isNew, rule.data, templateId, templates.data, templates.error]);

  const vmLabel = useCallback(
    (n: string) => {
      const v = vms.data?.find((x) => x.name === n);
      return v?.displayName || lastSegment(n);
    },
    [vms.data],
  );
  const destLabel = useCallback(
    (n: string) => destinations.data?.find((d) => d.name === n)?.displayName || lastSegment(n),
    [destinations.data],
  );

  // Save: one request id per save action; reused only to retry an attempt whose answer never came.
  const attempt = useRef<{ requestId: string; body: string; unanswered: boolean } | null>(null);
  const [saveError, setSaveError] = useState<ErrorView>();
  const [conflict, setConflict] = useState<{ currentVersion: string; attemptedFrom: string }>();
  const save = useMutation({
    mutationFn: async (v: { expectedVersion: string; form: RuleForm }) => {
      const { spec } = specFromForm(v.form);
      if (!spec) throw new Error("the form has invalid fields");
      const body = JSON.stringify({ id, expectedVersion: v.expectedVersion, spec });
      if (!attempt.current || attempt.current.body !== body || !attempt.current.unanswered)
        attempt.current = { requestId: newRequestId(), body, unanswered: false };
      const requestId = attempt.current.requestId;
      for (let tries = 0; ; tries++) {
        try {
          return await api.alerts.saveAlertRule({
            projectName: project.name,
            id,
            requestId,
            expectedVersion: v.expectedVersion,
            spec,
          });
        } catch (err) {
          const e = describeError(err);
          if (!ambiguous(e)) throw err;
          attempt.current.unanswered = true;
          if (tries >= 2) throw err;
          await new Promise((r) => setTimeout(r, 500 * (tries + 1)));
        }
      }
    },
    onMutate: () => {
      setSaveError(undefined);
      setNotice(undefined);
    },
    onSuccess: (saved) => {
      attempt.current = null;
      setConflict(undefined);
      const f = formFromSpec(saved.spec);
      const msg = saved.replayed
        ? `Saved version ${saved.version} (the server had already accepted this save).`
        : `Saved version ${saved.version}.`;
      void queries.invalidateQueries({ queryKey: ruleKey(project.name) });
      if (isNew) {
        flash.set(saved.id, msg);
        queries.setQueryData(oneRuleKey(name), saved);
        navigate(`/alerts/${saved.id}`, { replace: true });
        return;
      }
      setForm(f);
      setLoaded({ version: saved.version, form: f });
      setNotice(msg);
      queries.setQueryData(oneRuleKey(name), (old: AlertRule | undefined) =>
        old ? { ...saved, instances: old.instances } : saved,
      );
      void queries.invalidateQueries({ queryKey: oneRuleKey(name) });
    },
    onError: (err, v) => {
      const e = describeError(err);
      if (e.reason === "VERSION_CONFLICT") {
        setConflict({ currentVersion: e.metadata.currentVersion ?? "?", attemptedFrom: v.expectedVersion });
        if (!isNew) void queries.invalidateQueries({ queryKey: oneRuleKey(name) });
        return;
      }
      setSaveError(e);
    },
  });

  const [deleting, setDeleting] = useState(false);
  const remove = useMutation({
    mutationFn: () => api.alerts.deleteAlertRule({ name, expectedVersion: loaded?.version ?? "" }),
    onSuccess: () => {
      void queries.invalidateQueries({ queryKey: ruleKey(project.name) });
      queries.removeQueries({ queryKey: oneRuleKey(name) });
      navigate("/alerts");
    },
  });

  const parsed = useMemo(() => (form ? specFromForm(form) : { errors: {} as FieldErrors }), [form]);
  const serverField = formFieldOf(saveError?.field);
  const fieldErrors: FieldErrors = {};
  const [touched, setTouched] = useState(false);
  if (touched) Object.assign(fieldErrors, parsed.errors);
  if (saveError && serverField) fieldErrors[serverField] = saveError.message.replace(/^spec\.[^:]*:\s*/, "");

  if (!isNew && rule.error) {
    const e = describeError(rule.error);
    return (
      <Page title="Alert rule">
        <ErrorBanner
          error={rule.error}
          title={e.code === "NotFound" ? "No such rule" : "Could not load the rule"}
        />
        <Link href="/alerts">← All alert rules</Link>
      </Page>
    );
  }
  if (!form) return <Loading what="the rule" />;

  const r = rule.data;
  const m = metricInfo(form.metricId);
  const dirty = loaded ? JSON.stringify(loaded.form) !== JSON.stringify(form) : true;
  const newer = r && loaded && r.version !== loaded.version && !conflict && !save.isPending;
  const onSave = (expectedVersion: string) => {
    setTouched(true);
    if (!parsed.spec) return;
    save.mutate({ expectedVersion, form });
  };
  const title = isNew ? "New alert rule" : r?.spec?.displayName || "Alert rule";

  return (
    <Page
      title={title}
      subtitle={
        <>
          <Link href="/alerts">Alert rules</Link>
          {" / "}
          {isNew ? (
            templateId ? (
              `from the ${templateId} template`
            ) : (
              "blank"
            )
          ) : (
            <span data-testid="alert-rule-heading">
              {r?.spec ? conditionText(r.spec) : ""} · version{" "}
              <span data-testid="alert-version">{r?.version}</span>
            </span>
          )}
        </>
      }
      actions={
        !isNew && project.canWrite ? (
          <Button kind="danger" onClick={() => setDeleting(true)}>
            Delete rule
          </Button>
        ) : !project.canWrite ? (
          <Badge tone="muted">read-only ({project.role})</Badge>
        ) : null
      }
    >
      {notice ? (
        <div className="banner banner-info" role="status" data-testid="alert-notice">
          {notice}
        </div>
      ) : null}
      {conflict && loaded !== undefined ? (
        <ConflictPanel
          name={name}
          conflict={conflict}
          loaded={loaded}
          mine={form}
          vmLabel={vmLabel}
          destLabel={destLabel}
          busy={save.isPending}
          onReload={(theirs) => {
            setForm(theirs.form);
            setLoaded(theirs);
            setConflict(undefined);
            setSaveError(undefined);
            setNotice(`Loaded version ${theirs.version}. Your edits were discarded.`);
          }}
          onOverwrite={(version) => onSave(version)}
        />
      ) : null}
      {conflict && isNew ? (
        <div className="banner banner-error" role="alert">
          A rule with this id already exists (version {conflict.currentVersion}). Reload the page to start a
          new one.
        </div>
      ) : null}
      {newer && r ? (
        <div className="banner banner-warn" data-testid="alert-newer">
          Version {r.version} was saved since you opened version {loaded.version}.{" "}
          <Button
            onClick={() => {
              if (!r.spec) return;
              const f = formFromSpec(r.spec);
              setForm(f);
              setLoaded({ version: r.version, form: f });
              setSaveError(undefined);
            }}
          >
            {dirty ? "Discard my edits and load it" : "Load it"}
          </Button>
        </div>
      ) : null}
      {!project.canWrite ? (
        <div className="banner banner-info">
          Your role ({project.role}) can read this rule and preview it, but not change it.
        </div>
      ) : null}

      <div className={isNew ? "" : "alert-editor-grid"}>
        <section className="card">
          <RuleFormFields
            form={form}
            onChange={(f) => {
              // Editing the field the server refused clears its message; the next save checks it again.
              if (serverField && JSON.stringify(f[serverField]) !== JSON.stringify(form[serverField]))
                setSaveError(undefined);
              setForm(f);
              setNotice(undefined);
            }}
            errors={fieldErrors}
            vms={vms.data}
            destinations={destinations.data}
            destinationsError={destinations.error}
            disabled={!project.canWrite || save.isPending}
          />
          {saveError && !serverField ? (
            <div className="banner banner-error" role="alert" data-testid="alert-save-error">
              <strong>Not saved:</strong> {saveError.message}
              {saveError.reason ? <span className="reason">{saveError.reason}</span> : null}
              {attempt.current?.unanswered ? (
                <div className="small">
                  The answer never arrived; saving again retries the same request, so it cannot be applied
                  twice.
                </div>
              ) : null}
            </div>
          ) : saveError ? (
            <div className="banner banner-error" role="alert" data-testid="alert-save-error">
              <strong>Not saved:</strong> the {fieldLabel(serverField)} needs a change (see the field above).
            </div>
          ) : null}
          {project.canWrite ? (
            <div className="alert-savebar">
              <Button
                kind="primary"
                busy={save.isPending}
                disabled={!!conflict || (!isNew && !dirty)}
                onClick={() => onSave(isNew ? "0" : (loaded?.version ?? "0"))}
              >
                {isNew ? "Create rule" : "Save"}
              </Button>
              {!isNew && dirty ? (
                <Button
                  onClick={() => {
                    if (loaded) setForm(loaded.form);
                    setSaveError(undefined);
                    setTouched(false);
                  }}
                >
                  Discard changes
                </Button>
              ) : null}
              <span className="muted small">
                {isNew
                  ? "Creates version 1."
                  : dirty
                    ? `Unsaved changes to version ${loaded?.version}.`
                    : `No changes to version ${loaded?.version}.`}
              </span>
            </div>
          ) : null}
        </section>
        {!isNew && r ? <RuleStatus rule={r} /> : null}
      </div>

      <AlertPreview
        projectName={project.name}
        spec={parsed.spec}
        invalidReason={Object.entries(parsed.errors)
          .map(([k, v]) => `${fieldLabel(k)} ${v}`)
          .join("; ")}
        vmLabel={vmLabel}
        rule={isNew ? undefined : r}
      />

      {!isNew && r ? (
        <section className="card">
          <header className="alert-section-header">
            <div>
              <h2>Instances</h2>
              <p className="muted small">
                One per VM{m?.perMountpoint ? " and mountpoint" : ""} of the applied version (v
                {r.appliedVersion}
                ). No data and errors flag an instance but never change its state.
              </p>
            </div>
          </header>
          <AlertInstances
            instances={r.instances}
            watched={
              (r.appliedSpec ?? r.spec)?.allVms
                ? (vms.data ?? []).filter((v) => v.state !== "DELETED").map((v) => v.name)
                : ((r.appliedSpec ?? r.spec)?.vmNames ?? [])
            }
            unit={metricInfo(r.appliedSpec?.metricId ?? r.spec?.metricId ?? "")?.unit ?? ""}
            perMountpoint={!!metricInfo(r.appliedSpec?.metricId ?? r.spec?.metricId ?? "")?.perMountpoint}
            vmLabel={vmLabel}
            vmState={(n) => vms.data?.find((v) => v.name === n)?.state}
          />
        </section>
      ) : null}

      {!isNew && r ? <RecentActivity resource={name} changed={r.version} /> : null}

      <Dialog title="Delete this alert rule?" open={deleting} onClose={() => setDeleting(false)}>
        <div data-testid="alert-delete-dialog">
          <p>
            <strong>{r?.spec?.displayName}</strong> (version {loaded?.version}) will stop being evaluated. Its{" "}
            {r?.instances.length ?? 0} stored instance{r?.instances.length === 1 ? "" : "s"} and open
            incidents are retired as “rule deleted” — never resolved.
          </p>
          {remove.error ? (
            describeError(remove.error).reason === "VERSION_CONFLICT" ? (
              <div className="banner banner-error" role="alert">
                Someone saved version {describeError(remove.error).metadata.currentVersion} since you opened
                version {loaded?.version}. Close this, review their version, then delete.
              </div>
            ) : (
              <ErrorBanner error={remove.error} title="Not deleted" />
            )
          ) : null}
          <div className="row alert-dialog-actions">
            <Button kind="danger" busy={remove.isPending} onClick={() => remove.mutate()}>
              Delete rule
            </Button>
            <Button onClick={() => setDeleting(false)}>Cancel</Button>
          </div>
        </div>
      </Dialog>
    </Page>
  );
}

function fieldLabel(k: string | undefined): string {
  const labels: Record<string, string> = {
    displayName: "display name",
    metricId: "metric",
    operator: "operator",
    threshold: "threshold",
    sustainedSeconds: "sustained time",
    severity: "severity",
    allVms: "VM selection",
    vmNames: "VM selection",
    destinationNames: "destinations",
    repeatIntervalSeconds: "repeat interval",
    enabled: "enabled",
    forecastHorizonSeconds: "forecast's time ahead",
    forecastLookbackSeconds: "forecast's sample window",
  };
  return (k && labels[k]) || k || "field";
}

/** Version, sync status (PENDING → APPLIED / FAILED with the reason), instance counts, times. */
function RuleStatus(props: { rule: AlertRule }) {
  const r = props.rule;
  const c = r.instanceCounts;
  return (
    <section className="card alert-status" data-testid="alert-status">
      <h2>Status</h2>
      <dl className="kv">
        <dt>Version</dt>
        <dd>
          v{r.version}
          {r.appliedVersion !== r.version ? (
            <span className="muted">
              {" "}
              · evaluator runs {r.appliedVersion === "0" ? "no version yet" : `v${r.appliedVersion}`}
            </span>
          ) : null}
        </dd>
        <dt>Sync</dt>
        <dd>
          <SyncBadge status={r.syncStatus} reason={r.syncReason} testId="alert-sync" />
          {r.syncStatus === "PENDING" ? (
            <div className="muted small">
              {Date.now() / 1000 - Number(r.updateTimeUnix) < 15
                ? "waiting for the evaluator…"
                : "the evaluator applies it at its next cycle (every 30 s); the previous version, if any, keeps running"}
            </div>
          ) : null}
        </dd>
        <dt>State</dt>
        <dd>
          {r.spec?.enabled === false ? <Badge tone="muted">paused</Badge> : <Badge tone="ok">enabled</Badge>}
        </dd>
        <dt>Watching</dt>
        <dd>
          {r.expectedInstances} instance{r.expectedInstances === 1 ? "" : "s"}
        </dd>
        <dt>Now</dt>
        <dd className="alert-counts">
          <Badge tone={c?.firing ? "bad" : "muted"}>{c?.firing ?? 0} firing</Badge>
          <Badge tone={c?.pending ? "warn" : "muted"}>{c?.pending ?? 0} pending</Badge>
          <Badge tone={c?.noData ? "warn" : "muted"}>{c?.noData ?? 0} no data</Badge>
          {c?.error ? <Badge tone="bad">{c.error} error</Badge> : null}
        </dd>
        {r.spec?.repeatIntervalSeconds ? (
          <>
            <dt>Repeats</dt>
            <dd>every {fmtSeconds(r.spec.repeatIntervalSeconds)} while firing</dd>
          </>
        ) : null}
        <dt>Created</dt>
        <dd>{fmtTime(r.createTimeUnix)}</dd>
        <dt>Last saved</dt>
        <dd title={fmtTime(r.updateTimeUnix)}>{fmtAgo(r.updateTimeUnix)}</dd>
      </dl>
      {r.appliedSpec ? (
        <p className="muted small">
          The evaluator still runs: {conditionText(r.appliedSpec)} ({r.appliedSpec.displayName}).
        </p>
      ) : null}
    </section>
  );
}

/**
 * A save refused with VERSION_CONFLICT: says who-what-when in words, shows what the other save changed
 * against the version this form was opened from, and offers to load theirs or overwrite it with ours.
 */
function ConflictPanel(props: {
  name: string;
  conflict: { currentVersion: string; attemptedFrom: string };
  loaded: Loaded;
  mine: RuleForm;
  vmLabel: (n: string) => string;
  destLabel: (n: string) => string;
  busy: boolean;
  onReload: (theirs: Loaded) => void;
  onOverwrite: (version: string) => void;
}) {
  const theirs = useQuery({
    queryKey: ["alert-rule-conflict", props.name, props.conflict.currentVersion],
    queryFn: () => api.alerts.getAlertRule({ name: props.name }),
  });
  const t = theirs.data;
  const theirForm = t?.spec ? formFromSpec(t.spec) : undefined;
  const current = t?.version ?? props.conflict.currentVersion;
  // Every field that either save touched: what you opened, what they saved, what you typed.
  const theirChanges = theirForm
    ? specDiff(props.loaded.form, theirForm, props.vmLabel, props.destLabel)
    : [];
  const myChanges = specDiff(props.loaded.form, props.mine, props.vmLabel, props.destLabel);
  const all = theirForm
    ? specDiff(props.loaded.form, props.loaded.form, props.vmLabel, props.destLabel, true)
    : [];
  const changed = all
    .filter(
      (f) => theirChanges.some((d) => d.field === f.field) || myChanges.some((d) => d.field === f.field),
    )
    .map((f) => ({
      field: f.field,
      opened: f.a,
      theirs: theirChanges.find((d) => d.field === f.field)?.b ?? f.a,
      mine: myChanges.find((d) => d.field === f.field)?.b ?? f.a,
      theyChanged: theirChanges.some((d) => d.field === f.field),
      iChanged: myChanges.some((d) => d.field === f.field),
    }));
  return (
    <div className="alert-conflict" role="alert" data-testid="alert-conflict">
      <h3>Not saved: this rule changed while you were editing it</h3>
      <p data-testid="alert-conflict-text">
        Someone saved version <strong data-testid="alert-conflict-version">{current}</strong>{" "}
        {props.conflict.attemptedFrom === props.loaded.version
          ? `since you opened version ${props.loaded.version}`
          : `after version ${props.conflict.attemptedFrom}, which you were about to overwrite`}
        . Saving would have overwritten their changes without you seeing them.
      </p>
      <ErrorBanner error={theirs.error} title={`Could not load version ${current}`} />
      {theirs.isPending ? <Loading what={`version ${current}`} /> : null}
      {theirForm ? (
        changed.length ? (
          <table className="table alert-diff" data-testid="alert-conflict-diff">
            <thead>
              <tr>
                <th>Field</th>
                <th>You opened (v{props.loaded.version})</th>
                <th>They saved (v{current})</th>
                <th>Your edit</th>
              </tr>
            </thead>
            <tbody>
              {changed.map((d) => (
                <tr key={d.field} data-field={d.field}>
                  <td>{d.field}</td>
                  <td className="muted">{d.opened}</td>
                  <td>
                    {d.theyChanged ? <strong>{d.theirs}</strong> : <span className="muted">{d.theirs}</span>}
                  </td>
                  <td>{d.iChanged ? <strong>{d.mine}</strong> : <span className="muted">{d.mine}</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p className="muted">Neither save changed a field this form shows.</p>
        )
      ) : null}
      <div className="row alert-dialog-actions">
        <Button
          kind="primary"
          disabled={!theirForm || props.busy}
          onClick={() => theirForm && t && props.onReload({ version: t.version, form: theirForm })}
        >
          Load version {current} (discard my edits)
        </Button>
        <Button kind="danger" busy={props.busy} disabled={!t} onClick={() => props.onOverwrite(current)}>
          Overwrite with my edits
        </Button>
      </div>
    </div>
  );
}
