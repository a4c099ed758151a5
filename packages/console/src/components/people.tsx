import { useQuery } from "@tanstack/react-query";
import { api } from "../api.ts";
import { lastSegment, MISSING } from "../format.ts";
import { useProject, useSession } from "../session.tsx";
import { COPY_ATTR } from "./person-copy.ts";

/**
 * People by name, not `users/7j2i6…` (issue 43, item 4): the project's members (ListMembers) give each
 * user's display name and email. The page shows the name; hovering (title) and copying the text give
 * the full name with the email. Someone who is no longer a member is "a former member".
 */

export interface PersonInfo {
  /** What the page shows: "you", the display name, the email, or "a former member". */
  label: string;
  /** The full name with the email (and the id), for hover. */
  full: string;
}

export function useMembers() {
  const project = useProject();
  return useQuery({
    queryKey: ["members", project.name],
    queryFn: async () => (await api.destinations.listMembers({ projectName: project.name })).members,
    staleTime: 60_000,
  });
}

/** users/<id> → who it is; other actors ("evaluator", "operator", a service account) are passed through. */
export function usePeople(): (user: string) => PersonInfo {
  const { session } = useSession();
  const members = useMembers();
  const byUser = new Map((members.data ?? []).map((m) => [m.user, m]));
  return (user) => {
    if (!user) return { label: MISSING, full: "" };
    const m = byUser.get(user);
    const name = m ? m.displayName || m.email : "";
    const full = m ? [m.displayName, m.email && `<${m.email}>`].filter(Boolean).join(" ") : user;
    if (user === session.user) return { label: "you", full: full || user };
    if (m) return { label: name, full };
    // Only a member list that was read may say someone is no longer a member; while it loads, or if it
    // could not be read, the id is all there is.
    if (user.startsWith("users/") && members.data)
      return { label: "a former member", full: `${user} (no longer a member)` };
    return { label: user, full: user };
  };
}

/** A person by name; hover and copy give the full name and email. */
export function Person(props: { user: string }) {
  return <PersonLabel who={usePeople()(props.user)} />;
}

/** A name as shown, with its full form on hover (`title`) and in what is copied (`data-copy`). */
export function PersonLabel(props: { who: PersonInfo; block?: boolean }) {
  const attrs = { className: "person", title: props.who.full, [COPY_ATTR]: props.who.full || undefined };
  return props.block ? <div {...attrs}>{props.who.label}</div> : <span {...attrs}>{props.who.label}</span>;
}

/** Service accounts by display name (owners only may list them; others see the last segment). */
export function useServiceAccountNames(): (name: string) => string {
  const project = useProject();
  const q = useQuery({
    queryKey: ["serviceAccounts", project.name],
    queryFn: () => api.serviceAccounts.listServiceAccounts({ parent: project.name }),
    enabled: project.role === "owner",
    staleTime: 60_000,
  });
  const names = new Map((q.data?.serviceAccounts ?? []).map((a) => [a.name, a.displayName]));
  return (name) => names.get(name) || lastSegment(name);
}
