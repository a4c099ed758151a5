import type { AlertRule } from "@gen/svc/monitoring/v1/alerts_pb.ts";
import type { Delivery, Destination } from "@gen/svc/monitoring/v1/destinations_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useLocation, useSearch } from "wouter";
import { api } from "../api.ts";
import { RecentActivity } from "../components/audit-events.tsx";
import { ActorName } from "../components/audit-words.tsx";
import { DeliveriesTable, DeliveryFacts } from "../components/destination-deliveries.tsx";
import {
  CreateDestinationDialog,
  DeleteDestinationDialog,
  EditDestinationDialog,
  isIncidentApiKind,
  kindLabel,
  RotateSecretDialog,
  VerifyEmailCard,
} from "../components/destination-forms.tsx";
import { Time } from "../components/incident-format.tsx";
import { Badge, Button, Empty, ErrorBanner, Loading, Page, Pager, usePager } from "../components/ui.tsx";
import { lastSegment, MISSING } from "../format.ts";
import { useProject, useSession } from "../session.tsx";

const kindTone: Record<string, "ok" | "warn" | "bad" | "info" | "muted"> = {
  EMAIL: "info",
  WEBHOOK: "info",
  SLACK: "info",
  TEAMS: "info",
  DISCORD: "info",
  PAGERDUTY: "info",
  OPSGENIE: "info",
};

function StateBadge(props: { destination: Destination }) {
  const d = props.destination;
  if (d.awaitingConfirmation)
    return (
      <Badge
        tone="warn"
        title="a key set its URL: nothing is sent until a person confirms it (DESTINATION_UNCONFIRMED)"
      >
        Awaiting confirmation
      </Badge>
    );
  if (d.paused)
    return (
      <Badge tone="warn" title="receives nothing; deliveries due meanwhile are skipped (DESTINATION_PAUSED)">
        Paused
      </Badge>
    );
  if (d.kind === "EMAIL" && !d.recipients.some((r) => r.verified))
    return (
      <Badge
        tone="warn"
        title="no recipient has confirmed yet: deliveries are skipped (NO_VERIFIED_RECIPIENT)"
      >
        Awaiting verification
      </Badge>
    );
  return <Badge tone="ok">Active</Badge>;
}

/** The host a webhook or chat URL points at (chat URLs are shown as https://host/… already). */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

function Recipients(props: { destination: Destination }) {
  return (
    <ul className="recipient-list">
      {props.destination.recipients.map((r) => (
        <li key={r.user}>
          {r.email}{" "}
          {r.verified ? (
            <Badge tone="ok" title={`verified ${new Date(Number(r.verifyTimeUnix) * 1000).toLocaleString()}`}>
              verified
            </Badge>
          ) : (
            <Badge tone="warn" title="has not entered the code from the verification email">
              unverified
            </Badge>
          )}
        </li>
      ))}
    </ul>
  );
}

