import type { Silence } from "@gen/svc/monitoring/v1/silences_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api, describeError } from "../api.ts";
import { fmtTime, lastSegment, newRequestId } from "../format.ts";
import { RuleOptions, useProjectRules, useProjectVms, VmOptions } from "./paged-list.tsx";
import { Button, Dialog, Field } from "./ui.tsx";

/**
 * The silence form (issue 43, item 3): on the Silences page, and as the "Silence…" dialog of an incident
 * and a VM with the matchers filled in. Ends by a preset (1 h, 4 h, tomorrow 09:00) or a local time in
 * the browser's named time zone; every refusal is said in words next to the field it is about.
 */

/** The server's bounds (packages/server/src/notify/silences.ts): at most 90 days, start ≤ 365 days ahead. */
const MAX_SILENCE_MS = 90 * 86_400_000;

/** "2026-11-25T14:30" in the browser's zone, for <input type="datetime-local">. */
export function localInput(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** The browser's time zone as people read it: "Europe/Berlin (UTC+01:00)". */
export function timeZoneLabel(atMs = Date.now()): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
  const off = -new Date(atMs).getTimezoneOffset();
  const p = (n: number) => String(Math.floor(Math.abs(n))).padStart(2, "0");
  const utc = `UTC${off < 0 ? "−" : "+"}${p(off / 60)}:${p(off % 60)}`;
  return zone === "UTC" || zone === "Etc/UTC" ? "UTC" : `${zone} (${utc})`;
}

/** Tomorrow at 09:00 in the browser's zone. */
function tomorrowNine(nowMs: number): number {
  const d = new Date(nowMs);
  d.setDate(d.getDate() + 1);
  d.setHours(9, 0, 0, 0);
  return d.getTime();
}

const PRESETS: { label: string; end: (fromMs: number) => number }[] = [
  { label: "1 hour", end: (from) => from + 3600_000 },
  { label: "4 hours", end: (from) => from + 4 * 3600_000 },
  { label: "Until tomorrow 09:00", end: (from) => tomorrowNine(from) },
];

/** What each field of CreateSilence is called on the form. */
const FIELD_LABELS: Record<string, string> = {
  comment: "Comment",
  startTimeUnix: "Starts",
  endTimeUnix: "Ends",
  ruleNames: "Rule",
  vmNames: "VM",
};

type Errors = Partial<Record<"rule" | "start" | "end" | "comment", string>>;

/** The form's own checks, in words, before anything is sent (the server checks again). */
function check(f: SilenceFields, nowMs: number): Errors {
  const e: Errors = {};
  const start = f.start ? new Date(f.start).getTime() : nowMs;
  const end = f.end ? new Date(f.end).getTime() : Number.NaN;
  if (!f.rule && !f.vm) e.rule = "Choose a rule, a VM or both: a silence of everything is refused.";
  if (f.start && Number.isNaN(start)) e.start = "This is not a date and time.";
  if (!f.end) e.end = "Choose when the silence ends: a preset or a date and time.";
  else if (Number.isNaN(end)) e.end = "This is not a date and time.";
  else if (end <= Math.max(start, nowMs)) e.end = "The end must be after the start and in the future.";
  else if (end - start > MAX_SILENCE_MS) e.end = "A silence lasts at most 90 days.";
  if (!f.comment.trim()) e.comment = "Say why the notifications are muted (people will see it).";
  return e;
}

export interface SilenceFields {
  rule: string;
  vm: string;
  start: string;
  end: string;
  comment: string;
}

/** A server refusal in words: the field's name on the form, never `endTimeUnix … INVALID_FIELD`. */
function refusalInWords(err: unknown): { field?: keyof Errors; text: string } {
  const e = describeError(err);
  const key = e.field?.replace(/\[\d+\]$/, "");
  const label = key ? FIELD_LABELS[key] : undefined;
  // The server's message starts with the field's API name ("endTimeUnix: is required …").
  const text = e.message.replace(/^[A-Za-z]+(\[\d+\])?: /, "").replace(/ \(Unix seconds\)/, "");
  const field = (
    { comment: "comment", startTimeUnix: "start", endTimeUnix: "end", ruleNames: "rule" } as const
  )[key as "comment"];
  return { field, text: label ? `${label} ${text}` : text };
}

