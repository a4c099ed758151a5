import type { Key } from "@gen/svc/iam/v1/key_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type ReactNode, useId, useState } from "react";
import { Link } from "wouter";
import { api } from "../api.ts";
import {
  CAPABILITIES,
  CapabilityAllows,
  CapabilityBadges,
  ConfirmDialog,
  isUncertain,
  TEMPLATES,
  Time,
} from "../components/access-ui.tsx";
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
import { lastSegment, newRequestId } from "../format.ts";
import { useProject } from "../session.tsx";

/** Limits of KeyService (packages/server/src/iam/keys.ts). */
const DEFAULT_DAYS = 90;
const MAX_DAYS = 365;
const MAX_OVERLAP_HOURS = 24;
/** An active key this close to its expiry is shown as expiring. */
const EXPIRING_SECONDS = 14 * 86_400;

export const keysQueryKey = (parent: string) => ["keys", parent];

/** The user's personal keys, and (for owners) the keys of each service account of the project. */
export function KeysPage() {
  const project = useProject();
  const isOwner = project.role === "owner";
  const accounts = useQuery({
    queryKey: ["serviceAccounts", project.name],
    queryFn: () => api.serviceAccounts.listServiceAccounts({ parent: project.name }),
    // Service-account keys are listed to owners only (server side too).
    enabled: isOwner,
  });
  // Owners and editors hold these through their role (iam/capabilities.ts rolePermissions).
  const personalCaps = project.canWrite
    ? ["monitoring.read", "monitoring.write", "notifications.write", "silences.write"]
    : ["monitoring.read"];
  return (
    <Page
      title="API keys"
      subtitle="Scoped keys for automation in this project. A secret is shown once, when it is created or rotated; svc keeps only a hash."
    >
      <KeyList
        parent={project.name}
        title="Your personal keys"
        description={
          <>
            Act within your own access ({project.role}) in <code>{project.name}</code>, limited to the
            capabilities chosen; if your access shrinks, so does the key's.
          </>
        }
        allowed={personalCaps}
        canManage
      />
      <h2 className="access-section-title">Service-account keys</h2>
      {!isOwner ? (
        <p className="banner banner-info">
          Only project owners manage service accounts and their keys; you are{" "}
          {project.role === "editor" ? "an" : "a"} {project.role}.
        </p>
      ) : (
        <>
          <ErrorBanner error={accounts.error} title="Could not list service accounts" />
          {accounts.isPending ? (
            <Loading what="service accounts" />
          ) : accounts.data?.serviceAccounts.length === 0 ? (
            <Empty>
              No service accounts yet. <Link href="/service-accounts">Create one from a template</Link> to
              give a tool its own identity.
            </Empty>
          ) : (
            accounts.data?.serviceAccounts.map((sa) => (
              <KeyList
                key={sa.name}
                parent={sa.name}
                title={
                  <>
                    {sa.displayName} <Badge tone="muted">{sa.template}</Badge>{" "}
                    {sa.state === "DISABLED" ? <Badge tone="bad">disabled</Badge> : null}
                  </>
                }
                description={
                  sa.state === "DISABLED" ? (
                    <>This account is disabled: its keys are refused until it is enabled again.</>
                  ) : (
                    <>
                      Service account <code>{lastSegment(sa.name)}</code>; keys never exceed its permissions.
                    </>
                  )
                }
                allowed={sa.permissions}
                defaultTemplate={sa.template}
                canManage
              />
            ))
          )}
        </>
      )}
    </Page>
  );
}

type KeyStatus = { label: string; tone: "ok" | "warn" | "bad" | "muted"; title?: string };

export function keyStatus(k: Key, nowMs = Date.now()): KeyStatus {
  if (k.state === "REVOKED") return { label: "revoked", tone: "bad" };
  if (k.state === "EXPIRED") return { label: "expired", tone: "muted" };
  if (k.stopTimeUnix > 0n)
    return { label: "stopping", tone: "warn", title: "replaced by a rotation: works until the overlap ends" };
  const left = Number(k.expireTimeUnix) - nowMs / 1000;
  if (left < EXPIRING_SECONDS)
    return { label: "expiring", tone: "warn", title: "expires within 14 days: rotate it" };
  return { label: "active", tone: "ok" };
}

