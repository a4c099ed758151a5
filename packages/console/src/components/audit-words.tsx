import type { Key } from "@gen/svc/iam/v1/key_pb.ts";
import { useQueries, useQuery } from "@tanstack/react-query";
import { api } from "../api.ts";
import { lastSegment } from "../format.ts";
import { useProject } from "../session.tsx";
import { vmLink } from "./incident-format.tsx";
import { useProjectRules } from "./paged-list.tsx";
import { PersonLabel, usePeople, useServiceAccountNames } from "./people.tsx";

/**
 * Activity in words (issue 43, item 4): "Saved alert rule 'High CPU'" with the RPC method as detail,
 * resources and keys by their display names, never their resource paths.
 */

/** Past tense of the verbs the API's methods start with; "Login" and "Logout" read as sentences. */
const PAST: Record<string, string> = {
  Set: "Set",
  Reset: "Reset",
  Send: "Sent",
  Retry: "Retried",
  Run: "Ran",
};
const WHOLE: Record<string, string> = {
  Login: "Signed in",
  Logout: "Signed out",
  ExchangeCIToken: "Exchanged a GitHub identity for a CI token of trust",
  StartCITrustSetup: "Started the setup of CI trust",
  VerifyCITrustSetup: "Verified CI trust",
  RecoverLostKey: "Replaced the lost key",
  SendTestNotification: "Sent a test notification to",
};

function pastTense(verb: string): string {
  if (PAST[verb]) return PAST[verb];
  if (verb.endsWith("e")) return `${verb}d`;
  if (/[^aeiou]y$/.test(verb)) return `${verb.slice(0, -1)}ied`;
  return `${verb}ed`;
}

/** "SaveAlertRule" → ["Save", "alert rule"]; acronyms (CI, VM) keep their case. */
function splitMethod(method: string): [string, string] {
  const words = method.match(/[A-Z]+(?=[A-Z][a-z])|[A-Z][a-z]+|[A-Z]+|\d+/g) ?? [method];
  const [verb, ...rest] = words;
  return [verb, rest.map((w) => (w === w.toUpperCase() && w.length > 1 ? w : w.toLowerCase())).join(" ")];
}

/** An incident in words: its rule's display name and, apart from it, the VM it is on. */
export interface IncidentWords {
  rule: string;
  vm?: string;
}

/**
 * The sentence of an event: what happened to which named thing ("Saved alert rule 'High CPU'"); an
 * incident is its rule's name on its VM ("Acknowledged incident 'High CPU' on web-1").
 */
export function eventSentence(
  method: string,
  outcome: string,
  resourceName?: string,
  incident?: IncidentWords,
): string {
  const m = lastSegment(method);
  const [verb, object] = splitMethod(m);
  const named = incident
    ? ` '${incident.rule}'${incident.vm ? ` on ${incident.vm}` : ""}`
    : resourceName
      ? ` '${resourceName}'`
      : "";
  if (outcome !== "ok") return `Refused: ${verb.toLowerCase()} ${object}${named}`.trim();
  if (WHOLE[m]) return `${WHOLE[m]}${named}`;
  return `${pastTense(verb)} ${object}${named}`.trim();
}

/** An actor kind in words. */
export const ACTOR_KINDS: Record<string, string> = {
  USER: "signed in",
  PERSONAL_KEY: "with a personal key",
  SERVICE_ACCOUNT_KEY: "with a service-account key",
  CI_TOKEN: "with a CI token",
  OPERATOR: "operator",
  ANONYMOUS: "not signed in",
};

/** "changed spec.displayName, spec.threshold" → "changed display name, threshold". */
export function changedInWords(fields: readonly string[]): string {
  return fields
    .map((f) =>
      f
        .replace(/^spec\./, "")
        .replace(/([a-z])([A-Z])/g, "$1 $2")
        .toLowerCase(),
    )
    .join(", ");
}

/** The keys of the service accounts (and of the project) the events name, by display name. */
function useKeyNames(keyNames: readonly string[]): Map<string, Key> {
  const project = useProject();
  const parents = [
    ...new Set(
      keyNames
        .map((k) => k.slice(0, k.lastIndexOf("/keys/")))
        .filter((p) => p === project.name || p.startsWith(`${project.name}/serviceAccounts/`)),
    ),
  ];
  const lists = useQueries({
    queries: parents.map((parent) => ({
      queryKey: ["keys", parent],
      queryFn: () => api.keys.listKeys({ parent }),
      enabled: project.role === "owner",
      staleTime: 60_000,
    })),
  });
  const out = new Map<string, Key>();
  for (const l of lists) for (const k of l.data?.keys ?? []) out.set(k.name, k);
  return out;
}