export function SilenceForm(props: {
  projectName: string;
  initial?: Partial<SilenceFields>;
  /** Rule and VM are fixed (the incident's or the VM's), shown but not changed. */
  fixed?: boolean;
  onCreated?: (s: Silence) => void;
  onCancel?: () => void;
  testId?: string;
}) {
  const qc = useQueryClient();
  const empty: SilenceFields = { rule: "", vm: "", start: "", end: "", comment: "", ...props.initial };
  const [form, setForm] = useState<SilenceFields>(empty);
  const [errors, setErrors] = useState<Errors>({});
  const set = (k: keyof SilenceFields, v: string) => {
    setForm({ ...form, [k]: v });
    setErrors({ ...errors, [k === "vm" ? "rule" : k]: undefined });
  };
  const create = useMutation({
    mutationFn: () =>
      api.silences.createSilence({
        projectName: props.projectName,
        requestId: newRequestId(),
        comment: form.comment.trim(),
        ruleNames: form.rule ? [form.rule] : [],
        vmNames: form.vm ? [form.vm] : [],
        startTimeUnix: form.start ? BigInt(Math.floor(new Date(form.start).getTime() / 1000)) : 0n,
        endTimeUnix: BigInt(Math.floor(new Date(form.end).getTime() / 1000)),
      }),
    onSuccess: (s) => {
      setForm(empty);
      void qc.invalidateQueries({ queryKey: ["silences", props.projectName] });
      void qc.invalidateQueries({ queryKey: ["incidents", props.projectName] });
      void qc.invalidateQueries({ queryKey: ["incident"] });
      props.onCreated?.(s);
    },
  });
  const refusal = create.error ? refusalInWords(create.error) : undefined;
  const shown = (k: keyof Errors) => errors[k] ?? (refusal?.field === k ? refusal.text : undefined);
  const from = form.start ? new Date(form.start).getTime() : Date.now();
  return (
    <form
      className="silence-form"
      data-testid={props.testId}
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        const errs = check(form, Date.now());
        setErrors(errs);
        if (Object.values(errs).some(Boolean)) return;
        create.mutate();
      }}
    >
      <div className="alert-form-grid">
        {props.fixed ? (
          <FixedMatchers projectName={props.projectName} rule={form.rule} vm={form.vm} />
        ) : (
          <>
            <Field label="Rule" hint="and/or a VM" error={shown("rule")}>
              <select value={form.rule} onChange={(e) => set("rule", e.target.value)}>
                <RuleOptions projectName={props.projectName} any="Any rule" />
              </select>
            </Field>
            <Field label="VM">
              <select value={form.vm} onChange={(e) => set("vm", e.target.value)}>
                <VmOptions projectName={props.projectName} any="Any VM" />
              </select>
            </Field>
          </>
        )}
        <Field label="Starts" hint="empty: now" error={shown("start")}>
          <input type="datetime-local" value={form.start} onChange={(e) => set("start", e.target.value)} />
        </Field>
        <Field label="Ends" error={shown("end")} hint={`Times in ${timeZoneLabel(from)}`}>
          <input type="datetime-local" value={form.end} onChange={(e) => set("end", e.target.value)} />
        </Field>
      </div>
      <fieldset className="silence-presets">
        <legend className="field-label">Ends after</legend>
        <div className="row">
          {PRESETS.map((p) => (
            <Button
              key={p.label}
              className={form.end === localInput(p.end(from)) ? "selected" : ""}
              aria-pressed={form.end === localInput(p.end(from))}
              onClick={() => set("end", localInput(p.end(from)))}
            >
              {p.label}
            </Button>
          ))}
        </div>
        {form.end && !Number.isNaN(new Date(form.end).getTime()) ? (
          <span className="hint" data-testid="silence-ends">
            Ends {fmtTime(Math.floor(new Date(form.end).getTime() / 1000))} ({timeZoneLabel(from)})
          </span>
        ) : null}
      </fieldset>
      <Field label="Comment" error={shown("comment")}>
        <input
          value={form.comment}
          placeholder="why, e.g. deploying web-2"
          onChange={(e) => set("comment", e.target.value)}
        />
      </Field>
      {refusal && !refusal.field ? (
        <div className="banner banner-error" role="alert">
          <strong>Could not create the silence:</strong> {refusal.text}
        </div>
      ) : null}
      <div className="dialog-actions">
        {props.onCancel ? <Button onClick={props.onCancel}>Cancel</Button> : null}
        <Button kind="primary" type="submit" busy={create.isPending}>
          Create silence
        </Button>
      </div>
    </form>
  );
}