/**
 * The keys of one parent (`projects/<p>` for the user's personal keys, or a service account) with
 * create, rotate and revoke. Exported for the service-accounts page.
 */
export function KeyList(props: {
  parent: string;
  title: ReactNode;
  description?: ReactNode;
  /** Capabilities the parent's identity has: a key may carry a subset. */
  allowed: readonly string[];
  defaultTemplate?: string;
  canManage: boolean;
}) {
  const q = useQuery({
    queryKey: keysQueryKey(props.parent),
    queryFn: () => api.keys.listKeys({ parent: props.parent }),
  });
  const [creating, setCreating] = useState(false);
  const [rotating, setRotating] = useState<Key>();
  const [revoking, setRevoking] = useState<Key>();
  const [showInactive, setShowInactive] = useState(false);
  const queries = useQueryClient();
  const keys = [...(q.data?.keys ?? [])].sort(
    (a, b) =>
      Number(a.state !== "ACTIVE") - Number(b.state !== "ACTIVE") ||
      Number(b.createTimeUnix - a.createTimeUnix),
  );
  const inactive = keys.filter((k) => k.state !== "ACTIVE").length;
  const shown = showInactive ? keys : keys.filter((k) => k.state === "ACTIVE");
  const testId = `keys-${props.parent.replaceAll("/", "-")}`;
  // Named by its heading ("Your personal keys", "Keys of deploy"), not the parent's resource path.
  const headingId = useId();
  return (
    <section className="card access-keys" data-testid={testId} aria-labelledby={headingId}>
      <header className="access-card-header">
        <div>
          <h2 id={headingId}>{props.title}</h2>
          {props.description ? <p className="muted small access-desc">{props.description}</p> : null}
        </div>
        <div className="row">
          {inactive > 0 ? (
            <label className="access-toggle small">
              <input
                type="checkbox"
                checked={showInactive}
                onChange={(e) => setShowInactive(e.target.checked)}
              />{" "}
              Show revoked and expired ({inactive})
            </label>
          ) : null}
          {props.canManage ? (
            <Button kind="primary" className="access-nowrap" onClick={() => setCreating(true)}>
              Create key
            </Button>
          ) : null}
        </div>
      </header>
      <ErrorBanner error={q.error} title="Could not list keys" />
      {q.isPending ? (
        <Loading what="keys" />
      ) : shown.length === 0 ? (
        <p className="muted access-none">
          {keys.length === 0 ? "No keys yet." : "No active keys (revoked and expired ones are hidden)."}
        </p>
      ) : (
        <div className="access-table-wrap">
          <table className="table access-table table-cards">
            <thead>
              <tr>
                <th>Name</th>
                <th>Capabilities</th>
                <th>Created</th>
                <th>Expires</th>
                <th>Last used</th>
                <th>State</th>
                {props.canManage ? <th className="access-actions-col">Actions</th> : null}
              </tr>
            </thead>
            <tbody>
              {shown.map((k) => {
                const st = keyStatus(k);
                const replacement = keys.find((x) => x.name === k.replacedBy);
                const replaces = keys.filter((x) => x.replacedBy === k.name && x.stopTimeUnix > 0n);
                return (
                  <tr key={k.name} className={k.state === "ACTIVE" ? "" : "access-inactive"}>
                    <td>
                      <div>{k.displayName}</div>
                      <div className="muted small mono" title="the non-secret start of the secret">
                        {k.secretHint}
                      </div>
                      {replaces.length > 0 ? (
                        <div className="small" data-testid="key-replacement">
                          <Badge tone="info">new</Badge> replaces{" "}
                          {replaces.map((o) => (
                            <code key={o.name}>{o.secretHint}</code>
                          ))}
                        </div>
                      ) : null}
                    </td>
                    <td data-label="Capabilities">
                      <CapabilityBadges capabilities={k.capabilities} />
                    </td>
                    <td data-label="Created">
                      <Time unix={k.createTimeUnix} />
                    </td>
                    <td data-label="Expires">
                      {k.stopTimeUnix > 0n ? (
                        // A rotation's overlap ends before the expiry: that end is when it stops working.
                        <div data-testid="key-stops">
                          stops at <Time unix={k.stopTimeUnix} relative />
                          {replacement ? (
                            <div className="muted small">
                              replaced by <code>{replacement.secretHint}</code>
                            </div>
                          ) : null}
                        </div>
                      ) : (
                        <Time unix={k.expireTimeUnix} />
                      )}
                    </td>
                    <td data-label="Last used">
                      {k.lastUsedTimeUnix > 0n ? (
                        <>
                          <Time unix={k.lastUsedTimeUnix} />
                          <div className="muted small mono">{k.lastClientAddress}</div>
                        </>
                      ) : (
                        <span className="muted">never</span>
                      )}
                      {k.state === "ACTIVE" && unusedFor90Days(k) ? (
                        <div>
                          <Badge tone="warn" title="not used for 90 days: a candidate for revocation">
                            unused 90 days
                          </Badge>
                        </div>
                      ) : null}
                    </td>
                    <td data-label="State">
                      <Badge tone={st.tone} title={st.title}>
                        {st.label}
                      </Badge>
                      {k.state === "REVOKED" ? (
                        <div className="muted small">
                          <Time unix={k.revokeTimeUnix} />
                        </div>
                      ) : null}
                    </td>
                    {props.canManage ? (
                      <td className="access-actions-col" data-label="Actions">
                        {k.state === "ACTIVE" ? (
                          <div className="row access-row-actions">
                            <Button
                              onClick={() => setRotating(k)}
                              aria-label={`Rotate ${k.displayName} (${k.secretHint})`}
                            >
                              Rotate
                            </Button>
                            <Button
                              kind="danger"
                              onClick={() => setRevoking(k)}
                              aria-label={`Revoke ${k.displayName} (${k.secretHint})`}
                            >
                              Revoke
                            </Button>
                          </div>
                        ) : null}
                      </td>
                    ) : null}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <Dialog title="Create key" open={creating} onClose={() => setCreating(false)}>
        <CreateKeyForm
          parent={props.parent}
          allowed={props.allowed}
          defaultTemplate={props.defaultTemplate}
          onClose={() => setCreating(false)}
        />
      </Dialog>
      <Dialog
        title={`Rotate ${rotating?.displayName ?? "key"}`}
        open={rotating !== undefined}
        onClose={() => setRotating(undefined)}
      >
        {rotating ? <RotateKeyForm k={rotating} onClose={() => setRotating(undefined)} /> : null}
      </Dialog>
      <ConfirmDialog
        open={revoking !== undefined}
        title={`Revoke ${revoking?.displayName ?? "key"} (${revoking?.secretHint ?? ""})`}
        confirmLabel="Revoke now"
        danger
        onClose={() => setRevoking(undefined)}
        onConfirm={async () => {
          if (!revoking) return;
          await api.keys.revokeKey({ name: revoking.name });
          await queries.invalidateQueries({ queryKey: keysQueryKey(props.parent) });
        }}
      >
        {revoking ? <RevokeWhich k={revoking} keys={keys} /> : null}
      </ConfirmDialog>
    </section>
  );
}

/** Names the exact key a revoke stops: two keys of a rotation share a name, never a secret's start. */
function RevokeWhich(props: { k: Key; keys: Key[] }) {
  const { k } = props;
  const replacement = props.keys.find((x) => x.name === k.replacedBy);
  const replaces = props.keys.filter((x) => x.replacedBy === k.name && x.stopTimeUnix > 0n);
  return (
    <div data-testid="revoke-which">
      <p>
        Revoke <strong>{k.displayName}</strong>, the key starting <code>{k.secretHint}</code>, created{" "}
        <Time unix={k.createTimeUnix} />? The very next request with it is refused, without waiting for its
        expiry. This cannot be undone.
      </p>
      {k.stopTimeUnix > 0n ? (
        <p className="muted">
          It stops by itself at <Time unix={k.stopTimeUnix} />
          {replacement ? (
            <>
              {" "}
              and is replaced by <code>{replacement.secretHint}</code>, which keeps working
            </>
          ) : null}
          .
        </p>
      ) : null}
      {replaces.length > 0 ? (
        <p className="banner banner-warn">
          This is the <strong>new</strong> key of a rotation: the key it replaces (
          {replaces.map((o) => (
            <code key={o.name}>{o.secretHint}</code>
          ))}
          ) still stops at its overlap's end, so revoking this one leaves no working key.
        </p>
      ) : null}
    </div>
  );
}

interface Issued {
  key?: Key;
  secret?: string;
  replayed: boolean;
}

/**
 * Create and rotate carry a requestId (docs/api.md, lost-secret recovery). One id per user action: the dialog keeps it across
 * retries, and after an uncertain failure (the answer was lost) the form is frozen so the retry is the
 * exact same request. A retry that answers `replayed` (metadata, no secret) means the key exists but its
 * secret never arrived: RecoverLostKey revokes it and issues a replacement in one step.
 *
 * The secret is never put in the query or mutation cache: the mutation returns metadata only and the
 * secret lives in this component's state, gone when the dialog closes.
 */
function useIssue(parent: string, call: (requestId: string) => Promise<Issued>) {
  const queries = useQueryClient();
  const [requestId, setRequestId] = useState(newRequestId);
  const [lostRequestId, setLostRequestId] = useState<string>();
  const [uncertain, setUncertain] = useState(false);
  const [secret, setSecret] = useState<{ value: string; key?: Key }>();
  const m = useMutation({
    gcTime: 0,
    mutationFn: async () => {
      const r: Issued = lostRequestId
        ? await api.keys.recoverLostKey({ lostRequestId, requestId })
        : await call(requestId);
      if (r.secret) setSecret({ value: r.secret, key: r.key });
      return { key: r.key, replayed: r.replayed && !r.secret };
    },
    onSuccess: (r) => {
      setUncertain(false);
      if (r.replayed) {
        // The earlier attempt issued the key; its secret is lost. Next: recover it with a new id.
        setLostRequestId(requestId);
        setRequestId(newRequestId());
      }
    },
    onError: (e) => setUncertain(isUncertain(e)),
    onSettled: () => queries.invalidateQueries({ queryKey: keysQueryKey(parent) }),
  });
  return {
    secret,
    /** The form may no longer change: the server may have acted on it. */
    frozen: uncertain || lostRequestId !== undefined,
    uncertain,
    lost: lostRequestId !== undefined && !secret,
    submit: () => m.mutate(),
    busy: m.isPending,
    error: m.error,
    requestId,
    lostRequestId,
  };
}

function IssueStatus(props: { issue: ReturnType<typeof useIssue>; what: string }) {
  const { issue } = props;
  return (
    <>
      {issue.lost ? (
        <div className="banner banner-warn" role="status" data-testid="key-lost">
          svc had already {props.what} this key (request <code>{issue.lostRequestId}</code>), but its secret
          never reached this page and cannot be shown again. <strong>Recover</strong> revokes that key and
          issues a replacement with the same name, capabilities and lifetime.
        </div>
      ) : null}
      <ErrorBanner error={issue.error} />
      {issue.uncertain ? (
        <p className="banner banner-warn" role="status">
          The answer was lost, so svc may or may not have {props.what} the key. Retry sends the exact same
          request (same request ID), so it can never issue a second key.
        </p>
      ) : null}
    </>
  );
}

function submitLabel(issue: ReturnType<typeof useIssue>, label: string): string {
  if (issue.lost) return "Recover: revoke and replace";
  if (issue.uncertain) return "Retry the same request";
  return label;
}

/** IssueStatus, then Cancel and the submit button (`label`, or Recover/Retry as the issue stands). */
function IssueFooter(props: {
  issue: ReturnType<typeof useIssue>;
  what: string;
  label: string;
  onClose: () => void;
}) {
  return (
    <>
      <IssueStatus issue={props.issue} what={props.what} />
      <div className="access-dialog-actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button kind="primary" type="submit" busy={props.issue.busy}>
          {submitLabel(props.issue, props.label)}
        </Button>
      </div>
    </>
  );
}

/** A key's lifetime in whole days, 1 to MAX_DAYS. */
function ExpiryDaysField(props: {
  label: string;
  hint: string;
  error: string | undefined;
  days: string;
  setDays: (days: string) => void;
  disabled: boolean;
}) {
  return (
    <Field label={props.label} hint={props.hint} error={props.error}>
      <input
        type="number"
        min={1}
        max={MAX_DAYS}
        value={props.days}
        disabled={props.disabled}
        onChange={(e) => props.setDays(e.target.value)}
      />
    </Field>
  );
}

function CreateKeyForm(props: {
  parent: string;
  allowed: readonly string[];
  defaultTemplate?: string;
  onClose: () => void;
}) {
  const usable = TEMPLATES.filter((t) => t.capabilities.every((c) => props.allowed.includes(c)));
  const [name, setName] = useState("");
  const [template, setTemplate] = useState(
    usable.find((t) => t.name === props.defaultTemplate)?.name ?? usable[0]?.name ?? "",
  );
  const [days, setDays] = useState(String(DEFAULT_DAYS));
  const [touched, setTouched] = useState(false);
  const caps = TEMPLATES.find((t) => t.name === template)?.capabilities ?? [];
  const nameError =
    name.trim().length === 0
      ? "A name is required"
      : name.trim().length > 100
        ? "At most 100 characters"
        : undefined;
  const daysNum = Number(days);
  const daysError =
    !Number.isInteger(daysNum) || daysNum < 1 || daysNum > MAX_DAYS
      ? `A whole number of days from 1 to ${MAX_DAYS}`
      : undefined;
  const issue = useIssue(props.parent, (requestId) =>
    api.keys.createKey({
      parent: props.parent,
      displayName: name.trim(),
      capabilities: caps,
      expireDays: daysNum,
      requestId,
    }),
  );
  if (issue.secret) {
    return (
      <div>
        <p>
          Created <strong>{issue.secret.key?.displayName}</strong> with{" "}
          <CapabilityBadges capabilities={issue.secret.key?.capabilities ?? []} />, expiring{" "}
          <Time unix={issue.secret.key?.expireTimeUnix} />.
        </p>
        <ShownOnce label="Secret" value={issue.secret.value} onDone={props.onClose} />
      </div>
    );
  }
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!issue.frozen && (nameError || daysError || caps.length === 0)) return;
        issue.submit();
      }}
    >
      <p className="muted small access-desc">
        For <code>{props.parent}</code>.
      </p>
      <Field label="Name" hint="What uses the key, e.g. grafana-prod" error={touched ? nameError : undefined}>
        <input
          value={name}
          maxLength={100}
          disabled={issue.frozen}
          onChange={(e) => setName(e.target.value)}
        />
      </Field>
      <fieldset className="access-templates" disabled={issue.frozen}>
        <legend className="field-label">Template</legend>
        {TEMPLATES.map((t) => {
          const ok = usable.includes(t);
          return (
            <label key={t.name} className={`access-template ${template === t.name ? "selected" : ""}`}>
              <input
                type="radio"
                name="template"
                value={t.name}
                checked={template === t.name}
                disabled={!ok}
                onChange={() => setTemplate(t.name)}
              />
              <span>
                <span className="access-template-title">
                  <strong>{t.name}</strong> <CapabilityBadges capabilities={t.capabilities} />
                </span>
                <span className="hint">
                  {ok ? t.blurb : `Not available: the identity has only ${props.allowed.join(", ")}.`}
                </span>
              </span>
            </label>
          );
        })}
      </fieldset>
      <CapabilityAllows capabilities={caps} />
      <ExpiryDaysField
        label="Expires after (days)"
        hint={`Default ${DEFAULT_DAYS}, at most ${MAX_DAYS} (one year).`}
        error={touched ? daysError : undefined}
        days={days}
        setDays={setDays}
        disabled={issue.frozen}
      />
      <IssueFooter issue={issue} what="created" label="Create key" onClose={props.onClose} />
    </form>
  );
}

function RotateKeyForm(props: { k: Key; onClose: () => void }) {
  const parent = props.k.name.slice(0, props.k.name.lastIndexOf("/keys/"));
  const [hours, setHours] = useState("1");
  const [days, setDays] = useState(String(DEFAULT_DAYS));
  const [touched, setTouched] = useState(false);
  const h = Number(hours);
  const hoursError =
    !Number.isFinite(h) || h < 0 || h > MAX_OVERLAP_HOURS || !Number.isInteger(h * 60)
      ? `From 0 to ${MAX_OVERLAP_HOURS} hours`
      : undefined;
  const d = Number(days);
  const daysError =
    !Number.isInteger(d) || d < 1 || d > MAX_DAYS
      ? `A whole number of days from 1 to ${MAX_DAYS}`
      : undefined;
  const [issuedAt, setIssuedAt] = useState(0);
  const issue = useIssue(parent, async (requestId) => {
    const r = await api.keys.rotateKey({
      name: props.k.name,
      overlapSeconds: Math.round(h * 3600),
      expireDays: d,
      requestId,
    });
    setIssuedAt(Date.now());
    return r;
  });
  if (issue.secret) {
    return (
      <div>
        <p>
          New key for <strong>{props.k.displayName}</strong>, expiring{" "}
          <Time unix={issue.secret.key?.expireTimeUnix} />.{" "}
          {h === 0 ? (
            <>The previous key already stopped working.</>
          ) : (
            <>
              The previous key keeps working until{" "}
              <Time unix={Math.floor((issuedAt || Date.now()) / 1000 + h * 3600)} />.
            </>
          )}
        </p>
        <ShownOnce label="New secret" value={issue.secret.value} onDone={props.onClose} />
      </div>
    );
  }
  return (
    <form
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        setTouched(true);
        if (!issue.frozen && (hoursError || daysError)) return;
        issue.submit();
      }}
    >
      <p>
        Issues a new secret for <strong>{props.k.displayName}</strong> with the same capabilities{" "}
        <CapabilityBadges capabilities={props.k.capabilities} />.
      </p>
      <Field
        label="Overlap (hours)"
        error={touched ? hoursError : undefined}
        hint={
          <>
            How long the current key (and any older key of the same lineage) keeps working beside the new one,
            0–{MAX_OVERLAP_HOURS} h: time to deploy the new secret. <strong>0 = immediate</strong>: the old
            secret is refused from now on, so whatever still uses it fails until it has the new one.
          </>
        }
      >
        <input
          type="number"
          min={0}
          max={MAX_OVERLAP_HOURS}
          step={0.5}
          value={hours}
          disabled={issue.frozen}
          onChange={(e) => setHours(e.target.value)}
        />
      </Field>
      {h === 0 && !hoursError ? (
        <p className="banner banner-warn">Immediate rotation: the current secret stops working at once.</p>
      ) : null}
      <ExpiryDaysField
        label="New key expires after (days)"
        hint={`Default ${DEFAULT_DAYS}, at most ${MAX_DAYS}.`}
        error={touched ? daysError : undefined}
        days={days}
        setDays={setDays}
        disabled={issue.frozen}
      />
      <IssueFooter issue={issue} what="rotated" label="Rotate key" onClose={props.onClose} />
    </form>
  );
}

/** For the capability checkboxes elsewhere: what each capability allows. */
export function capabilityHint(id: string): string {
  return CAPABILITIES.find((c) => c.id === id)?.allows ?? "";
}

/** Not used for 90 days (or never, and created 90 days ago): the audit log's revocation hint (issue 29). */
function unusedFor90Days(k: { lastUsedTimeUnix: bigint; createTimeUnix: bigint }): boolean {
  const last = k.lastUsedTimeUnix > 0n ? k.lastUsedTimeUnix : k.createTimeUnix;
  return Date.now() / 1000 - Number(last) >= 90 * 86_400;
}