/** Names of what audit events are about: rules, destinations, keys, service accounts, silences, trusts. */
export function useResourceNames(
  events: readonly { resource: string; actorDetail: Record<string, string> }[],
) {
  const project = useProject();
  const owner = project.role === "owner";
  const rules = useProjectRules(project.name);
  const destinations = useQuery({
    queryKey: ["destinations", project.name],
    queryFn: () => api.destinations.listDestinations({ projectName: project.name }),
    staleTime: 60_000,
  });
  const silences = useQuery({
    queryKey: ["silences", project.name, "", "all"],
    queryFn: () => api.silences.listSilences({ projectName: project.name, pageSize: 100 }),
    staleTime: 60_000,
  });
  const trusts = useQuery({
    queryKey: ["ciTrusts", project.name, "names"],
    queryFn: () => api.automation.listCITrusts({ parent: project.name }),
    enabled: owner,
    staleTime: 60_000,
  });
  const accountName = useServiceAccountNames();
  const keyNames = [...events.map((e) => e.resource), ...events.map((e) => e.actorDetail.key ?? "")].filter(
    (n) => n.includes("/keys/"),
  );
  const keys = useKeyNames(keyNames);
  // Incidents have no name of their own: each is read once (cached) for its rule's name and its VM.
  const incidentNames = [
    ...new Set(events.map((e) => e.resource).filter((n) => /\/incidents\/[^/]+$/.test(n))),
  ];
  const incidentReads = useQueries({
    queries: incidentNames.map((name) => ({
      queryKey: ["incident", name],
      queryFn: () => api.incidents.getIncident({ name }),
      staleTime: 60_000,
    })),
  });
  const incidents = new Map<string, IncidentWords>();
  for (const q of incidentReads) {
    const i = q.data;
    if (i?.ruleDisplayName) incidents.set(i.name, { rule: i.ruleDisplayName, vm: vmLink(i.vmName)?.label });
  }
  const incident = (name: string): IncidentWords | undefined => incidents.get(name);
  const nameOf = (name: string): string | undefined => {
    if (!name) return undefined;
    if (/^projects\/[^/]+$/.test(name)) return `project ${lastSegment(name)}`;
    if (name.includes("/keys/")) {
      const k = keys.get(name);
      return k ? `${k.displayName} (${k.secretHint})` : undefined;
    }
    if (/\/alertRules\//.test(name)) return rules.data?.rules.find((r) => r.name === name)?.spec?.displayName;
    if (/\/destinations\//.test(name))
      return destinations.data?.destinations.find((d) => d.name === name)?.displayName;
    if (/\/serviceAccounts\/[^/]+$/.test(name)) {
      const n = accountName(name);
      return n === lastSegment(name) ? undefined : n;
    }
    if (/\/silences\//.test(name)) {
      const s = silences.data?.silences.find((x) => x.name === name);
      return s?.comment || undefined;
    }
    if (/\/ciTrusts\//.test(name)) {
      const tr = trusts.data?.trusts.find((x) => x.name === name);
      return tr?.intended ? `${tr.intended.repository} ${tr.intended.workflow}` : undefined;
    }
    if (/\/incidents\//.test(name)) {
      const i = incident(name);
      return i ? `${i.rule}${i.vm ? ` on ${i.vm}` : ""}` : undefined;
    }
    return undefined;
  };
  return Object.assign(nameOf, { incident });
}

/** Who did something, by name: a person, a key ("routes (svcs_AbC1…)") or a service account; the id on hover. */
export function ActorName(props: { name: string }) {
  const people = usePeople();
  const nameOf = useResourceNames([{ resource: props.name, actorDetail: {} }]);
  if (props.name.startsWith("users/") && !props.name.includes("/keys/")) {
    return <PersonLabel who={people(props.name)} />;
  }
  const label = nameOf(props.name);
  return (
    <span className="person" title={props.name}>
      {label ? `${props.name.includes("/keys/") ? "key " : ""}${label}` : <code>{props.name}</code>}
    </span>
  );
}
