import type { CITrust, StartCITrustSetupResponse } from "@gen/svc/iam/v1/automation_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../api.ts";
import {
  exchangeWorkflow,
  nonPublicOrigin,
  SUGGESTED_WORKFLOW,
  verificationWorkflow,
} from "../ci-workflows.ts";
import { CAPABILITIES, CapabilityBadges, ConfirmDialog, CopyBlock, Time } from "../components/access-ui.tsx";
import { RecentActivity } from "../components/audit-events.tsx";
import {
  Badge,
  Button,
  Dialog,
  Empty,
  ErrorBanner,
  Field,
  Loading,
  Page,
  ShownOnce,
} from "../components/ui.tsx";
import { fmtDuration, lastSegment, MISSING } from "../format.ts";
import { useProject, useSession } from "../session.tsx";
import { serviceAccountsQueryKey } from "./service-accounts.tsx";

/** Same rules as the server (packages/server/src/iam/ci/identity.ts), checked before sending. */
const REPO = /^[A-Za-z0-9][A-Za-z0-9-]{0,38}\/[A-Za-z0-9._-]{1,100}$/;
const WORKFLOW = /^\.github\/workflows\/[A-Za-z0-9._/-]{1,200}\.ya?ml$/;
const BRANCH = /^[A-Za-z0-9._/-]{1,255}$/;
const ENVIRONMENT = /^[^\s,'"`;]{1,255}$/;
const EVENTS = [
  { id: "push", label: "push" },
  { id: "workflow_dispatch", label: "workflow_dispatch (manual run)" },
  { id: "schedule", label: "schedule" },
];
/** How often the page asks whether the verification run has arrived. */
const POLL_MS = 3000;

const trustsKey = (project: string) => ["ciTrusts", project];
const trustKey = (name: string) => ["ciTrust", name];

const STATES: Record<
  string,
  { label: string; tone: "ok" | "warn" | "bad" | "info" | "muted"; hint: string }
> = {
  VERIFICATION_PENDING: {
    label: "waiting for verification",
    tone: "info",
    hint: "run the verification step in the workflow within the window",
  },
  EXPIRED: { label: "expired", tone: "muted", hint: "the 30-minute verification window ended" },
  IDENTITY_OBSERVED: {
    label: "awaiting approval",
    tone: "warn",
    hint: "the workflow identity was observed; review and approve it",
  },
  APPROVED: { label: "approved", tone: "ok", hint: "the workflow can exchange its identity for tokens" },
  DISABLED: { label: "disabled", tone: "bad", hint: "exchanges and outstanding tokens are refused" },
};

export function TrustState(props: { state: string }) {
  const s = STATES[props.state] ?? { label: props.state, tone: "muted" as const, hint: "" };
  return (
    <Badge tone={s.tone} title={s.hint}>
      {s.label}
    </Badge>
  );
}

/** CI trusts: keyless GitHub Actions access, from setup through verification and approval. */
export function CiTrustsPage() {
  const project = useProject();
  const isOwner = project.role === "owner";
  const trusts = useQuery({
    queryKey: trustsKey(project.name),
    queryFn: () => api.automation.listCITrusts({ parent: project.name }),
    refetchInterval: (q) =>
      q.state.data?.trusts.some((t) => t.state === "VERIFICATION_PENDING") ? POLL_MS * 2 : false,
  });
  const accounts = useQuery({
    queryKey: serviceAccountsQueryKey(project.name),
    queryFn: () => api.serviceAccounts.listServiceAccounts({ parent: project.name }),
  });
  const [selected, setSelected] = useState<string>();
  const [starting, setStarting] = useState<{ trust?: CITrust } | undefined>();
  /** The answer of the setup just started: its pairing code is shown once, then dropped. */
  const [started, setStarted] = useState<StartCITrustSetupResponse>();
  const dismissCode = useCallback(() => setStarted(undefined), []);
  const list = trusts.data?.trusts ?? [];
  const accountName = (name: string) =>
    accounts.data?.serviceAccounts.find((a) => a.name === name)?.displayName ?? lastSegment(name);
  return (
    <Page
      title="CI trusts"
      subtitle="Let a GitHub Actions workflow act as a service account without a stored key: it exchanges its GitHub-signed identity for a 15-minute token."
      actions={
        <>
          <Button
            className="access-nowrap"
            onClick={() => void trusts.refetch()}
            busy={trusts.isFetching && !trusts.isPending}
          >
            Refresh
          </Button>
          {isOwner ? (
            <Button kind="primary" className="access-nowrap" onClick={() => setStarting({})}>
              New CI trust
            </Button>
          ) : null}
        </>
      }
    >
      {!isOwner ? (
        <p className="banner banner-info">
          You can see the project's CI trusts; only owners set them up, approve, edit or remove them.
        </p>
      ) : null}
      <ErrorBanner error={trusts.error} title="Could not list CI trusts" />
      {trusts.isPending ? (
        <Loading what="CI trusts" />
      ) : list.length === 0 ? (
        <Empty>
          No CI trusts yet.{" "}
          {isOwner
            ? "Start a setup: pick a service account and the repository, workflow, branch and event to trust."
            : null}
        </Empty>
      ) : (
        <div className="access-table-wrap">
          <table className="table access-table table-cards" data-testid="trust-table">
            <thead>
              <tr>
                <th>Repository and workflow</th>
                <th>Branch or environment</th>
                <th>Event</th>
                <th>Service account</th>
                <th>Permissions</th>
                <th>State</th>
                <th className="access-actions-col" />
              </tr>
            </thead>
            <tbody>
              {list.map((t) => (
                <tr key={t.name} className={selected === t.name ? "access-selected" : ""}>
                  <td>
                    <div>{t.intended?.repository}</div>
                    <div className="muted small mono">{t.intended?.workflow}</div>
                  </td>
                  <td data-label="Runs from">
                    {t.intended?.branch ? (
                      <>
                        branch <code>{t.intended.branch}</code>
                      </>
                    ) : (
                      <>
                        environment <code>{t.intended?.environment}</code>
                      </>
                    )}
                  </td>
                  <td data-label="Event">
                    <code>{t.intended?.event}</code>
                  </td>
                  <td data-label="Service account">{accountName(t.serviceAccount)}</td>
                  <td data-label="Permissions">
                    <CapabilityBadges capabilities={t.permissions} />
                  </td>
                  <td data-label="State">
                    <TrustState state={t.state} />
                  </td>
                  <td className="access-actions-col" data-label="">
                    <Button
                      className={selected === t.name ? "selected" : ""}
                      aria-label={`${selected === t.name ? "Close" : "Open"} trust ${lastSegment(t.name)}`}
                      aria-expanded={selected === t.name}
                      onClick={() => setSelected(selected === t.name ? undefined : t.name)}
                    >
                      {selected === t.name ? "Close" : "Open"}
                    </Button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {selected ? (
        <TrustDetail
          key={selected}
          name={selected}
          started={started?.trust?.name === selected ? started : undefined}
          onDismissCode={dismissCode}
          onVerifyAgain={(trust) => setStarting({ trust })}
          onDeleted={() => setSelected(undefined)}
        />
      ) : null}
      <Dialog
        title={starting?.trust ? "Verify the trust again" : "New CI trust"}
        open={starting !== undefined}
        onClose={() => setStarting(undefined)}
      >
        <StartSetupForm
          again={starting?.trust}
          onClose={() => setStarting(undefined)}
          onStarted={(r) => {
            setStarted(r);
            setSelected(r.trust?.name);
            setStarting(undefined);
          }}
        />
      </Dialog>
    </Page>
  );
}

function StartSetupForm(props: {
  again?: CITrust;
  onClose: () => void;
  onStarted: (r: StartCITrustSetupResponse) => void;
}) {
  const project = useProject();
  const queries = useQueryClient();
  const accounts = useQuery({
    queryKey: serviceAccountsQueryKey(project.name),
    queryFn: () => api.serviceAccounts.listServiceAccounts({ parent: project.name }),
  });
  const active = (accounts.data?.serviceAccounts ?? []).filter((a) => a.state === "ACTIVE");
  const prev = props.again?.intended;
  const [account, setAccount] = useState(props.again?.serviceAccount ?? "");
  const [repository, setRepository] = useState(prev?.repository ?? "");
  const [workflow, setWorkflow] = useState(prev?.workflow ?? SUGGESTED_WORKFLOW);
  const [by, setBy] = useState<"branch" | "environment">(prev?.environment ? "environment" : "branch");
  const [branch, setBranch] = useState(prev?.branch || "main");
  const [environment, setEnvironment] = useState(prev?.environment ?? "");
  const [event, setEvent] = useState(prev?.event || "push");
  const [touched, setTouched] = useState(false);
  useEffect(() => {
    if (!account && active[0]) setAccount(active[0].name);
  }, [account, active]);
  const errors = {
    account: account ? undefined : "Pick a service account",
    repository: REPO.test(repository.trim()) ? undefined : 'As "owner/repository", e.g. acme/deploy-tools',
    workflow:
      WORKFLOW.test(workflow.trim()) && !workflow.includes("..")
        ? undefined
        : `The workflow file path, e.g. ${SUGGESTED_WORKFLOW}`,
    branch:
      by !== "branch" || (BRANCH.test(branch.trim()) && !branch.trim().startsWith("refs/"))
        ? undefined
        : "A branch name such as main (without refs/heads/)",
    environment:
      by !== "environment" || ENVIRONMENT.test(environment.trim()) ? undefined : "An environment name",
  };
  const invalid = Object.values(errors).some(Boolean);
  const m = useMutation({
    mutationFn: () =>
      api.automation.startCITrustSetup({
        serviceAccount: account,
        trust: props.again?.name ?? "",
        intended: {
          repository: repository.trim(),
          workflow: workflow.trim(),
          branch: by === "branch" ? branch.trim() : "",
          environment: by === "environment" ? environment.trim() : "",
          event,
        },
      }),
    // The answer holds the pairing code: kept out of the mutation cache, handed to the page's state.
    gcTime: 0,
    onSuccess: (r) => {
      void queries.invalidateQueries({ queryKey: trustsKey(project.name) });
      // The trust as the answer describes it (no secret in it): the detail shows the new setup at once.
      if (r.trust) queries.setQueryData(trustKey(r.trust.name), r.trust);
      props.onStarted(r);
    },
  });
  const show = (e: string | undefined) => (touched ? e : undefined);
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!invalid) m.mutate();
      }}
    >
      {props.again ? (
        <p className="banner banner-warn">
          Verifying again (after the repository or workflow changed, or to re-enable a disabled trust){" "}
          <strong>stops this trust from granting access at once</strong>, until the new run is observed and
          you approve it again.
        </p>
      ) : (
        <p className="muted">
          Declare what to trust. A verification run of the workflow then shows svc the real, GitHub-signed
          identity; you review it and approve permissions. Nothing is granted until then.
        </p>
      )}
      <Field label="Service account" error={show(errors.account)}>
        <select
          value={account}
          disabled={props.again !== undefined}
          onChange={(e) => setAccount(e.target.value)}
        >
          {active.length === 0 ? <option value="">No active service account</option> : null}
          {active.map((a) => (
            <option key={a.name} value={a.name}>
              {a.displayName} ({a.template})
            </option>
          ))}
        </select>
      </Field>
      <div className="access-form-grid">
        <Field label="Repository" hint="owner/repository" error={show(errors.repository)}>
          <input
            value={repository}
            placeholder="acme/deploy-tools"
            onChange={(e) => setRepository(e.target.value)}
          />
        </Field>
        <Field
          label="Workflow file"
          error={show(errors.workflow)}
          hint="The trust is bound to this file. A file of its own (svc-monitoring.yml) is safest: the workflow svc shows is a whole file, and committing it over an existing workflow replaces that one."
        >
          <input value={workflow} onChange={(e) => setWorkflow(e.target.value)} />
        </Field>
      </div>
      <fieldset className="access-inline-choice">
        <legend className="field-label">Runs from</legend>
        <label>
          <input type="radio" name="by" checked={by === "branch"} onChange={() => setBy("branch")} /> a branch
        </label>
        <label>
          <input
            type="radio"
            name="by"
            checked={by === "environment"}
            onChange={() => setBy("environment")}
          />{" "}
          a deployment environment
        </label>
      </fieldset>
      <div className="access-form-grid">
        {by === "branch" ? (
          <Field label="Branch" error={show(errors.branch)}>
            <input value={branch} onChange={(e) => setBranch(e.target.value)} />
          </Field>
        ) : (
          <Field label="Environment" error={show(errors.environment)}>
            <input
              value={environment}
              placeholder="production"
              onChange={(e) => setEnvironment(e.target.value)}
            />
          </Field>
        )}
        <Field label="Event" hint="Pull-request events are never accepted.">
          <select value={event} onChange={(e) => setEvent(e.target.value)}>
            {EVENTS.map((ev) => (
              <option key={ev.id} value={ev.id}>
                {ev.label}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <ErrorBanner error={m.error} title="Could not start the setup" />
      <div className="access-dialog-actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button kind="primary" type="submit" busy={m.isPending}>
          {props.again ? "Start verification again" : "Start setup"}
        </Button>
      </div>
    </form>
  );
}

function TrustDetail(props: {
  name: string;
  started?: StartCITrustSetupResponse;
  onDismissCode: () => void;
  onVerifyAgain: (t: CITrust) => void;
  onDeleted: () => void;
}) {
  const project = useProject();
  const { session } = useSession();
  const isOwner = project.role === "owner";
  const queries = useQueryClient();
  const q = useQuery({
    queryKey: trustKey(props.name),
    queryFn: () => api.automation.getCITrust({ name: props.name }),
    // While the verification run is awaited, ask every few seconds (and the Refresh button asks now).
    refetchInterval: (query) => (query.state.data?.state === "VERIFICATION_PENDING" ? POLL_MS : false),
    refetchIntervalInBackground: false,
  });
  const accounts = useQuery({
    queryKey: serviceAccountsQueryKey(project.name),
    queryFn: () => api.serviceAccounts.listServiceAccounts({ parent: project.name }),
  });
  const [editing, setEditing] = useState(false);
  const [confirm, setConfirm] = useState<"disable" | "delete">();
  const t = q.data;
  const state = t?.state;
  const { onDismissCode } = props;
  const holdsCode = props.started !== undefined;
  useEffect(() => {
    // The list shows the same state: keep it in step when this detail notices a change.
    if (state) void queries.invalidateQueries({ queryKey: trustsKey(project.name) });
  }, [state, project.name, queries]);
  const wasPending = useRef(false);
  useEffect(() => {
    // Once the verification run used it (the state moves on from pending), the pairing code is dropped
    // from memory too.
    if (state === "VERIFICATION_PENDING") wasPending.current = true;
    else if (state && wasPending.current && holdsCode) {
      wasPending.current = false;
      onDismissCode();
    }
  }, [state, holdsCode, onDismissCode]);
  if (q.isPending) return <Loading what="the trust" />;
  if (!t) return <ErrorBanner error={q.error} title="Could not read the trust" />;
  const sa = accounts.data?.serviceAccounts.find((a) => a.name === t.serviceAccount);
  const allowed = sa?.permissions ?? [];
  const refresh = async () => {
    await queries.invalidateQueries({ queryKey: trustKey(t.name) });
    await queries.invalidateQueries({ queryKey: trustsKey(project.name) });
  };
  const apiOrigin = props.started?.apiOrigin || session.apiOrigin;
  return (
    <>
      <section className="card access-trust" data-testid="trust-detail" aria-label="CI trust">
        <header className="access-card-header">
          <div>
            <h2>
              {t.intended?.repository} <TrustState state={t.state} />
            </h2>
            <p className="muted small mono access-desc">{t.name}</p>
          </div>
          <div className="row">
            <Button onClick={() => void q.refetch()} busy={q.isFetching}>
              Refresh
            </Button>
            {isOwner && (t.state === "APPROVED" || t.state === "DISABLED") ? (
              <Button onClick={() => setEditing(true)}>Edit permissions</Button>
            ) : null}
            {isOwner ? <Button onClick={() => props.onVerifyAgain(t)}>Verify again</Button> : null}
            {isOwner && t.state !== "DISABLED" ? (
              <Button kind="danger" onClick={() => setConfirm("disable")}>
                Disable
              </Button>
            ) : null}
            {isOwner ? (
              <Button kind="danger" onClick={() => setConfirm("delete")}>
                Delete
              </Button>
            ) : null}
          </div>
        </header>
        <ErrorBanner error={q.error} title="Could not refresh the trust" />

        {t.state === "VERIFICATION_PENDING" ? (
          <div className="access-setup" data-testid="trust-setup">
            <h3>1. Store the pairing code in the repository</h3>
            {props.started ? (
              <ShownOnce label="SVC_SETUP_CODE (pairing code)" value={props.started.pairingCode} />
            ) : (
              <p className="muted">
                The pairing code was shown once, when the setup started. If it was lost,{" "}
                <strong>Verify again</strong> issues a new code and setup ID (the old ones stop working).
              </p>
            )}
            <dl className="kv access-kv">
              <dt>Repository secret</dt>
              <dd>
                <code>SVC_SETUP_CODE</code> = the pairing code
              </dd>
              <dt>svc's origin</dt>
              <dd>
                <code data-testid="setup-api-origin">{apiOrigin}</code> (already in the workflow below, which
                installs the svc CLI from it)
              </dd>
              <dt>Setup ID</dt>
              <dd>
                <code data-testid="setup-id">{t.setupId}</code>
              </dd>
              <dt>Audience</dt>
              <dd>
                <code data-testid="setup-audience">{t.audience}</code>
              </dd>
              <dt>Verify before</dt>
              <dd>
                <Time unix={t.setupExpireTimeUnix} /> <Countdown until={Number(t.setupExpireTimeUnix)} />
              </dd>
            </dl>
            <h3>2. Run this workflow once</h3>
            <p className="muted small">
              Commit it as <code>{t.intended?.workflow}</code> (or add the step to the job in that file)
              {t.intended?.branch ? (
                <>
                  {" "}
                  on branch <code>{t.intended.branch}</code>
                </>
              ) : (
                <>
                  {" "}
                  in a job with environment <code>{t.intended?.environment}</code>
                </>
              )}
              , and trigger it with <code>{t.intended?.event}</code>. A run from another workflow, branch or
              event is refused and the setup stays pending.
            </p>
            <OriginWarning origin={apiOrigin} />
            <CopyBlock
              label="Verification workflow"
              text={verificationWorkflow(t.setupId, t.audience, apiOrigin, t.intended)}
              testId="setup-snippet"
            />
            <p className="access-waiting" role="status">
              <span className="access-spinner" aria-hidden="true" /> Waiting for the verification run —
              checked every {POLL_MS / 1000} s.
            </p>
            {props.started ? (
              <Button onClick={props.onDismissCode}>I have stored the pairing code</Button>
            ) : null}
          </div>
        ) : null}

        {t.state === "EXPIRED" ? (
          <p className="banner banner-warn">
            The 30-minute verification window ended before a run was observed. Use{" "}
            <strong>Verify again</strong> for a new pairing code and setup ID.
          </p>
        ) : null}

        {t.observed ? (
          <div className="access-observed">
            <h3>Observed identity</h3>
            <p className="muted small">
              Read from the GitHub-signed token of the verification run
              {t.observeTimeUnix ? (
                <>
                  {" "}
                  at <Time unix={t.observeTimeUnix} />
                </>
              ) : null}
              . Check that it is the repository and workflow you meant; numeric ids pin the repository and
              owner even if a namesake is created later.
            </p>
            <dl className="kv access-kv" data-testid="observed-identity">
              <dt>Repository</dt>
              <dd>
                {t.observed.repository} <span className="muted">(id {t.observed.repositoryId})</span>
              </dd>
              <dt>Owner</dt>
              <dd>
                {t.observed.repositoryOwner}{" "}
                <span className="muted">(id {t.observed.repositoryOwnerId})</span>
              </dd>
              <dt>Workflow</dt>
              <dd>
                <code>{t.observed.workflowRef}</code>
              </dd>
              <dt>Branch</dt>
              <dd>
                <code>{t.observed.ref || MISSING}</code>
              </dd>
              <dt>Event</dt>
              <dd>
                <code>{t.observed.event}</code>
              </dd>
              <dt>Environment</dt>
              <dd>
                {t.observed.environment ? (
                  <code>{t.observed.environment}</code>
                ) : (
                  <span className="muted">none</span>
                )}
              </dd>
              <dt>Job workflow</dt>
              <dd>
                <code>{t.observed.jobWorkflowRef || MISSING}</code>
                {t.observed.jobWorkflowRef && t.observed.jobWorkflowRef !== t.observed.workflowRef ? (
                  <span className="muted"> (a reusable workflow)</span>
                ) : null}
              </dd>
            </dl>
          </div>
        ) : null}

        {t.state === "IDENTITY_OBSERVED" ? (
          !isOwner ? (
            <p className="banner banner-info">Waiting for a project owner to approve this identity.</p>
          ) : sa ? (
            <ApproveForm trust={t} allowed={allowed} saName={sa.displayName} onDone={refresh} />
          ) : (
            <Loading what="the service account" />
          )
        ) : null}

        <dl className="kv access-kv access-facts">
          <dt>Service account</dt>
          <dd>
            {sa ? (
              <>
                {sa.displayName} <CapabilityBadges capabilities={sa.permissions} />{" "}
                {sa.state === "DISABLED" ? <Badge tone="bad">disabled</Badge> : null}
              </>
            ) : (
              lastSegment(t.serviceAccount)
            )}
          </dd>
          <dt>Approved permissions</dt>
          <dd data-testid="trust-permissions">
            <CapabilityBadges capabilities={t.permissions} />
            {t.approveTimeUnix ? (
              <span className="muted small">
                {" "}
                approved <Time unix={t.approveTimeUnix} />
              </span>
            ) : null}
          </dd>
          <dt>Declared</dt>
          <dd>
            <code>{t.intended?.workflow}</code>,{" "}
            {t.intended?.branch ? `branch ${t.intended.branch}` : `environment ${t.intended?.environment}`},
            event <code>{t.intended?.event}</code>
          </dd>
          <dt>Issuer</dt>
          <dd>
            <code>{t.issuer}</code>
          </dd>
          <dt>Audience</dt>
          <dd>
            <code>{t.audience}</code>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time unix={t.createTimeUnix} />
          </dd>
        </dl>

        {t.state === "APPROVED" ? (
          <>
            <p className="banner banner-info">
              Approved. Now remove the verification step and the <code>SVC_SETUP_CODE</code> secret — removing
              the secret revokes nothing; to stop access, disable or delete the trust.
            </p>
            <OriginWarning origin={apiOrigin} />
            <CopyBlock label="Use it in a job" text={exchangeWorkflow(t, project.name, apiOrigin)} />
          </>
        ) : null}
        {t.state === "DISABLED" ? (
          <p className="banner banner-warn">
            Disabled: exchanges and every outstanding token are refused. A disabled trust is not re-enabled in
            place; <strong>Verify again</strong> to observe and approve the workflow anew, or delete it.
          </p>
        ) : null}

        <Dialog title="Edit permissions" open={editing} onClose={() => setEditing(false)}>
          <EditPermissionsForm
            trust={t}
            allowed={allowed}
            onClose={() => setEditing(false)}
            onDone={refresh}
          />
        </Dialog>
        <ConfirmDialog
          open={confirm === "disable"}
          title="Disable the CI trust"
          confirmLabel="Disable now"
          danger
          onClose={() => setConfirm(undefined)}
          onConfirm={async () => {
            await api.automation.disableCITrust({ name: t.name });
            await refresh();
          }}
        >
          <p>
            Disable the trust for <strong>{t.intended?.repository}</strong>? Exchanges stop and every token it
            issued is refused <strong>at once</strong> (emergency revocation). It stays listed; it cannot be
            re-enabled in place.
          </p>
        </ConfirmDialog>
        <ConfirmDialog
          open={confirm === "delete"}
          title="Delete the CI trust"
          confirmLabel="Delete"
          danger
          onClose={() => setConfirm(undefined)}
          onConfirm={async () => {
            await api.automation.deleteCITrust({ name: t.name });
            queries.removeQueries({ queryKey: trustKey(t.name) });
            await queries.invalidateQueries({ queryKey: trustsKey(project.name) });
            props.onDeleted();
          }}
        >
          <p>
            Delete the trust for <strong>{t.intended?.repository}</strong>? Exchanges stop and its tokens are
            refused at once, and it disappears from the list. This cannot be undone.
          </p>
        </ConfirmDialog>
      </section>
      <RecentActivity resource={t.name} changed={[t.state, t.permissions.join(" ")]} />
    </>
  );
}

function Countdown(props: { until: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const i = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(i);
  }, []);
  const left = Math.round(props.until - now / 1000);
  if (left <= 0) return <Badge tone="muted">window ended</Badge>;
  return <Badge tone={left < 300 ? "warn" : "info"}>{fmtDuration(left)} left</Badge>;
}

function PermissionChecks(props: {
  allowed: readonly string[];
  value: string[];
  onChange: (v: string[]) => void;
}) {
  return (
    <div className="checks access-perm-checks">
      {CAPABILITIES.map((c) => {
        const ok = props.allowed.includes(c.id);
        return (
          <label key={c.id} className={ok ? "" : "muted"}>
            <input
              type="checkbox"
              checked={props.value.includes(c.id)}
              disabled={!ok}
              onChange={(e) =>
                props.onChange(
                  e.target.checked ? [...props.value, c.id].sort() : props.value.filter((x) => x !== c.id),
                )
              }
            />
            <span>
              <code>{c.label}</code> — {c.allows}
              {ok ? null : " (not in the service account's permissions)"}
            </span>
          </label>
        );
      })}
    </div>
  );
}

function ApproveForm(props: {
  trust: CITrust;
  allowed: readonly string[];
  saName?: string;
  onDone: () => void;
}) {
  const [perms, setPerms] = useState<string[]>(
    props.allowed.includes("monitoring.read") ? ["monitoring.read"] : [],
  );
  const m = useMutation({
    mutationFn: () => api.automation.approveCITrust({ name: props.trust.name, permissions: perms }),
    onSuccess: props.onDone,
  });
  return (
    <form
      className="access-approve"
      onSubmit={(e) => {
        e.preventDefault();
        if (perms.length > 0) m.mutate();
      }}
    >
      <h3>Approve</h3>
      <p className="muted small">
        Approve only what the job needs. Its tokens get these permissions, intersected with those of{" "}
        {props.saName ?? "the service account"} on every request.
      </p>
      <PermissionChecks allowed={props.allowed} value={perms} onChange={setPerms} />
      {perms.length === 0 ? <p className="field-error">Approve at least one permission.</p> : null}
      <ErrorBanner error={m.error} title="Could not approve" />
      <Button kind="primary" type="submit" busy={m.isPending} disabled={perms.length === 0}>
        Approve this identity
      </Button>
    </form>
  );
}

function EditPermissionsForm(props: {
  trust: CITrust;
  allowed: readonly string[];
  onClose: () => void;
  onDone: () => void;
}) {
  const [perms, setPerms] = useState<string[]>([...props.trust.permissions]);
  const m = useMutation({
    mutationFn: () => api.automation.updateCITrustPermissions({ name: props.trust.name, permissions: perms }),
    onSuccess: () => {
      props.onDone();
      props.onClose();
    },
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        if (perms.length > 0) m.mutate();
      }}
    >
      <PermissionChecks allowed={props.allowed} value={perms} onChange={setPerms} />
      <p className="banner banner-warn">
        Saving invalidates every outstanding token of this trust at once: running jobs must exchange again (a
        fresh GitHub identity token) to continue.
      </p>
      {perms.length === 0 ? (
        <p className="field-error">Keep at least one permission (or disable the trust).</p>
      ) : null}
      <ErrorBanner error={m.error} title="Could not save" />
      <div className="access-dialog-actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button kind="primary" type="submit" busy={m.isPending} disabled={perms.length === 0}>
          Save permissions
        </Button>
      </div>
    </form>
  );
}

/** The workflows name svc's origin; a runner on GitHub cannot reach a loopback or private one. */
function OriginWarning(props: { origin: string }) {
  const why = nonPublicOrigin(props.origin);
  if (!why) return null;
  return (
    <p className="banner banner-warn" data-testid="origin-warning">
      svc's origin <code>{props.origin}</code> is {why}: GitHub's hosted runners cannot reach it, so this
      workflow would fail there. Run it on a self-hosted runner that can reach svc, or have the operator set{" "}
      <code>SVC_BASE_URL</code> to svc's public origin.
    </p>
  );
}
