import { createContext, type ReactNode, useContext, useEffect, useRef, useState } from "react";
import { describeError } from "../api.ts";
import { fmtAgo, fmtTime, MISSING } from "../format.ts";

/** Shared building blocks: page frame, tables, errors, buttons, dialogs, a secret shown once. */

/** Route changes not yet answered by focusing a page heading (app.tsx counts them). */
let pendingFocus = 0;
export function navigated(): void {
  pendingFocus++;
}

export function Page(props: {
  title: string;
  actions?: ReactNode;
  children: ReactNode;
  subtitle?: ReactNode;
}) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${props.title} · svc`;
  }, [props.title]);
  // After a route change the new page's heading takes focus (a page still loading its data does this
  // once it renders), so keyboard and screen-reader users land on what they asked for.
  useEffect(() => {
    if (pendingFocus === 0 || !heading.current) return;
    pendingFocus = 0;
    heading.current.focus();
  });
  return (
    <section className="page">
      <header className="page-header">
        <div>
          <h1 ref={heading} tabIndex={-1}>
            {props.title}
          </h1>
          {props.subtitle ? <p className="subtitle">{props.subtitle}</p> : null}
        </div>
        {props.actions ? <div className="page-actions">{props.actions}</div> : null}
      </header>
      {props.children}
    </section>
  );
}

export function ErrorBanner(props: { error: unknown; title?: string }) {
  if (!props.error) return null;
  const e = describeError(props.error);
  return (
    <div className="banner banner-error" role="alert">
      <strong>{props.title ?? "Request failed"}:</strong> {e.message}
      {e.field ? (
        <span className="muted">
          {" "}
          (field <code>{e.field}</code>)
        </span>
      ) : null}
      {e.reason ? <span className="reason">{e.reason}</span> : null}
    </div>
  );
}

export function Loading(props: { what?: string }) {
  return <p className="muted loading">Loading {props.what ?? ""}…</p>;
}

export function Empty(props: { children: ReactNode }) {
  return <p className="empty">{props.children}</p>;
}

export function Badge(props: {
  tone?: "ok" | "warn" | "bad" | "info" | "muted";
  children: ReactNode;
  title?: string;
}) {
  return (
    <span className={`badge badge-${props.tone ?? "muted"}`} title={props.title}>
      {props.children}
    </span>
  );
}

export function Button(
  props: {
    kind?: "primary" | "danger" | "plain";
    busy?: boolean;
  } & React.ButtonHTMLAttributes<HTMLButtonElement>,
) {
  const { kind, busy, children, className, disabled, ...rest } = props;
  return (
    <button
      type="button"
      {...rest}
      disabled={disabled || busy}
      className={`btn btn-${kind ?? "plain"} ${className ?? ""}`}
    >
      {busy ? "…" : children}
    </button>
  );
}

export function CopyButton(props: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <Button
      onClick={async () => {
        await navigator.clipboard?.writeText(props.text).catch(() => {});
        setCopied(true);
        setTimeout(() => setCopied(false), 1500);
      }}
    >
      {copied ? "Copied" : (props.label ?? "Copy")}
    </Button>
  );
}

/** Locks the enclosing Dialog while a secret it shows has not been confirmed as stored. */
const DialogLock = createContext<((locked: boolean) => void) | undefined>(undefined);

/**
 * A secret or command that the server returns once: shown with a copy button and a warning. With onDone,
 * the dialog around it closes only through "I have stored it": not by Escape, × or anything else.
 */
export function ShownOnce(props: { label: string; value: string; onDone?: () => void }) {
  const lock = useContext(DialogLock);
  const locks = !!props.onDone;
  useEffect(() => {
    if (!locks || !lock) return;
    lock(true);
    return () => lock(false);
  }, [lock, locks]);
  return (
    <div className="shown-once" data-testid="shown-once">
      <p>
        <strong>{props.label}</strong> — shown only now. Copy it; svc keeps only a hash and cannot show it
        again.
      </p>
      <div className="secret-row">
        <code className="secret">{props.value}</code>
        <CopyButton text={props.value} />
      </div>
      {props.onDone ? (
        <Button kind="primary" onClick={props.onDone}>
          I have stored it
        </Button>
      ) : null}
    </div>
  );
}

/**
 * A modal on the native <dialog> (focus trapped and given back by the browser). Typing into it makes it
 * dirty until the form is submitted: then Escape and × ask before discarding what was typed.
 */
export function Dialog(props: { title: string; open: boolean; onClose: () => void; children: ReactNode }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [dirty, setDirty] = useState(false);
  const [confirming, setConfirming] = useState(false);
  // A once-shown secret inside (ShownOnce with onDone) holds the dialog open until it is confirmed.
  const [locked, setLocked] = useState(false);
  const [nudged, setNudged] = useState(false);
  useEffect(() => {
    if (!locked) setNudged(false);
  }, [locked]);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
    setDirty(false);
    setConfirming(false);
  }, [props.open]);
  const askOrClose = () => {
    if (locked) setNudged(true);
    else if (dirty) setConfirming(true);
    else props.onClose();
  };
  return (
    <dialog
      ref={ref}
      className="dialog"
      onClose={props.onClose}
      aria-label={props.title}
      onInput={() => setDirty(true)}
      onSubmit={() => setDirty(false)}
      // Escape is handled here rather than by the browser's cancel, which Chromium stops honouring
      // after one prevented cancel without a click in between.
      onKeyDown={(e) => {
        if (e.key !== "Escape") return;
        e.preventDefault();
        e.stopPropagation();
        if (confirming) setConfirming(false);
        else askOrClose();
      }}
      onCancel={(e) => {
        e.preventDefault();
        askOrClose();
      }}
    >
      <header>
        <h2>{props.title}</h2>
        {locked ? null : (
          <button type="button" className="close" aria-label="Close" onClick={askOrClose}>
            ×
          </button>
        )}
      </header>
      {nudged ? (
        <div className="banner banner-warn" role="alert" data-testid="store-first">
          This secret cannot be shown again. Store it, then choose <strong>I have stored it</strong>.
        </div>
      ) : null}
      {confirming ? (
        <div className="dialog-confirm" role="alert" data-testid="discard-confirm">
          <span>Discard what you typed?</span>
          <Button kind="danger" onClick={props.onClose}>
            Discard
          </Button>
          {/* biome-ignore lint/a11y/noAutofocus: the question needs an answer before anything else */}
          <Button autoFocus onClick={() => setConfirming(false)}>
            Keep editing
          </Button>
        </div>
      ) : null}
      <DialogLock.Provider value={setLocked}>{props.open ? props.children : null}</DialogLock.Provider>
    </dialog>
  );
}

/** Preformatted text that may scroll sideways: focusable, so the keyboard can scroll it (WCAG 2.1.1). */
export function Pre(props: { children: ReactNode; testId?: string; className?: string }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard
    <pre tabIndex={0} className={props.className} data-testid={props.testId}>
      {props.children}
    </pre>
  );
}

export function Field(props: { label: string; hint?: ReactNode; children: ReactNode; error?: string }) {
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the control is the child
    <label className="field">
      <span className="field-label">{props.label}</span>
      {props.children}
      {props.hint ? <span className="hint">{props.hint}</span> : null}
      {props.error ? <span className="field-error">{props.error}</span> : null}
    </label>
  );
}

/** Pages through a List RPC: keeps the tokens seen so far so "Previous" works. */
export function usePager() {
  const [tokens, setTokens] = useState<string[]>([""]);
  const token = tokens[tokens.length - 1];
  return {
    token,
    page: tokens.length,
    next: (t: string | undefined) => t && setTokens([...tokens, t]),
    prev: () => tokens.length > 1 && setTokens(tokens.slice(0, -1)),
    reset: () => setTokens([""]),
  };
}

export function Pager(props: { pager: ReturnType<typeof usePager>; nextToken?: string }) {
  const { pager, nextToken } = props;
  if (pager.page === 1 && !nextToken) return null;
  return (
    <div className="pager">
      <Button onClick={pager.prev} disabled={pager.page === 1}>
        ← Previous
      </Button>
      <span className="muted">Page {pager.page}</span>
      <Button onClick={() => pager.next(nextToken)} disabled={!nextToken}>
        Next →
      </Button>
    </div>
  );
}

/** A time in the browser's zone, with UTC on hover; a dash when there is none. */
export function Time(props: { unix: bigint | number | undefined; relative?: boolean; className?: string }) {
  const s = Number(props.unix ?? 0);
  if (!s) return <span className="muted">{MISSING}</span>;
  const d = new Date(s * 1000);
  const utc = `${d
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d{3}Z$/, "")} UTC`;
  return (
    <time dateTime={d.toISOString()} title={utc} className={props.className}>
      {fmtTime(s)}
      {props.relative ? <span className="muted small"> ({fmtAgo(s)})</span> : null}
    </time>
  );
}