/** The matchers a dialog was opened with, by name: what the silence will mute. */
function FixedMatchers(props: { projectName: string; rule: string; vm: string }) {
  const rules = useProjectRules(props.projectName);
  const vms = useProjectVms(props.projectName);
  const rule = rules.data?.rules.find((r) => r.name === props.rule);
  const vm = vms.data?.find((v) => v.name === props.vm);
  return (
    <dl className="kv silence-matchers" data-testid="silence-matchers">
      <dt>Rule</dt>
      <dd data-rule={props.rule}>
        {props.rule ? rule?.spec?.displayName || lastSegment(props.rule) : "every rule"}
      </dd>
      <dt>VM</dt>
      <dd data-vm={props.vm}>{props.vm ? vm?.displayName || lastSegment(props.vm) : "every VM"}</dd>
    </dl>
  );
}

/** "Silence…" on an incident or a VM: the form in a dialog, its matchers filled in. */
export function SilenceDialog(props: {
  open: boolean;
  onClose: () => void;
  projectName: string;
  rule?: string;
  vm?: string;
  /** What is muted, for the title: "High CPU on web-2", "web-2". */
  what: string;
}) {
  return (
    <Dialog title={`Silence ${props.what}`} open={props.open} onClose={props.onClose}>
      <p className="muted small">
        Mutes the notifications of {props.rule ? "this rule" : "every rule"} on{" "}
        {props.vm ? "this VM" : "every VM"} for the window. Evaluation and incidents go on.
      </p>
      {props.open ? (
        <SilenceForm
          projectName={props.projectName}
          initial={{ rule: props.rule ?? "", vm: props.vm ?? "" }}
          fixed
          onCreated={props.onClose}
          onCancel={props.onClose}
          testId="silence-dialog-form"
        />
      ) : null}
    </Dialog>
  );
}

/** The project's active silences, once, for naming the silences an incident's `silencedBy` lists. */
export function useActiveSilences(projectName: string) {
  const q = useQuery({
    queryKey: ["silences", projectName, "ACTIVE", "all"],
    queryFn: () => api.silences.listSilences({ projectName, state: "ACTIVE", pageSize: 100 }),
    refetchInterval: 30_000,
  });
  return new Map((q.data?.silences ?? []).map((s) => [s.name, s]));
}

/** A silence as people name it: "until 14:00 · deploying" (silences have no display name). */
export function silenceLabel(s: Silence | undefined): string {
  if (!s) return "a silence";
  const until = fmtTime(s.endTimeUnix);
  return s.comment ? `until ${until} · ${s.comment}` : `until ${until}`;
}

/** "Silence…" on a VM's page: every rule's notifications about this VM, for a window. */
export function VmSilenceAction(props: { projectName: string; vmName: string; what: string }) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <Button
        onClick={() => setOpen(true)}
        title="Mute every rule's notifications about this VM for a window (a silence)"
      >
        Silence…
      </Button>
      <SilenceDialog
        open={open}
        onClose={() => setOpen(false)}
        projectName={props.projectName}
        vm={props.vmName}
        what={props.what}
      />
    </>
  );
}
