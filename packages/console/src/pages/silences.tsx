import type { Silence } from "@gen/svc/monitoring/v1/silences_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api.ts";
import {
  FilterSelect,
  PagedTable,
  RuleOptions,
  useProjectRules,
  VmOptions,
} from "../components/paged-list.tsx";
import { Badge, Button, ErrorBanner, Field, Page, Time, usePager } from "../components/ui.tsx";
import { lastSegment, newRequestId } from "../format.ts";
import { useProject } from "../session.tsx";

const STATES = [
  { value: "", label: "All silences" },
  { value: "ACTIVE", label: "Active" },
  { value: "PENDING", label: "Pending" },
  { value: "EXPIRED", label: "Expired" },
];

const tone = (s: string) =>
  (s === "ACTIVE" ? "warn" : s === "PENDING" ? "info" : "muted") as "warn" | "info" | "muted";

/** `<input type="datetime-local">` value (local time) → Unix seconds; "" → 0 (now). */
function unixOf(local: string): bigint {
  return local ? BigInt(Math.floor(new Date(local).getTime() / 1000)) : 0n;
}

/** Silences: windows that mute notifications of rules and/or VMs; evaluation and incidents go on. */
export function SilencesPage() {
  const project = useProject();
  const pager = usePager();
  const qc = useQueryClient();
  const [state, setState] = useState("");
  const [form, setForm] = useState({ comment: "", rule: "", vm: "", start: "", end: "" });
  const q = useQuery({
    queryKey: ["silences", project.name, state, pager.token],
    queryFn: () =>
      api.silences.listSilences({ projectName: project.name, state, pageSize: 25, pageToken: pager.token }),
    refetchInterval: 30_000,
  });
  const rules = useProjectRules(project.name);
  const ruleName = (n: string) =>
    rules.data?.rules.find((r) => r.name === n)?.spec?.displayName || lastSegment(n);
  const create = useMutation({
    mutationFn: () =>
      api.silences.createSilence({
        projectName: project.name,
        requestId: newRequestId(),
        comment: form.comment,
        ruleNames: form.rule ? [form.rule] : [],
        vmNames: form.vm ? [form.vm] : [],
        startTimeUnix: unixOf(form.start),
        endTimeUnix: unixOf(form.end),
      }),
    onSuccess: () => {
      setForm({ comment: "", rule: "", vm: "", start: "", end: "" });
      void qc.invalidateQueries({ queryKey: ["silences", project.name] });
    },
  });
  const expire = useMutation({
    mutationFn: (name: string) => api.silences.expireSilence({ name }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["silences", project.name] }),
  });
  const silences: Silence[] = q.data?.silences ?? [];
  return (
    <Page
      title="Silences"
      subtitle="Mute the notifications of rules and/or VMs over a window. Evaluation and incidents go on; deliveries due inside it are skipped as SILENCED."
    >
      {project.canWrite ? (
        <form
          className="card"
          data-testid="silence-form"
          onSubmit={(e) => {
            e.preventDefault();
            create.mutate();
          }}
        >
          <h2>New silence</h2>
          <div className="alert-form-grid">
            <Field label="Rule" hint="and/or a VM; both empty is refused">
              <select value={form.rule} onChange={(e) => setForm({ ...form, rule: e.target.value })}>
                <RuleOptions projectName={project.name} any="Any rule" />
              </select>
            </Field>
            <Field label="VM">
              <select value={form.vm} onChange={(e) => setForm({ ...form, vm: e.target.value })}>
                <VmOptions projectName={project.name} any="Any VM" />
              </select>
            </Field>
            <Field label="Starts" hint="empty: now">
              <input
                type="datetime-local"
                value={form.start}
                onChange={(e) => setForm({ ...form, start: e.target.value })}
              />
            </Field>
            <Field label="Ends">
              <input
                type="datetime-local"
                value={form.end}
                onChange={(e) => setForm({ ...form, end: e.target.value })}
              />
            </Field>
            <Field label="Comment">
              <input value={form.comment} onChange={(e) => setForm({ ...form, comment: e.target.value })} />
            </Field>
          </div>
          <div>
            <Button type="submit" busy={create.isPending}>
              Create silence
            </Button>
          </div>
          <ErrorBanner error={create.error} title="Could not create the silence" />
        </form>
      ) : null}
      <div className="filters filter-bar">
        <FilterSelect label="State" value={state} onChange={setState} pager={pager}>
          {STATES.map((s) => (
            <option key={s.value} value={s.value}>
              {s.label}
            </option>
          ))}
        </FilterSelect>
      </div>
      <ErrorBanner error={expire.error} title="Could not expire the silence" />
      <PagedTable
        what="silences"
        query={q}
        items={silences}
        pager={pager}
        empty={`No silences${state ? " in this state" : ""}.`}
        testId="silences"
        className="table-cards table-cards-stacked"
        columns={["State", "Window", "Mutes", "Comment", "By", ""]}
        row={(s) => (
          <tr key={s.name} data-name={s.name}>
            <td>
              <Badge tone={tone(s.state)}>{s.state.toLowerCase()}</Badge>
            </td>
            <td data-label="Window">
              <Time unix={s.startTimeUnix} /> → <Time unix={s.endTimeUnix} />
            </td>
            <td data-label="Mutes">
              {[...s.ruleNames.map(ruleName), ...s.vmNames.map(lastSegment)].join(", ")}
              {s.ruleNames.length === 0 ? <span className="muted"> (every rule)</span> : null}
              {s.vmNames.length === 0 ? <span className="muted"> (every VM)</span> : null}
            </td>
            <td data-label="Comment">{s.comment}</td>
            <td className="muted" data-label="By">
              {lastSegment(s.creator)}
            </td>
            <td>
              {project.canWrite && s.state !== "EXPIRED" ? (
                <Button
                  onClick={() => expire.mutate(s.name)}
                  busy={expire.isPending && expire.variables === s.name}
                >
                  Expire now
                </Button>
              ) : null}
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