/** The project's destinations, the always-present in-app channel, and creating one of each kind. */
export function DestinationsPage() {
  const project = useProject();
  const [, navigate] = useLocation();
  const [creating, setCreating] = useState(false);
  const q = useQuery({
    queryKey: ["destinations", project.name],
    queryFn: () => api.destinations.listDestinations({ projectName: project.name }),
  });
  const destinations = q.data?.destinations ?? [];
  return (
    <Page
      title="Destinations"
      subtitle="Where incident notifications go. Alert rules name the destinations they notify."
      actions={
        project.canWrite ? (
          <Button kind="primary" onClick={() => setCreating(true)}>
            New destination
          </Button>
        ) : null
      }
    >
      <ErrorBanner error={q.error} title="Could not list destinations" />
      {!project.canWrite ? (
        <p className="banner banner-info">
          Your role <strong>{project.role}</strong> can read destinations; creating and changing them needs
          the owner or editor role.
        </p>
      ) : null}
      {q.isPending ? (
        <Loading what="destinations" />
      ) : (
        <table className="table destinations" data-testid="destination-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Kind</th>
              <th>Sends to</th>
              <th>State</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            <tr className="in-app">
              <td>
                <Link href="/incidents" className="strong">
                  In-app
                </Link>
                <div className="muted small">always on, not counted</div>
              </td>
              <td>
                <Badge tone="muted">IN-APP</Badge>
              </td>
              <td className="muted">The incident list of this console</td>
              <td>
                <Badge tone="ok">Active</Badge>
              </td>
              <td className="muted">{MISSING}</td>
            </tr>
            {destinations.map((d) => (
              <tr key={d.name} data-destination={d.displayName}>
                <td>
                  <Link href={`/destinations/${lastSegment(d.name)}`} className="strong">
                    {d.displayName}
                  </Link>
                  <div className="muted small mono">{lastSegment(d.name)}</div>
                </td>
                <td>
                  <Badge tone={kindTone[d.kind] ?? "muted"}>{kindLabel(d.kind)}</Badge>
                </td>
                <td className="sends-to">
                  {d.kind === "EMAIL" ? <Recipients destination={d} /> : <code className="url">{d.url}</code>}
                </td>
                <td>
                  <StateBadge destination={d} />
                </td>
                <td>
                  <Time unix={d.createTimeUnix} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {q.data && destinations.length === 0 ? (
        <p className="muted small table-note">
          No destinations yet: incidents show up in the console only. Add an email, a webhook or a chat
          channel to be told elsewhere.
        </p>
      ) : q.data ? (
        <p className="muted small table-note">
          {destinations.length} destination{destinations.length === 1 ? "" : "s"}; a project may have up to 5
          (unless the operator set another limit).
        </p>
      ) : null}
      <CreateDestinationDialog
        open={creating}
        destinations={destinations}
        onClose={() => setCreating(false)}
        onCreated={(d) => {
          setCreating(false);
          navigate(`/destinations/${lastSegment(d.name)}`);
        }}
      />
    </Page>
  );
}

const DELIVERY_STATES = ["", "PENDING", "SENT", "FAILED", "SKIPPED"];

/** One destination: details, pause/resume, verify, test, rotate, delete, and its delivery history. */
export function DestinationPage(props: { destinationId: string }) {
  const project = useProject();
  const { session } = useSession();
  const [, navigate] = useLocation();
  const queries = useQueryClient();
  const name = `${project.name}/destinations/${props.destinationId}`;
  const [dialog, setDialog] = useState<"edit" | "rotate" | "delete">();
  const [testDelivery, setTestDelivery] = useState<string>();
  // ?verify=1: opened from the link in a verification email.
  const fromEmail = new URLSearchParams(useSearch()).has("verify");
  const q = useQuery({
    queryKey: ["destination", name],
    queryFn: () => api.destinations.getDestination({ name }),
  });
  const all = useQuery({
    queryKey: ["destinations", project.name],
    queryFn: () => api.destinations.listDestinations({ projectName: project.name }),
  });
  const rules = useQuery({
    queryKey: ["alert-rules", project.name, "all"],
    queryFn: () => api.alerts.listAlertRules({ projectName: project.name, pageSize: 100 }),
    staleTime: 60_000,
  });
  const pause = useMutation({
    mutationFn: (paused: boolean) => api.destinations.updateDestination({ name, paused }),
    onSuccess: (d) => {
      queries.setQueryData(["destination", name], d);
      void queries.invalidateQueries({ queryKey: ["destinations", project.name] });
    },
  });
  const confirm = useMutation({
    mutationFn: () => api.destinations.confirmDestination({ name }),
    onSuccess: (d) => {
      queries.setQueryData(["destination", name], d);
      void queries.invalidateQueries({ queryKey: ["destinations", project.name] });
    },
  });
  const test = useMutation({
    mutationFn: () => api.destinations.sendTestNotification({ name }),
    onSuccess: (d) => {
      queries.setQueryData(["delivery", d.name], d);
      setTestDelivery(d.name);
      void queries.invalidateQueries({ queryKey: ["deliveries", project.name, "destination", name] });
    },
  });

  if (q.isPending) return <Loading what="the destination" />;
  const d = q.data;
  if (!d)
    return (
      <Page title="Destination" subtitle={<code>{name}</code>}>
        <ErrorBanner error={q.error} title="Could not read the destination" />
        <Link href="/destinations">← All destinations</Link>
      </Page>
    );
  const me = d.recipients.find((r) => r.user === session.user);
  const others = d.recipients.filter((r) => r.user !== session.user && !r.verified);
  return (
    <Page
      title={d.displayName}
      subtitle={
        <>
          <Link href="/destinations">Destinations</Link> / {kindLabel(d.kind)} ·{" "}
          <code>{props.destinationId}</code>
        </>
      }
      actions={
        project.canWrite ? (
          <>
            <Button
              kind="primary"
              onClick={() => test.mutate()}
              busy={test.isPending}
              title="Queue a test notification now; it is recorded like any delivery"
            >
              Send test
            </Button>
            <Button onClick={() => pause.mutate(!d.paused)} busy={pause.isPending}>
              {d.paused ? "Resume" : "Pause"}
            </Button>
            <Button onClick={() => setDialog("edit")}>Edit</Button>
            {d.kind === "WEBHOOK" ? (
              <Button onClick={() => setDialog("rotate")}>Rotate secret…</Button>
            ) : null}
            <Button kind="danger" onClick={() => setDialog("delete")}>
              Delete…
            </Button>
          </>
        ) : null
      }
    >
      <ErrorBanner error={q.error} title="Could not refresh the destination" />
      <ErrorBanner error={pause.error} title={d.paused ? "Could not resume" : "Could not pause"} />
      <ErrorBanner error={test.error} title="Could not send a test" />
      {!project.canWrite ? (
        <p className="banner banner-info">
          Your role <strong>{project.role}</strong> can read this destination
          {me && !me.verified ? " and verify your own address" : ""}; test sends and changes need the owner or
          editor role.
        </p>
      ) : null}
      {d.awaitingConfirmation ? (
        <div className="banner banner-warn" data-testid="confirm-destination">
          <p>
            <strong>Awaiting confirmation.</strong> <ActorName name={d.confirmationRequestedBy} /> pointed
            this destination at <strong>{hostOf(d.url)}</strong>
            {d.creator && d.creator !== d.confirmationRequestedBy ? (
              <>
                {" "}
                (created by <ActorName name={d.creator} />)
              </>
            ) : null}
            . Nothing is sent there until a person confirms it (DESTINATION_UNCONFIRMED).
          </p>
          {project.canWrite ? (
            <Button kind="primary" onClick={() => confirm.mutate()} busy={confirm.isPending}>
              Confirm sending to {hostOf(d.url)}
            </Button>
          ) : null}
          <ErrorBanner error={confirm.error} title="Could not confirm" />
        </div>
      ) : null}
      {d.paused ? (
        <p className="banner banner-warn">
          <strong>Paused.</strong> Nothing is sent here; deliveries that fall due meanwhile are skipped
          (DESTINATION_PAUSED), not sent on resume.
        </p>
      ) : null}

      {d.kind === "EMAIL" && me && !me.verified ? (
        <VerifyEmailCard destination={d} focus={fromEmail} />
      ) : null}
      {fromEmail && d.kind === "EMAIL" && me?.verified ? (
        <p className="banner banner-info" data-testid="already-verified">
          Your address {me.email} is verified for this destination: its notifications reach you.
        </p>
      ) : null}
      {fromEmail && d.kind === "EMAIL" && !me ? (
        <p className="banner banner-warn" data-testid="not-recipient">
          You are signed in as {session.email}, who is not a recipient of this destination. A code can only be
          entered by the recipient it was emailed to: sign out and sign in as them.
        </p>
      ) : null}

      {testDelivery ? (
        <TestResult name={testDelivery} label={d.displayName} onDismiss={() => setTestDelivery(undefined)} />
      ) : null}

      <div className="card">
        <h2>Details</h2>
        <dl className="kv" data-testid="destination-details">
          <dt>Kind</dt>
          <dd>{kindLabel(d.kind)}</dd>
          <dt>State</dt>
          <dd>
            <StateBadge destination={d} />
          </dd>
          {d.kind === "EMAIL" ? (
            <>
              <dt>Recipients</dt>
              <dd>
                <Recipients destination={d} />
                {others.length > 0 ? (
                  <div className="muted small">
                    Unverified recipients confirm with the code emailed to them, here, signed in as
                    themselves.
                  </div>
                ) : null}
              </dd>
            </>
          ) : (
            <>
              <dt>{d.kind === "WEBHOOK" || isIncidentApiKind(d.kind) ? "Endpoint" : "Webhook"}</dt>
              <dd>
                <code className="url">{d.url}</code>
                {isIncidentApiKind(d.kind) ? (
                  <div className="muted small">The integration key is sealed at rest and never shown.</div>
                ) : d.kind !== "WEBHOOK" ? (
                  <div className="muted small">
                    The URL is a secret: sealed at rest, only its host is shown.
                  </div>
                ) : null}
              </dd>
            </>
          )}
          {d.kind === "WEBHOOK" ? (
            <>
              <dt>Signing secrets</dt>
              <dd>
                <table className="table table-compact secrets" data-testid="secrets">
                  <thead>
                    <tr>
                      <th>ID</th>
                      <th>Created</th>
                      <th>Status</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.secrets.map((s) => (
                      <tr key={s.id}>
                        <td>
                          <code>{s.id}</code>
                        </td>
                        <td>
                          <Time unix={s.createTimeUnix} />
                        </td>
                        <td>
                          {Number(s.expireTimeUnix) ? (
                            <>
                              <Badge tone="warn">overlap</Badge> signs until <Time unix={s.expireTimeUnix} />
                            </>
                          ) : (
                            <Badge tone="ok">current</Badge>
                          )}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
                <div className="muted small">Secrets are never shown again after creation or rotation.</div>
              </dd>
            </>
          ) : null}
          <dt>Used by</dt>
          <dd data-testid="used-by">
            <UsedBy name={d.name} rules={rules.data?.rules} />
          </dd>
          <dt>Created</dt>
          <dd>
            <Time unix={d.createTimeUnix} />
          </dd>
          <dt>Updated</dt>
          <dd>
            <Time unix={d.updateTimeUnix} />
          </dd>
        </dl>
      </div>

      <DeliveryHistory destination={d} />

      <RecentActivity
        resource={name}
        changed={[d.updateTimeUnix, d.paused, d.secrets.map((x) => x.id).join(" "), testDelivery]}
      />

      {project.canWrite ? (
        <>
          <EditDestinationDialog
            key={`edit-${d.updateTimeUnix}`}
            open={dialog === "edit"}
            onClose={() => setDialog(undefined)}
            destination={d}
            destinations={all.data?.destinations ?? []}
          />
          {d.kind === "WEBHOOK" ? (
            <RotateSecretDialog
              open={dialog === "rotate"}
              onClose={() => setDialog(undefined)}
              destination={d}
            />
          ) : null}
          <DeleteDestinationDialog
            open={dialog === "delete"}
            onClose={() => setDialog(undefined)}
            destination={d}
            onDeleted={() => {
              setDialog(undefined);
              queries.removeQueries({ queryKey: ["destination", name] });
              navigate("/destinations");
            }}
          />
        </>
      ) : null}
    </Page>
  );
}

/** The alert rules whose latest revision names this destination. */
function UsedBy(props: { name: string; rules?: AlertRule[] }) {
  if (!props.rules) return <span className="muted">…</span>;
  const using = props.rules.filter((r) => r.spec?.destinationNames.includes(props.name));
  if (using.length === 0)
    return (
      <span className="muted">
        No alert rule names it yet: add it to a rule's destinations on the{" "}
        <Link href="/alerts">alert rules</Link> page.
      </span>
    );
  return (
    <span className="used-by">
      {using.map((r, n) => (
        <span key={r.name}>
          {n > 0 ? ", " : ""}
          <Link href={`/alerts/${r.id}`}>{r.spec?.displayName || r.id}</Link>
        </span>
      ))}
    </span>
  );
}

/** The delivery a test send created, read again until the dispatcher has attempted it. */
function TestResult(props: { name: string; label: string; onDismiss: () => void }) {
  const q = useQuery({
    queryKey: ["delivery", props.name],
    queryFn: () => api.destinations.getDelivery({ name: props.name }),
    refetchInterval: (query) => (!query.state.data || query.state.data.state === "PENDING" ? 1000 : false),
  });
  return (
    <div className="card test-result" data-testid="test-result">
      <header className="card-header">
        <h2>Test notification</h2>
        <Button onClick={props.onDismiss}>Dismiss</Button>
      </header>
      <ErrorBanner error={q.error} title="Could not read the test delivery" />
      {q.data ? (
        <>
          {q.data.state === "PENDING" ? (
            <p className="muted small">Queued; the dispatcher sends it within a second or two…</p>
          ) : null}
          <DeliveryFacts delivery={q.data as Delivery} destinationLabel={props.label} />
        </>
      ) : (
        <Loading what="the delivery" />
      )}
    </div>
  );
}

function DeliveryHistory(props: { destination: Destination }) {
  const project = useProject();
  const pager = usePager();
  const [state, setState] = useState("");
  const name = props.destination.name;
  const q = useQuery({
    queryKey: ["deliveries", project.name, "destination", name, state, pager.token],
    queryFn: () =>
      api.destinations.listDeliveries({
        projectName: project.name,
        destination: name,
        state,
        pageSize: 20,
        pageToken: pager.token,
      }),
    refetchInterval: (query) =>
      query.state.data?.deliveries.some((d) => d.state === "PENDING") ? 3000 : 15_000,
  });
  const deliveries = q.data?.deliveries ?? [];
  return (
    <div className="card">
      <header className="card-header">
        <div>
          <h2>Delivery history</h2>
          <p className="muted small">Newest first, each with every attempt. Kept 90 days.</p>
        </div>
        <select
          aria-label="Delivery state"
          value={state}
          onChange={(e) => {
            setState(e.target.value);
            pager.reset();
          }}
        >
          {DELIVERY_STATES.map((s) => (
            <option key={s} value={s}>
              {s ? s.charAt(0) + s.slice(1).toLowerCase() : "All states"}
            </option>
          ))}
        </select>
      </header>
      <ErrorBanner error={q.error} title="Could not list deliveries" />
      {q.isPending ? (
        <Loading what="deliveries" />
      ) : deliveries.length === 0 ? (
        <Empty>
          {state
            ? `No ${state.toLowerCase()} delivery.`
            : "Nothing delivered yet. Send a test, or wait for a rule that names this destination to fire."}
        </Empty>
      ) : (
        <DeliveriesTable
          deliveries={deliveries}
          showIncident
          destinations={new Map([[name, props.destination.displayName]])}
        />
      )}
      <Pager pager={pager} nextToken={q.data?.nextPageToken} />
    </div>
  );
}
