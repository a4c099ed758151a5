import type { Silence } from "@gen/svc/monitoring/v1/silences_pb.ts";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api.ts";
import { FilterSelect, PagedTable, useProjectRules, useProjectVms } from "../components/paged-list.tsx";
import { Person } from "../components/people.tsx";
import { SilenceForm } from "../components/silence-form.tsx";
import { Badge, Button, ErrorBanner, Page, Time, usePager } from "../components/ui.tsx";
import { lastSegment } from "../format.ts";
import { useProject } from "../session.tsx";

const STATES = [
  { value: "", label: "All silences" },
  { value: "ACTIVE", label: "Active" },
  { value: "PENDING", label: "Pending" },
  { value: "EXPIRED", label: "Expired" },
];

const tone = (s: string) =>
  (s === "ACTIVE" ? "warn" : s === "PENDING" ? "info" : "muted") as "warn" | "info" | "muted";

/** Silences: windows that mute notifications of rules and/or VMs; evaluation and incidents go on. */
export function SilencesPage() {
  const project = useProject();
  const pager = usePager();
  const qc = useQueryClient();
  const [state, setState] = useState("");
  const q = useQuery({
    queryKey: ["silences", project.name, state, pager.token],
    queryFn: () =>
      api.silences.listSilences({ projectName: project.name, state, pageSize: 25, pageToken: pager.token }),
    refetchInterval: 30_000,
  });
  const rules = useProjectRules(project.name);
  const ruleName = (n: string) =>
    rules.data?.rules.find((r) => r.name === n)?.spec?.displayName || lastSegment(n);
  const vms = useProjectVms(project.name);
  const vmName = (n: string) => vms.data?.find((v) => v.name === n)?.displayName || lastSegment(n);
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
        <section className="card">
          <h2>New silence</h2>
          <SilenceForm projectName={project.name} testId="silence-form" />
        </section>
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
              {[...s.ruleNames.map(ruleName), ...s.vmNames.map(vmName)].join(", ")}
              {s.ruleNames.length === 0 ? <span className="muted"> (every rule)</span> : null}
              {s.vmNames.length === 0 ? <span className="muted"> (every VM)</span> : null}
            </td>
            <td data-label="Comment">{s.comment}</td>
            <td className="muted" data-label="By">
              <Person user={s.creator} />
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
