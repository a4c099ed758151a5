import type { CreateDestinationResponse, Destination } from "@gen/svc/monitoring/v1/destinations_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { api, describeError } from "../api.ts";
import { newRequestId } from "../format.ts";
import { useProject, useSession } from "../session.tsx";
import { Badge, Button, Dialog, ErrorBanner, Field, ShownOnce } from "./ui.tsx";

/** Forms of the destination screens: create, edit, rotate the webhook secret, delete, verify an email. */

export const KINDS = [
  {
    kind: "EMAIL",
    label: "Email",
    about:
      "An email to project members. Each recipient confirms with a code emailed to them before anything is sent (double opt-in).",
  },
  {
    kind: "WEBHOOK",
    label: "Webhook",
    about:
      "A signed HTTPS POST of the incident as JSON (Standard Webhooks). The signing secret is shown once.",
  },
  {
    kind: "SLACK",
    label: "Slack",
    about:
      "A Slack incoming webhook (https://hooks.slack.com/…). The URL is a secret: sealed, never shown again.",
  },
  {
    kind: "TEAMS",
    label: "Microsoft Teams",
    about: "A Teams Workflows webhook URL. The URL is a secret: sealed, never shown again.",
  },
  {
    kind: "DISCORD",
    label: "Discord",
    about:
      "A Discord webhook (https://discord.com/api/webhooks/…). The URL is a secret: sealed, never shown again.",
  },
  {
    kind: "PAGERDUTY",
    label: "PagerDuty",
    about:
      "PagerDuty's Events API v2: an incident triggers, acknowledging it in svc acknowledges and its recovery resolves the same PagerDuty incident. The integration key is sealed, never shown again.",
  },
  {
    kind: "OPSGENIE",
    label: "Opsgenie",
    about:
      "An Opsgenie API integration: an incident creates an alert, acknowledging it in svc acknowledges and its recovery closes it. The API key is sealed, never shown again.",
  },
] as const;

/** PagerDuty and Opsgenie: a fixed provider API and an integration key, not a URL of the user's. */
export function isIncidentApiKind(kind: string): boolean {
  return kind === "PAGERDUTY" || kind === "OPSGENIE";
}

/** What the key field asks for, per kind (docs/notifications.md; the server checks the shape again). */
const INTEGRATION_KEY: Record<string, { label: string; hint: string; check: RegExp; shape: string }> = {
  PAGERDUTY: {
    label: "Integration key",
    hint: "The Events API v2 integration (routing) key of a PagerDuty service: 32 letters and digits.",
    check: /^[A-Za-z0-9]{32}$/,
    shape: "A PagerDuty integration key is 32 letters and digits.",
  },
  OPSGENIE: {
    label: "API key",
    hint: "The API key of an Opsgenie API integration (a UUID).",
    check: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
    shape: "An Opsgenie API key is a UUID (8-4-4-4-12 hexadecimal digits).",
  },
};

function checkIntegrationKey(kind: string, key: string): string | undefined {
  const want = INTEGRATION_KEY[kind];
  if (!want) return undefined;
  if (!key.trim()) return `Enter the ${want.label.toLowerCase()}.`;
  if (!want.check.test(key.trim())) return want.shape;
  return undefined;
}

export function kindLabel(kind: string): string {
  return KINDS.find((k) => k.kind === kind)?.label ?? kind;
}

const URL_PLACEHOLDER: Record<string, string> = {
  WEBHOOK: "https://example.com/svc-webhook",
  SLACK: "https://hooks.slack.com/services/…",
  TEAMS: "https://….logic.azure.com/workflows/…",
  DISCORD: "https://discord.com/api/webhooks/…",
  PAGERDUTY: "https://events.pagerduty.com/v2/enqueue",
  OPSGENIE: "https://api.opsgenie.com/v2/alerts",
};

/** Client-side checks before sending; the server checks again (public address, provider host). */
function checkUrl(url: string): string | undefined {
  if (!url.trim()) return "Enter the URL.";
  let u: URL;
  try {
    u = new URL(url.trim());
  } catch {
    return "This is not a URL.";
  }
  if (u.protocol !== "https:") return "Only https:// URLs are accepted.";
  if (u.username || u.password) return "A URL must not carry a user name or password.";
  if (url.length > 2048) return "At most 2,048 characters.";
  return undefined;
}

