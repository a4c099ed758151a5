import { Code, ConnectError } from "@connectrpc/connect";
import { type ReactNode, useState } from "react";
import "./access-ui.css";
import { Badge, Button, Dialog, ErrorBanner, Pre } from "./ui.tsx";

/** Building blocks shared by the access screens: keys, service accounts and CI trusts. */

/** The capabilities svc knows (docs/api.md#capabilities), with what each allows, for people. */
export const CAPABILITIES: { id: string; label: string; allows: string }[] = [
  {
    id: "monitoring.read",
    label: "monitoring.read",
    allows: "VM inventory, metric queries, alert previews, the Prometheus API and scrape export",
  },
  {
    id: "monitoring.write",
    label: "monitoring.write",
    allows: "saving and deleting alert rules (which may name existing destinations)",
  },
  {
    id: "notifications.write",
    label: "notifications.write",
    allows:
      "creating, changing and deleting notification destinations; a webhook it creates waits for a person's confirmation",
  },
  {
    id: "silences.write",
    label: "silences.write",
    allows:
      "creating, editing and expiring silences that mute notifications; a key's silence lasts at most 24 hours",
  },
  {
    id: "audit.read",
    label: "audit.read",
    allows: "reading the project's audit log: who changed what, from where and when",
  },
];

/** The permission templates of service accounts, also offered for keys. */
export const TEMPLATES: { name: string; capabilities: string[]; blurb: string }[] = [
  {
    name: "Metrics scraper",
    capabilities: ["monitoring.read"],
    blurb: "Reads inventory and metrics: Prometheus, Grafana, dashboards, reports.",
  },
  {
    name: "Alert manager",
    capabilities: ["monitoring.read", "monitoring.write"],
    blurb:
      "Reads, and also saves alert rules (e.g. from a deployment pipeline); cannot change where alerts go.",
  },
  {
    name: "Notification manager",
    capabilities: ["monitoring.read", "notifications.write"],
    blurb:
      "Reads, and manages notification destinations; webhooks it creates wait for a person to confirm them.",
  },
  {
    name: "Silence manager",
    capabilities: ["monitoring.read", "silences.write"],
    blurb:
      "Reads, and schedules silences of at most 24 hours (e.g. around a deployment); cannot change rules or destinations.",
  },
  {
    name: "Auditor",
    capabilities: ["audit.read"],
    blurb: "Reads the audit log only, e.g. to export it to your log store.",
  },
];

/** Each capability with what it allows, as a list (the key-creation screens show it for the choice). */
export function CapabilityAllows(props: { capabilities: readonly string[] }) {
  return (
    <ul className="hint access-allows" aria-label="What these capabilities allow">
      {props.capabilities.map((c) => (
        <li key={c}>
          <code>{c}</code>: {CAPABILITIES.find((x) => x.id === c)?.allows ?? "unknown capability"}
        </li>
      ))}
    </ul>
  );
}

export function CapabilityBadges(props: { capabilities: readonly string[] }) {
  if (props.capabilities.length === 0) return <span className="muted">none</span>;
  return (
    <span className="access-caps">
      {props.capabilities.map((c) => (
        <Badge key={c} tone={c.endsWith(".write") ? "warn" : "info"}>
          {c}
        </Badge>
      ))}
    </span>
  );
}

export { Time } from "./ui.tsx";

/**
 * Whether a failed call may still have been carried out by the server (the answer was lost): then the
 * retry must be the exact same request, with the same requestId.
 */
export function isUncertain(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return true;
  return [
    Code.Unknown,
    Code.Unavailable,
    Code.DeadlineExceeded,
    Code.Internal,
    Code.Aborted,
    Code.Canceled,
  ].includes(err.code);
}

/** A confirmation with the server's error kept in the dialog. */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  confirmLabel: string;
  danger?: boolean;
  onClose: () => void;
  onConfirm: () => Promise<unknown>;
  children: ReactNode;
}) {
  return (
    <Dialog title={props.title} open={props.open} onClose={props.onClose}>
      <ConfirmBody {...props} />
    </Dialog>
  );
}

function ConfirmBody(props: Parameters<typeof ConfirmDialog>[0]) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  return (
    <div>
      <div className="access-confirm-text">{props.children}</div>
      <ErrorBanner error={error} />
      <div className="access-dialog-actions">
        <Button onClick={props.onClose}>Cancel</Button>
        <Button
          kind={props.danger ? "danger" : "primary"}
          busy={busy}
          onClick={async () => {
            setBusy(true);
            setError(undefined);
            try {
              await props.onConfirm();
              props.onClose();
            } catch (e) {
              setError(e);
            } finally {
              setBusy(false);
            }
          }}
        >
          {props.confirmLabel}
        </Button>
      </div>
    </div>
  );
}

/** A block of text to copy (a workflow, a command), with its own copy button. */
export function CopyBlock(props: { text: string; label: string; testId?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <div className="access-copy-block">
      <div className="access-copy-head">
        <span className="field-label">{props.label}</span>
        <Button
          onClick={async () => {
            await navigator.clipboard?.writeText(props.text).catch(() => {});
            setCopied(true);
            setTimeout(() => setCopied(false), 1500);
          }}
        >
          {copied ? "Copied" : "Copy"}
        </Button>
      </div>
      <Pre testId={props.testId}>{props.text}</Pre>
    </div>
  );
}