function checkName(name: string): string | undefined {
  if (!name.trim()) return "Give the destination a name.";
  if (name.trim().length > 200) return "At most 200 characters.";
  return undefined;
}

/** What a refusal of CreateDestination means when the project is at its limit. */
export function LimitExplained(props: { error: unknown }) {
  const e = describeError(props.error);
  if (e.reason !== "DESTINATION_LIMIT_EXCEEDED")
    return <ErrorBanner error={props.error} title="Could not create" />;
  return (
    <div className="banner banner-warn" role="alert" data-testid="limit-reached">
      <strong>
        This project already has {e.metadata.count ?? "the maximum number of"} destinations; the limit is{" "}
        {e.metadata.limit ?? "5"}.
      </strong>{" "}
      Delete one you no longer need first. In-app notifications (the incident list) are always on and do not
      count. The operator sets the limit with <code>SVC_MAX_DESTINATIONS</code>.
      <span className="reason">{e.reason}</span>
    </div>
  );
}

/**
 * Recipient checkboxes over the project's members by name (ListMembers), filtered by a search field
 * when the project is large; recipients already chosen stay listed even if no longer members.
 */
function RecipientPicker(props: { value: string[]; onChange: (v: string[]) => void }) {
  const project = useProject();
  const { session } = useSession();
  const [filter, setFilter] = useState("");
  const members = useQuery({
    queryKey: ["members", project.name],
    queryFn: async () => (await api.destinations.listMembers({ projectName: project.name })).members,
  });
  const all = (members.data ?? []).map((m) => ({ user: m.user, name: m.displayName, email: m.email }));
  for (const u of props.value) if (!all.some((k) => k.user === u)) all.push({ user: u, name: "", email: "" });
  const f = filter.trim().toLowerCase();
  const shown = f
    ? all.filter((k) => props.value.includes(k.user) || `${k.name} ${k.email}`.toLowerCase().includes(f))
    : all;
  return (
    <fieldset className="recipients-picker">
      <legend className="field-label">Recipients</legend>
      {members.error ? (
        <ErrorBanner error={members.error} title="Could not list the project's members" />
      ) : null}
      {all.length > 8 ? (
        <input
          type="search"
          aria-label="Find a member by name or email"
          placeholder="Find a member by name or email"
          value={filter}
          onChange={(e) => setFilter(e.target.value)}
        />
      ) : null}
      <div className="checks" aria-busy={members.isPending}>
        {shown.map((k) => (
          <label key={k.user}>
            <input
              type="checkbox"
              checked={props.value.includes(k.user)}
              onChange={(e) =>
                props.onChange(
                  e.target.checked ? [...props.value, k.user] : props.value.filter((u) => u !== k.user),
                )
              }
            />
            <span>
              {k.name || k.email || <code>{k.user}</code>}
              {k.user === session.user ? <span className="muted"> (you)</span> : null}
              {k.name && k.email ? <span className="muted small"> {k.email}</span> : null}
            </span>
          </label>
        ))}
        {members.isPending ? <span className="muted">Loading members…</span> : null}
      </div>
      <span className="hint">
        Recipients must be members of this project (up to 50). Each gets an email with a code and receives
        nothing until they enter it here, signed in as themselves.
      </span>
    </fieldset>
  );
}

export function CreateDestinationDialog(props: {
  open: boolean;
  onClose: () => void;
  destinations: Destination[];
  onCreated: (d: Destination) => void;
}) {
  const project = useProject();
  const { session } = useSession();
  const queries = useQueryClient();
  const [kind, setKind] = useState<string>("WEBHOOK");
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [integrationKey, setIntegrationKey] = useState("");
  const [recipients, setRecipients] = useState<string[]>([session.user]);
  const [errors, setErrors] = useState<{ name?: string; url?: string; recipients?: string; key?: string }>(
    {},
  );
  // One request id per form content, so a retried click is answered as a replay, not a second destination.
  const [requestId, setRequestId] = useState(newRequestId);
  const [created, setCreated] = useState<CreateDestinationResponse>();
  const create = useMutation({
    mutationFn: () =>
      api.destinations.createDestination({
        projectName: project.name,
        displayName: name.trim(),
        kind,
        url: kind === "EMAIL" ? "" : url.trim(),
        recipients: kind === "EMAIL" ? recipients : [],
        integrationKey: isIncidentApiKind(kind) ? integrationKey.trim() : "",
        requestId,
      }),
    onSuccess: (r) => {
      void queries.invalidateQueries({ queryKey: ["destinations", project.name] });
      // A replay (an earlier attempt with this request id was created but its answer was lost) carries no
      // secret: say so instead of pretending there is none.
      if (r.webhookSecret || (r.replayed && r.destination?.kind === "WEBHOOK")) setCreated(r);
      else if (r.destination) finish(r.destination);
    },
  });
  const edited = () => {
    setRequestId(newRequestId());
    create.reset();
  };
  const reset = () => {
    setName("");
    setUrl("");
    setIntegrationKey("");
    setRecipients([session.user]);
    setErrors({});
    setCreated(undefined);
    setRequestId(newRequestId());
    create.reset();
  };
  const finish = (d: Destination) => {
    reset();
    props.onCreated(d);
  };
  const close = () => {
    // Closing with a secret on screen: the destination exists; the secret is gone once the dialog closes.
    const d = created?.destination;
    reset();
    if (d) props.onCreated(d);
    else props.onClose();
  };
  const about = KINDS.find((k) => k.kind === kind);
  return (
    <Dialog title="New destination" open={props.open} onClose={close}>
      {created?.destination ? (
        <div data-testid="created-webhook">
          <p>
            <Badge tone="ok">Created</Badge> <strong>{created.destination.displayName}</strong> will receive
            signed POSTs at <code>{created.destination.url}</code>.
          </p>
          {created.webhookSecret ? (
            <ShownOnce
              label="Signing secret"
              value={created.webhookSecret}
              onDone={() => created.destination && finish(created.destination)}
            />
          ) : (
            <div className="banner banner-warn">
              An earlier attempt already created this destination, but its answer (with the signing secret)
              was lost, and svc never shows a secret twice. Rotate the secret on the destination's page to get
              a new one.
              <div className="dialog-actions">
                <Button kind="primary" onClick={() => created.destination && finish(created.destination)}>
                  Open the destination
                </Button>
              </div>
            </div>
          )}
          <p className="muted small">
            Verify each request with it (the SDK's <code>verifyWebhook</code>, see docs/webhooks.md). If you
            lose it, rotate the secret on the destination's page.
          </p>
        </div>
      ) : (
        <form
          className="create-destination"
          onSubmit={(e) => {
            e.preventDefault();
            const errs = {
              name: checkName(name),
              // The provider's endpoint is optional for PagerDuty and Opsgenie (only their EU region needs it).
              url: kind === "EMAIL" || (isIncidentApiKind(kind) && !url.trim()) ? undefined : checkUrl(url),
              recipients:
                kind === "EMAIL" && recipients.length === 0 ? "Choose at least one recipient." : undefined,
              key: checkIntegrationKey(kind, integrationKey),
            };
            setErrors(errs);
            if (errs.name || errs.url || errs.recipients || errs.key) return;
            create.mutate();
          }}
        >
          <fieldset className="kind-picker">
            <legend className="field-label">Kind</legend>
            <div className="segmented" role="radiogroup" aria-label="Kind">
              {KINDS.map((k) => (
                <label key={k.kind} className={kind === k.kind ? "selected" : ""}>
                  <input
                    type="radio"
                    name="kind"
                    value={k.kind}
                    checked={kind === k.kind}
                    onChange={() => {
                      setKind(k.kind);
                      setErrors({});
                      edited();
                    }}
                  />
                  {k.label}
                </label>
              ))}
            </div>
            <p className="hint kind-about">{about?.about}</p>
          </fieldset>
          <Field label="Name" error={errors.name}>
            <input
              value={name}
              maxLength={200}
              placeholder={kind === "EMAIL" ? "On-call email" : `Ops ${about?.label ?? ""}`}
              onChange={(e) => {
                setName(e.target.value);
                edited();
              }}
            />
          </Field>
          {kind === "EMAIL" ? (
            <>
              <RecipientPicker
                value={recipients}
                onChange={(v) => {
                  setRecipients(v);
                  edited();
                }}
              />
              {errors.recipients ? <span className="field-error">{errors.recipients}</span> : null}
            </>
          ) : isIncidentApiKind(kind) ? (
            <>
              <Field label={INTEGRATION_KEY[kind].label} error={errors.key} hint={INTEGRATION_KEY[kind].hint}>
                <input
                  type="password"
                  autoComplete="off"
                  value={integrationKey}
                  onChange={(e) => {
                    setIntegrationKey(e.target.value);
                    edited();
                  }}
                />
              </Field>
              <Field
                label="API endpoint (optional)"
                error={errors.url}
                hint={`Empty: ${URL_PLACEHOLDER[kind]}. Give the EU endpoint if your account is in the EU region.`}
              >
                <input
                  type="url"
                  autoComplete="off"
                  value={url}
                  placeholder={URL_PLACEHOLDER[kind]}
                  onChange={(e) => {
                    setUrl(e.target.value);
                    edited();
                  }}
                />
              </Field>
            </>
          ) : (
            <Field
              label={kind === "WEBHOOK" ? "Endpoint URL" : "Webhook URL"}
              error={errors.url}
              hint={
                kind === "WEBHOOK"
                  ? "A public HTTPS endpoint. It is shown on the destination; redirects are never followed."
                  : "Sealed on save: afterwards only its host is shown, never the URL."
              }
            >
              <input
                type={kind === "WEBHOOK" ? "url" : "password"}
                autoComplete="off"
                value={url}
                placeholder={URL_PLACEHOLDER[kind]}
                onChange={(e) => {
                  setUrl(e.target.value);
                  edited();
                }}
              />
            </Field>
          )}
          {create.error ? <LimitExplained error={create.error} /> : null}
          <div className="dialog-actions">
            <Button onClick={close}>Cancel</Button>
            <Button kind="primary" type="submit" busy={create.isPending}>
              Create destination
            </Button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

export function EditDestinationDialog(props: {
  open: boolean;
  onClose: () => void;
  destination: Destination;
  destinations: Destination[];
}) {
  const d = props.destination;
  const queries = useQueryClient();
  const [name, setName] = useState(d.displayName);
  const [url, setUrl] = useState("");
  const [recipients, setRecipients] = useState(d.recipients.map((r) => r.user));
  const [integrationKey, setIntegrationKey] = useState("");
  const [errors, setErrors] = useState<{ name?: string; url?: string; recipients?: string; key?: string }>(
    {},
  );
  const update = useMutation({
    mutationFn: () => {
      const recipientsChanged =
        d.kind === "EMAIL" &&
        (recipients.length !== d.recipients.length ||
          recipients.some((u) => !d.recipients.some((r) => r.user === u)));
      return api.destinations.updateDestination({
        name: d.name,
        displayName: name.trim() !== d.displayName ? name.trim() : undefined,
        url: d.kind !== "EMAIL" && url.trim() ? url.trim() : undefined,
        recipients: recipientsChanged ? recipients : [],
        updateRecipients: recipientsChanged,
        integrationKey:
          isIncidentApiKind(d.kind) && integrationKey.trim() ? integrationKey.trim() : undefined,
      });
    },
    onSuccess: (n) => {
      queries.setQueryData(["destination", d.name], n);
      void queries.invalidateQueries({ queryKey: ["destinations"] });
      props.onClose();
    },
  });
  return (
    <Dialog title={`Edit ${d.displayName}`} open={props.open} onClose={props.onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          const errs = {
            name: checkName(name),
            url: d.kind !== "EMAIL" && url.trim() ? checkUrl(url) : undefined,
            recipients:
              d.kind === "EMAIL" && recipients.length === 0 ? "Keep at least one recipient." : undefined,
            key: integrationKey.trim() ? checkIntegrationKey(d.kind, integrationKey) : undefined,
          };
          setErrors(errs);
          if (errs.name || errs.url || errs.recipients || errs.key) return;
          update.mutate();
        }}
      >
        <Field label="Name" error={errors.name}>
          <input value={name} maxLength={200} onChange={(e) => setName(e.target.value)} />
        </Field>
        {d.kind === "EMAIL" ? (
          <>
            <RecipientPicker value={recipients} onChange={setRecipients} />
            {errors.recipients ? <span className="field-error">{errors.recipients}</span> : null}
            <p className="hint">
              Recipients you keep stay verified; new ones get a code. To send someone a new code after theirs
              expired, remove them, save, and add them again.
            </p>
          </>
        ) : (
          <Field
            label="New URL"
            error={errors.url}
            hint={
              d.kind === "WEBHOOK" || isIncidentApiKind(d.kind)
                ? `Now ${d.url}. Leave empty to keep it.`
                : "The current URL is sealed and cannot be shown. Leave empty to keep it."
            }
          >
            <input
              type={d.kind === "WEBHOOK" || isIncidentApiKind(d.kind) ? "url" : "password"}
              autoComplete="off"
              value={url}
              placeholder={URL_PLACEHOLDER[d.kind]}
              onChange={(e) => setUrl(e.target.value)}
            />
          </Field>
        )}
        {isIncidentApiKind(d.kind) ? (
          <Field
            label={`New ${INTEGRATION_KEY[d.kind].label.toLowerCase()}`}
            error={errors.key}
            hint="The current key is sealed and cannot be shown. Leave empty to keep it."
          >
            <input
              type="password"
              autoComplete="off"
              value={integrationKey}
              onChange={(e) => setIntegrationKey(e.target.value)}
            />
          </Field>
        ) : null}
        <ErrorBanner error={update.error} title="Could not save" />
        <div className="dialog-actions">
          <Button onClick={props.onClose}>Cancel</Button>
          <Button kind="primary" type="submit" busy={update.isPending}>
            Save
          </Button>
        </div>
      </form>
    </Dialog>
  );
}

const OVERLAPS = [
  { seconds: 0, label: "None (0)" },
  { seconds: 3600, label: "1 hour" },
  { seconds: 6 * 3600, label: "6 hours" },
  { seconds: 86_400, label: "24 hours" },
];

export function RotateSecretDialog(props: { open: boolean; onClose: () => void; destination: Destination }) {
  const d = props.destination;
  const queries = useQueryClient();
  const [hours, setHours] = useState("1");
  const [invalid, setInvalid] = useState<string>();
  const rotate = useMutation({
    mutationFn: (overlapSeconds: number) =>
      api.destinations.rotateWebhookSecret({ name: d.name, overlapSeconds }),
    onSuccess: (r) => {
      if (r.destination) queries.setQueryData(["destination", d.name], r.destination);
      void queries.invalidateQueries({ queryKey: ["destinations"] });
    },
  });
  const close = () => {
    rotate.reset();
    setInvalid(undefined);
    props.onClose();
  };
  const h = Number(hours);
  return (
    <Dialog title="Rotate the signing secret" open={props.open} onClose={close}>
      {rotate.data ? (
        <div data-testid="rotated">
          <ShownOnce label="New signing secret" value={rotate.data.webhookSecret} onDone={close} />
          <p className="muted small">
            {rotate.variables === 0
              ? "The old secret was discarded: every delivery from now on is signed with this one only."
              : `Deliveries are signed with both secrets until ${new Date(Date.now() + (rotate.variables ?? 0) * 1000).toLocaleString()}; then with this one only.`}
          </p>
        </div>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (hours.trim() === "" || !Number.isFinite(h) || h < 0 || h > 24)
              return setInvalid("Enter 0 to 24 hours.");
            setInvalid(undefined);
            rotate.mutate(Math.round(h * 3600));
          }}
        >
          <p>
            svc creates a new secret and shows it once. During the <strong>overlap</strong>, each delivery
            carries signatures with the old and the new secret, so you can update your receiver without
            missing a message.
          </p>
          <div className="row overlap-presets">
            {OVERLAPS.map((o) => (
              <Button
                key={o.seconds}
                className={Math.round(h * 3600) === o.seconds ? "selected" : ""}
                onClick={() => {
                  setHours(String(o.seconds / 3600));
                  setInvalid(undefined);
                }}
              >
                {o.label}
              </Button>
            ))}
          </div>
          <Field label="Overlap (hours)" hint="0 to 24 hours." error={invalid}>
            <input
              type="number"
              min={0}
              max={24}
              step="0.25"
              value={hours}
              onChange={(e) => setHours(e.target.value)}
            />
          </Field>
          {h === 0 && hours.trim() !== "" ? (
            <p className="banner banner-warn" data-testid="overlap-zero">
              <strong>Overlap 0 discards the old secret at once.</strong> Deliveries from now on are signed
              with the new secret only: a receiver still checking the old one rejects them until you update
              it.
            </p>
          ) : null}
          <ErrorBanner error={rotate.error} title="Could not rotate" />
          <div className="dialog-actions">
            <Button onClick={close}>Cancel</Button>
            <Button kind="primary" type="submit" busy={rotate.isPending}>
              Rotate secret
            </Button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

export function DeleteDestinationDialog(props: {
  open: boolean;
  onClose: () => void;
  destination: Destination;
  onDeleted: () => void;
}) {
  const d = props.destination;
  const queries = useQueryClient();
  const [typed, setTyped] = useState("");
  const del = useMutation({
    // The dialog says the rules that name it are saved without it: the person chose to detach it.
    mutationFn: () => api.destinations.deleteDestination({ name: d.name, detachFromRules: true }),
    onSuccess: () => {
      void queries.invalidateQueries({ queryKey: ["destinations"] });
      void queries.invalidateQueries({ queryKey: ["alert-rules"] });
    },
  });
  return (
    <Dialog title="Delete destination" open={props.open} onClose={del.data ? props.onDeleted : props.onClose}>
      {del.data ? (
        <div data-testid="deleted">
          <p>
            <strong>{d.displayName}</strong> was deleted.{" "}
            {del.data.skippedDeliveries > 0
              ? `${del.data.skippedDeliveries} pending deliver${del.data.skippedDeliveries === 1 ? "y is" : "ies are"} skipped (DESTINATION_DELETED).`
              : "No delivery was pending."}{" "}
            {del.data.detachedRules.length > 0
              ? `Removed from ${del.data.detachedRules.length} alert rule${del.data.detachedRules.length === 1 ? "" : "s"} (a new version each).`
              : ""}
          </p>
          <div className="dialog-actions">
            <Button kind="primary" onClick={props.onDeleted}>
              Back to destinations
            </Button>
          </div>
        </div>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (typed === d.displayName) del.mutate();
          }}
        >
          <p>
            Alert rules that name <strong>{d.displayName}</strong> are saved again without it (a new version
            of each), and its pending deliveries are skipped. Its delivery history stays readable for 90 days.
            This cannot be undone.
          </p>
          <Field label={`Type “${d.displayName}” to confirm`}>
            <input value={typed} onChange={(e) => setTyped(e.target.value)} autoComplete="off" />
          </Field>
          <ErrorBanner error={del.error} title="Could not delete" />
          <div className="dialog-actions">
            <Button onClick={props.onClose}>Cancel</Button>
            <Button kind="danger" type="submit" disabled={typed !== d.displayName} busy={del.isPending}>
              Delete destination
            </Button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

/** The signed-in recipient confirms their own address with the code from the verification email. */
export function VerifyEmailCard(props: { destination: Destination; focus?: boolean }) {
  const d = props.destination;
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    // Opened from the link in the verification email: the code field is where the user is going.
    if (props.focus) input.current?.focus();
  }, [props.focus]);
  const project = useProject();
  const { session } = useSession();
  const queries = useQueryClient();
  const [code, setCode] = useState("");
  const [invalid, setInvalid] = useState<string>();
  const verify = useMutation({
    mutationFn: () => api.destinations.verifyDestination({ name: d.name, code: code.trim() }),
    onSuccess: (n) => {
      queries.setQueryData(["destination", d.name], n);
      void queries.invalidateQueries({ queryKey: ["destinations", project.name] });
      setCode("");
    },
  });
  return (
    <div className="card verify-card" data-testid="verify-email">
      <h2>Confirm your address</h2>
      <p>
        svc emailed <strong>{session.email}</strong> a code, subject “[svc] Confirm alert emails from project{" "}
        {project.id}”. Enter it to start receiving this destination's notifications. Until then nothing is
        sent to you.
      </p>
      <form
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          if (!code.trim()) return setInvalid("Enter the code from the email.");
          setInvalid(undefined);
          verify.mutate();
        }}
      >
        <input
          ref={input}
          aria-label="Verification code"
          className="code-input mono"
          placeholder="Code from the email"
          autoComplete="one-time-code"
          value={code}
          onChange={(e) => {
            setCode(e.target.value);
            setInvalid(undefined);
          }}
        />
        <Button kind="primary" type="submit" busy={verify.isPending}>
          Verify
        </Button>
      </form>
      {invalid ? <p className="field-error">{invalid}</p> : null}
      <ErrorBanner error={verify.error} title="Not verified" />
      <p className="hint">
        Codes are valid for 24 hours. For a new one, an owner or editor removes you from the recipients,
        saves, and adds you again.
      </p>
    </div>
  );
}
